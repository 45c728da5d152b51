/**
 * @file copy_test.cpp
 * @brief copy_bytes and copy_bytes_async: move the bytes, count them per (source, destination)
 * kind, reject DISK; a stream_fence on the CPU backend has nothing to wait for.
 */
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

namespace spillway {
namespace {

constexpr memory_kind KINDS[] = {
  memory_kind::DEVICE, memory_kind::PINNED_HOST, memory_kind::HOST, memory_kind::DISK};

/// Checks that only the (source, destination) counter moved since `before`, by `bytes`.
void expect_counted(copy_counters const& before,
                    memory_kind source,
                    memory_kind destination,
                    std::size_t bytes) {
  copy_counters const after = copied_bytes();
  for (memory_kind const from : KINDS) {
    for (memory_kind const to : KINDS) {
      std::size_t const expected = from == source && to == destination ? bytes : 0;
      EXPECT_EQ(after.between(from, to) - before.between(from, to), expected)
        << to_string(from) << " -> " << to_string(to);
    }
  }
}

TEST(Copy, CopiesAndCountsPerKindPair) {
  std::size_t bytes = 100;
  for (memory_kind const source_kind : KINDS) {
    for (memory_kind const destination_kind : KINDS) {
      if (source_kind == memory_kind::DISK || destination_kind == memory_kind::DISK) {
        continue;
      }
      SCOPED_TRACE(std::string{to_string(source_kind)} + " -> " +
                   std::string{to_string(destination_kind)});
      std::vector<unsigned char> source(bytes);
      for (std::size_t index = 0; index < bytes; ++index) {
        source[index] = static_cast<unsigned char>(index + bytes);
      }
      std::vector<unsigned char> destination(bytes, 0);
      copy_counters const before = copied_bytes();
      copy_bytes(
        destination.data(), destination_kind, source.data(), source_kind, bytes, default_stream());
      EXPECT_EQ(destination, source);
      expect_counted(before, source_kind, destination_kind, bytes);
      ++bytes;  // a different size per pair, so that a counter mix-up shows
    }
  }
}

TEST(Copy, AsyncCopiesOnTheCpuAreCompleteAtReturnAndCounted) {
  std::vector<unsigned char> source(4099);
  for (std::size_t index = 0; index < source.size(); ++index) {
    source[index] = static_cast<unsigned char>(index * 7);
  }
  std::vector<unsigned char> device(source.size(), 0);
  std::vector<unsigned char> back(source.size(), 0);
  copy_counters const before = copied_bytes();
  stream_fence fence;
  EXPECT_FALSE(copy_bytes_async(device.data(),
                                memory_kind::DEVICE,
                                source.data(),
                                memory_kind::HOST,
                                source.size(),
                                default_stream()))
    << "nothing is queued on the CPU backend";
  EXPECT_EQ(device, source);  // the emulated device is host memory: copied already
  fence.record(default_stream());
  fence.wait();
  fence.wait();  // nothing recorded any more: returns at once
  expect_counted(before, memory_kind::HOST, memory_kind::DEVICE, source.size());
  stream_fence moved(std::move(fence));
  moved.record(default_stream());
  fence = std::move(moved);
  fence.wait();
  copy_bytes_async(back.data(),
                   memory_kind::PINNED_HOST,
                   device.data(),
                   memory_kind::DEVICE,
                   back.size(),
                   default_stream());
  EXPECT_EQ(back, source);
  EXPECT_THROW(copy_bytes_async(back.data(),
                                memory_kind::DISK,
                                source.data(),
                                memory_kind::HOST,
                                back.size(),
                                default_stream()),
               invalid_argument);
}

TEST(Copy, ConcurrentLargeCopiesCutIntoPartsMoveEveryByteAndNoOther) {
  // Sizes around the parts' edges (1 MiB a part at least, cut on 64-byte lines), at offsets off
  // any alignment, with more pool threads than cores; the bytes around the destination stay.
  constexpr std::size_t MIB = std::size_t{1} << 20;
  for (std::size_t const threads : {1U, 2U, 3U, 8U, 16U}) {
    testing::worker_threads_guard const pool{threads};
    for (std::size_t const bytes : {2 * MIB - 1, 2 * MIB, 3 * MIB + 17, 16 * MIB + 65}) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(bytes) + " bytes");
      std::vector<unsigned char> source(bytes + 3);
      for (std::size_t index = 0; index < source.size(); ++index) {
        source[index] = static_cast<unsigned char>(index * 131 + index / 251);
      }
      std::vector<unsigned char> destination(bytes + 10, 0xA5);
      copy_counters const before = copied_bytes();
      copy_bytes(destination.data() + 5,
                 memory_kind::DEVICE,
                 source.data() + 3,
                 memory_kind::HOST,
                 bytes,
                 default_stream());
      expect_counted(before, memory_kind::HOST, memory_kind::DEVICE, bytes);
      EXPECT_TRUE(std::equal(source.begin() + 3, source.end(), destination.begin() + 5));
      EXPECT_TRUE(std::all_of(
        destination.begin(), destination.begin() + 5, [](auto byte) { return byte == 0xA5; }));
      EXPECT_TRUE(std::all_of(
        destination.end() - 5, destination.end(), [](auto byte) { return byte == 0xA5; }));
    }
  }
}

TEST(Copy, ZeroBytesCountsNothing) {
  copy_counters const before = copied_bytes();
  copy_bytes(nullptr, memory_kind::DEVICE, nullptr, memory_kind::HOST, 0, default_stream());
  expect_counted(before, memory_kind::HOST, memory_kind::DEVICE, 0);
}

TEST(Copy, DiskIsRejectedWithInvalidArgument) {
  std::vector<unsigned char> source(16, 1);
  std::vector<unsigned char> destination(16, 0);
  copy_counters const before = copied_bytes();
  for (auto const& [source_kind, destination_kind] :
       {std::pair{memory_kind::DISK, memory_kind::HOST},
        std::pair{memory_kind::HOST, memory_kind::DISK},
        std::pair{memory_kind::DISK, memory_kind::DISK}}) {
    try {
      copy_bytes(destination.data(),
                 destination_kind,
                 source.data(),
                 source_kind,
                 source.size(),
                 default_stream());
      ADD_FAILURE() << to_string(source_kind) << " -> " << to_string(destination_kind);
    } catch (invalid_argument const& error) {
      EXPECT_THAT(error.what(), ::testing::HasSubstr("disk is not addressable memory"));
    }
  }
  EXPECT_EQ(destination, std::vector<unsigned char>(16, 0));
  expect_counted(before, memory_kind::HOST, memory_kind::DEVICE, 0);
}

}  // namespace
}  // namespace spillway
