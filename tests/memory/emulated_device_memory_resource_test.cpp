/**
 * @file emulated_device_memory_resource_test.cpp
 * @brief The CPU backend's device: a hard capacity, exact counting, the out-of-memory report.
 */
#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <limits>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using ::testing::HasSubstr;

TEST(EmulatedDeviceMemoryResource, KindIsDeviceAndDefaultIsUnbounded) {
  emulated_device_memory_resource device;
  EXPECT_EQ(device.kind(), memory_kind::DEVICE);
  EXPECT_EQ(device.capacity(), std::numeric_limits<std::size_t>::max());
  EXPECT_EQ(device.used_bytes(), 0U);
  EXPECT_EQ(device.peak_bytes(), 0U);
}

TEST(EmulatedDeviceMemoryResource, BeyondCapacityThrowsOutOfMemoryNamingTheSizes) {
  emulated_device_memory_resource device{1000};
  void* held = device.allocate(600);
  try {
    void* pointer = device.allocate(500);
    device.deallocate(pointer, 500);
    FAIL() << "500 bytes were allocated with 400 available";
  } catch (out_of_memory const& error) {
    EXPECT_THAT(error.what(), HasSubstr("requested 500 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("available 400 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("capacity 1000 bytes"));
    EXPECT_EQ(error.requested_bytes(), 500U);
    EXPECT_EQ(error.available_bytes(), 400U);
    EXPECT_EQ(error.capacity_bytes(), 1000U);
  }
  device.deallocate(held, 600);
}

TEST(EmulatedDeviceMemoryResource, ExactlyAtCapacitySucceeds) {
  emulated_device_memory_resource device{4_KiB};
  void* whole = device.allocate(4_KiB);
  ASSERT_NE(whole, nullptr);
  EXPECT_EQ(device.used_bytes(), 4_KiB);
  EXPECT_EQ(device.available_bytes(), 0U);
  try {
    [[maybe_unused]] void* pointer = device.allocate(1);
    FAIL() << "one byte beyond capacity was allocated";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), 1U);
    EXPECT_EQ(error.available_bytes(), 0U);
    EXPECT_EQ(error.capacity_bytes(), 4_KiB);
  }
  device.deallocate(whole, 4_KiB);
  EXPECT_EQ(device.available_bytes(), 4_KiB);
}

TEST(EmulatedDeviceMemoryResource, NothingIsCountedAfterAFailure) {
  emulated_device_memory_resource device{1000};
  void* held = device.allocate(700);
  EXPECT_THROW(static_cast<void>(device.allocate(301)), out_of_memory);
  EXPECT_THROW(static_cast<void>(device.allocate(5000)), out_of_memory);
  EXPECT_EQ(device.used_bytes(), 700U);
  EXPECT_EQ(device.peak_bytes(), 700U);
  EXPECT_EQ(device.available_bytes(), 300U);
  // The remaining 300 bytes are still there to take.
  void* rest = device.allocate(300);
  EXPECT_EQ(device.used_bytes(), 1000U);
  device.deallocate(rest, 300);
  device.deallocate(held, 700);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(EmulatedDeviceMemoryResource, PeakBytesIsTheHighWaterMark) {
  emulated_device_memory_resource device{1_MiB};
  void* a = device.allocate(300);
  void* b = device.allocate(500);  // 800 outstanding: the peak
  device.deallocate(a, 300);
  void* c = device.allocate(100);  // 600 outstanding
  EXPECT_EQ(device.used_bytes(), 600U);
  EXPECT_EQ(device.peak_bytes(), 800U);
  device.deallocate(b, 500);
  device.deallocate(c, 100);
  EXPECT_EQ(device.used_bytes(), 0U);
  EXPECT_EQ(device.peak_bytes(), 800U);
}

TEST(EmulatedDeviceMemoryResource, ZeroBytesCountsNothing) {
  emulated_device_memory_resource device{100};
  void* pointer = device.allocate(0);
  EXPECT_EQ(device.used_bytes(), 0U);
  device.deallocate(pointer, 0);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(EmulatedDeviceMemoryResource, NonPowerOfTwoAlignmentThrowsInvalidArgument) {
  emulated_device_memory_resource device{1000};
  EXPECT_THROW(static_cast<void>(device.allocate(64, 24)), invalid_argument);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(EmulatedDeviceMemoryResource, ConcurrentCapacityIsNeverExceeded) {
  constexpr std::size_t THREADS = 8;
  constexpr std::size_t BLOCK   = 128;
  constexpr std::size_t BLOCKS  = 200;  // the capacity holds exactly this many blocks
  emulated_device_memory_resource device{BLOCK * BLOCKS};
  std::vector<std::vector<void*>> held(THREADS);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&device, &mine = held[thread]] {
      // Nothing is freed, so once one allocation fails every later one fails too.
      while (true) {
        try {
          mine.push_back(device.allocate(BLOCK));
        } catch (out_of_memory const&) {
          return;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::size_t granted = 0;
  for (auto const& mine : held) {
    granted += mine.size();
  }
  EXPECT_EQ(granted, BLOCKS);
  EXPECT_EQ(device.used_bytes(), BLOCK * BLOCKS);
  EXPECT_EQ(device.peak_bytes(), BLOCK * BLOCKS);
  for (auto const& mine : held) {
    for (void* pointer : mine) {
      device.deallocate(pointer, BLOCK);
    }
  }
  EXPECT_EQ(device.used_bytes(), 0U);
}

}  // namespace
}  // namespace spillway
