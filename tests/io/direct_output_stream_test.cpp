// The Parquet writer's output stream: bytes come back exactly, whatever the write sizes and
// whether the file system takes direct writes or not.
#include "io/io_test_support.hpp"

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/arrow_memory_pool.hpp"
#include "io/arrow/direct_output_stream.hpp"
#endif

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

class DirectOutputStreamTest : public testing::io_test {
 protected:
  /// Writes `sizes` bytes at a time (a flush after every third write) and reads the file back.
  void write_and_compare(std::string const& file, std::vector<std::size_t> const& sizes) {
    detail::arrow_memory_pool pool{host_};
    // A buffer of two units: writes cross it, fill it exactly and span it several times.
    auto const stream =
      detail::direct_output_stream::Open(file, &pool, 2 * detail::direct_output_stream::ALIGNMENT);
    ASSERT_TRUE(stream.ok()) << stream.status().ToString();
    RecordProperty("direct", (*stream)->direct() ? "yes" : "no");
    std::mt19937_64 engine{sizes.size()};
    std::vector<char> expected;
    for (std::size_t index = 0; index < sizes.size(); ++index) {
      std::vector<char> bytes(sizes[index]);
      for (auto& byte : bytes) {
        byte = static_cast<char>(engine());
      }
      ASSERT_TRUE((*stream)->Write(bytes.data(), static_cast<int64_t>(bytes.size())).ok());
      expected.insert(expected.end(), bytes.begin(), bytes.end());
      if (index % 3 == 2) {
        ASSERT_TRUE((*stream)->Flush().ok());
      }
      ASSERT_EQ(*(*stream)->Tell(), static_cast<int64_t>(expected.size()));
    }
    ASSERT_TRUE((*stream)->Close().ok());
    EXPECT_TRUE((*stream)->closed());
    std::ifstream in(file, std::ios::binary);
    std::vector<char> const actual{std::istreambuf_iterator<char>(in), {}};
    ASSERT_EQ(actual.size(), expected.size());
    EXPECT_TRUE(actual == expected);
  }

  static std::vector<std::size_t> write_sizes() {
    std::size_t const unit = detail::direct_output_stream::ALIGNMENT;
    return {1, unit - 1, unit, unit + 1, 0, 2 * unit, 3 * unit + 7, 5, 2 * unit - 5, 40000, 3};
  }
};

TEST_F(DirectOutputStreamTest, BytesComeBackExactlyAtEveryWriteSize) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  write_and_compare(path("sizes.bin"), write_sizes());
  // A whole number of units: no tail through the page cache.
  write_and_compare(path("units.bin"), {detail::direct_output_stream::ALIGNMENT * 5});
  write_and_compare(path("empty.bin"), {});
}

TEST_F(DirectOutputStreamTest, AFileSystemWithoutDirectWritesGetsBufferedOnes) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  std::filesystem::path const memory{"/dev/shm"};
  if (!std::filesystem::is_directory(memory)) {
    GTEST_SKIP() << "no /dev/shm";
  }
  auto const file = (memory / ("spillway_direct_" + std::to_string(::getpid()))).string();
  write_and_compare(file, write_sizes());
  std::filesystem::remove(file);
}

TEST_F(DirectOutputStreamTest, ErrorsNameTheFile) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  detail::arrow_memory_pool pool{host_};
  auto const missing = path("no/such/directory/out.parquet");
  auto const refused = detail::direct_output_stream::Open(missing, &pool, 4096);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().ToString(), ::testing::HasSubstr(missing));

  auto const stream = detail::direct_output_stream::Open(path("closed.bin"), &pool, 4096);
  ASSERT_TRUE(stream.ok());
  ASSERT_TRUE((*stream)->Close().ok());
  EXPECT_TRUE((*stream)->Close().ok());  // twice is fine
  EXPECT_FALSE((*stream)->Write("x", 1).ok());
  EXPECT_FALSE((*stream)->Tell().ok());
}

TEST_F(DirectOutputStreamTest, AFullDiskIsAnErrorAndNothingIsWrittenAfterIt) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  if (!std::filesystem::exists("/dev/full")) {
    GTEST_SKIP() << "no /dev/full";
  }
  detail::arrow_memory_pool pool{host_};
  auto const stream = detail::direct_output_stream::Open("/dev/full", &pool, 4096);
  ASSERT_TRUE(stream.ok()) << stream.status().ToString();
  std::vector<char> const bytes(10000, 'x');
  auto const failed = (*stream)->Write(bytes.data(), static_cast<int64_t>(bytes.size()));
  ASSERT_FALSE(failed.ok());
  EXPECT_THAT(failed.ToString(), ::testing::HasSubstr("/dev/full"));
  EXPECT_THAT(failed.ToString(), ::testing::HasSubstr("No space left on device"));
  // The failure sticks: no later write, flush or close writes again or claims success.
  EXPECT_FALSE((*stream)->Write("x", 1).ok());
  EXPECT_FALSE((*stream)->Flush().ok());
  EXPECT_FALSE((*stream)->Close().ok());
  EXPECT_TRUE((*stream)->closed());
}

#endif

}  // namespace
}  // namespace spillway
