#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/spill/spill_file.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace {

class SpillFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // One directory per test and process: ctest runs tests of this suite in parallel.
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_ =
      std::filesystem::path(::testing::TempDir()) /
      ("spill_file_test_" + std::string{info->name()} + "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
    path_ = (directory_ / "blocks.blk").string();
    payload_.resize(5000);
    for (std::size_t index = 0; index < payload_.size(); ++index) {
      payload_[index] = static_cast<std::byte>(index * 31);
    }
    // Two blocks, the second at a non-zero offset.
    auto file = files_.open_writable(path_);
    first_    = write(*file, 0, 7);
    second_   = write(*file, first_.block_size(), 8);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  spill_block_location write(writable_file& file, std::uint64_t offset, std::uint64_t id) {
    spill_block_location location;
    location.path                 = path_;
    location.offset               = offset;
    location.header.payload_codec = codec::NONE;
    location.header.buffer_id     = id;
    location.header.raw_size      = payload_.size();
    location.header.stored_size   = payload_.size();
    location.header.checksum      = checksum64(payload_);
    write_spill_block(file, offset, location.header, payload_);
    return location;
  }

  void flip_byte(std::uint64_t at) {
    std::fstream stream(path_, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekg(static_cast<std::streamoff>(at));
    char byte = 0;
    stream.read(&byte, 1);
    byte = static_cast<char>(byte ^ 0x10);
    stream.seekp(static_cast<std::streamoff>(at));
    stream.write(&byte, 1);
  }

  posix_file_system files_;
  host_memory_resource host_;
  std::filesystem::path directory_;
  std::string path_;
  std::vector<std::byte> payload_;
  spill_block_location first_;
  spill_block_location second_;
};

TEST_F(SpillFileTest, BlocksReadBackBitExact) {
  for (auto const* location : {&first_, &second_}) {
    auto const bytes = read_spill_block(files_, *location, location->header.buffer_id, host_);
    ASSERT_EQ(bytes.size(), payload_.size());
    EXPECT_EQ(std::memcmp(bytes.data(), payload_.data(), payload_.size()), 0);
  }
}

TEST_F(SpillFileTest, FlippedPayloadByteIsChecksumErrorNamingBufferAndFile) {
  flip_byte(second_.offset + SPILL_BLOCK_HEADER_SIZE + 100);
  try {
    (void)read_spill_block(files_, second_, 8, host_);
    FAIL() << "no error";
  } catch (corruption_error const& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("spill buffer 8"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr(path_));
    EXPECT_THAT(error.what(), ::testing::HasSubstr("checksum mismatch"));
  }
  // The other block is untouched.
  EXPECT_NO_THROW((void)read_spill_block(files_, first_, 7, host_));
}

TEST_F(SpillFileTest, FlippedHeaderByteIsDetected) {
  for (std::uint64_t const at : {0U, 4U, 6U, 9U, 17U, 25U, 33U, 41U}) {
    SetUp();
    flip_byte(at);
    EXPECT_THROW((void)read_spill_block(files_, first_, 7, host_), corruption_error)
      << "byte " << at;
  }
}

TEST_F(SpillFileTest, BlockOfAnotherBufferIsRejected) {
  EXPECT_THROW((void)read_spill_block(files_, first_, 8, host_), corruption_error);
}

TEST_F(SpillFileTest, TruncatedFileIsCorruption) {
  std::filesystem::resize_file(path_, second_.offset + SPILL_BLOCK_HEADER_SIZE + 10);
  EXPECT_THROW((void)read_spill_block(files_, second_, 8, host_), corruption_error);
  std::filesystem::resize_file(path_, second_.offset + 20);
  EXPECT_THROW((void)read_spill_block(files_, second_, 8, host_), corruption_error);
  EXPECT_NO_THROW((void)read_spill_block(files_, first_, 7, host_));
}

TEST_F(SpillFileTest, DeletedFileIsIoErrorNamingBufferAndFile) {
  std::filesystem::remove(path_);
  try {
    (void)read_spill_block(files_, first_, 7, host_);
    FAIL() << "no error";
  } catch (corruption_error const&) {
    FAIL() << "a missing file is an io_error, not corruption";
  } catch (io_error const& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("spill buffer 7"));
    EXPECT_THAT(error.what(), ::testing::HasSubstr(path_));
  }
}

}  // namespace
}  // namespace spillway
