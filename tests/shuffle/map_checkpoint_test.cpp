// The checkpoint files of map outputs: exact round trips, and every damaged or foreign file is
// "not checkpointed" (its map task runs again), never wrong shards.
#include "shuffle/map_checkpoint.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <unistd.h>
#include <vector>

namespace spillway::detail {
namespace {

namespace fs = std::filesystem;

class MapCheckpoint : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::path(::testing::TempDir()) /
           ("map_checkpoint_" + std::to_string(::getpid()) + "_" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    // Frames of 0 bytes, 100 bytes and 3 MiB (larger than the staging piece).
    for (std::size_t bytes : {std::size_t{0}, std::size_t{100}, std::size_t{3} << 20U}) {
      std::vector<std::byte> frame(bytes);
      for (std::size_t i = 0; i < bytes; ++i) {
        frame[i] = static_cast<std::byte>((i * 131 + bytes) & 0xFFU);
      }
      frames_.push_back(std::move(frame));
    }
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::vector<shard_to_checkpoint> shards() const {
    std::vector<shard_to_checkpoint> out;
    std::size_t partition = 3;
    for (auto const& frame : frames_) {
      out.push_back({partition, frame.data(), frame.size(), memory_kind::HOST});
      partition += 4;
    }
    return out;
  }

  void expect_round_trip(map_checkpoint const& checkpoint, std::string const& identity) {
    auto const loaded = checkpoint.load(identity, default_stream(), host_);
    ASSERT_TRUE(loaded.has_value());
    ASSERT_EQ(loaded->size(), frames_.size());
    for (std::size_t i = 0; i < frames_.size(); ++i) {
      EXPECT_EQ((*loaded)[i].partition, 3 + 4 * i);
      ASSERT_EQ((*loaded)[i].frame.size(), frames_[i].size());
      if (!frames_[i].empty()) {
        EXPECT_EQ(std::memcmp((*loaded)[i].frame.data(), frames_[i].data(), frames_[i].size()), 0);
      }
    }
  }

  fs::path dir_;
  host_memory_resource host_;
  std::vector<std::vector<std::byte>> frames_;
};

TEST_F(MapCheckpoint, RoundTripAndAbsent) {
  map_checkpoint checkpoint(dir_.string(), 42, host_);
  EXPECT_FALSE(checkpoint.load("file-a:0", default_stream(), host_).has_value());
  checkpoint.save("file-a:0", shards());
  expect_round_trip(checkpoint, "file-a:0");
  EXPECT_FALSE(checkpoint.load("file-a:1", default_stream(), host_).has_value());
  // Only the final file remains: no temporary files.
  std::size_t files = 0;
  for ([[maybe_unused]] auto const& entry : fs::directory_iterator(dir_)) {
    ++files;
  }
  EXPECT_EQ(files, 1U);
}

TEST_F(MapCheckpoint, AnotherFingerprintIsNotUsed) {
  map_checkpoint(dir_.string(), 42, host_).save("m", shards());
  map_checkpoint const other(dir_.string(), 43, host_);
  EXPECT_FALSE(other.load("m", default_stream(), host_).has_value());
}

TEST_F(MapCheckpoint, EveryDamageIsDetected) {
  map_checkpoint checkpoint(dir_.string(), 7, host_);
  checkpoint.save("m", shards());
  auto const path = checkpoint.path_of("m");
  auto const size = fs::file_size(path);
  std::vector<char> original(size);
  {
    std::ifstream in(path, std::ios::binary);
    in.read(original.data(), static_cast<std::streamsize>(size));
  }
  auto const write = [&](std::vector<char> const& bytes) {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  };
  // A flipped byte anywhere (header, identity, each frame, table, trailer) is caught.
  for (std::size_t at : {std::size_t{3},
                         std::size_t{40},
                         std::size_t{41},
                         std::size_t{200},
                         std::size_t{1} << 20U,
                         size - 60,
                         size - 3}) {
    auto damaged = original;
    damaged[at] ^= 0x10;
    write(damaged);
    EXPECT_FALSE(checkpoint.load("m", default_stream(), host_).has_value()) << "byte " << at;
  }
  // Truncated anywhere.
  for (std::size_t keep : {std::size_t{0}, std::size_t{20}, std::size_t{500}, size - 1}) {
    write(std::vector<char>(original.begin(), original.begin() + static_cast<long>(keep)));
    EXPECT_FALSE(checkpoint.load("m", default_stream(), host_).has_value()) << keep << " bytes";
  }
  write(original);
  expect_round_trip(checkpoint, "m");
}

TEST_F(MapCheckpoint, FramesComeFromTheGivenResource) {
  map_checkpoint checkpoint(dir_.string(), 1, host_);
  checkpoint.save("m", shards());
  statistics_resource_adaptor counted(host_);
  auto loaded = checkpoint.load("m", default_stream(), counted);
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(counted.statistics().current_bytes, 100U + (3U << 20U));
}

TEST_F(MapCheckpoint, UnusableDirectoryIsAClearErrorAndLeavesNoFile) {
  fs::create_directories(dir_.parent_path());
  { std::ofstream(dir_.string()) << "a file, not a directory"; }
  EXPECT_THROW(map_checkpoint(dir_.string(), 1, host_), spillway::io_error);
  fs::remove(dir_);
  map_checkpoint checkpoint(dir_.string(), 1, host_);
  fs::remove_all(dir_);  // gone after construction: the write fails, naming the file
  try {
    checkpoint.save("m", shards());
    FAIL() << "expected io_error";
  } catch (spillway::io_error const& e) {
    EXPECT_NE(std::string(e.what()).find("map-"), std::string::npos) << e.what();
  }
  EXPECT_FALSE(fs::exists(checkpoint.path_of("m")));
}

}  // namespace
}  // namespace spillway::detail
