/**
 * @file large_pages_test.cpp
 * @brief Large host blocks and the cache that hands freed ones out again: reuse, a larger block
 * cut down to a request, the bound of capacity minus live bytes, and concurrent use.
 */
#include "memory/detail/large_pages.hpp"

#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using detail::block_cache;

#define SKIP_UNLESS_MAPPED()                                                              \
  if (!detail::LARGE_BLOCKS_MAPPED) {                                                     \
    GTEST_SKIP() << "under AddressSanitizer large blocks come from operator new and are " \
                    "not cached";                                                         \
  }

/// Writes `bytes` of `value` to `block` and checks every one of them reads back.
void fill_and_check(void* block, std::size_t bytes, unsigned char value) {
  std::memset(block, value, bytes);
  auto const* bytes_of = static_cast<unsigned char const*>(block);
  for (std::size_t at = 0; at < bytes; at += 4096) {
    ASSERT_EQ(bytes_of[at], value) << at;
  }
  ASSERT_EQ(bytes_of[bytes - 1], value);
}

TEST(BlockCache, AFreedBlockIsHandedOutAgain) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  void* first = cache.allocate(8_MiB, 64, 8_MiB);
  fill_and_check(first, 8_MiB, 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % detail::LARGE_PAGE_BYTES, 0U);
  cache.deallocate(first, 8_MiB, 64, 0);
  EXPECT_EQ(cache.cached_bytes(), 8_MiB);
  void* again = cache.allocate(8_MiB - 100, 64, 8_MiB - 100);
  EXPECT_EQ(again, first);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  fill_and_check(again, 8_MiB - 100, 2);
  cache.deallocate(again, 8_MiB - 100, 64, 0);
}

TEST(BlockCache, ALargerBlockIsCutDownToTheRequest) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  void* large = cache.allocate(16_MiB, 64, 16_MiB);
  cache.deallocate(large, 16_MiB, 64, 0);
  void* smaller = cache.allocate(6_MiB, 4096, 6_MiB);
  EXPECT_EQ(smaller, large);
  EXPECT_EQ(cache.cached_bytes(), 0U) << "the unused tail is unmapped, not cached";
  fill_and_check(smaller, 6_MiB, 3);
  // Freed, the cut block is 6 MiB: an 8 MiB request maps a fresh one.
  cache.deallocate(smaller, 6_MiB, 4096, 0);
  EXPECT_EQ(cache.cached_bytes(), 6_MiB);
  void* fresh = cache.allocate(8_MiB, 64, 8_MiB);
  EXPECT_EQ(cache.cached_bytes(), 6_MiB);
  fill_and_check(fresh, 8_MiB, 4);
  cache.deallocate(fresh, 8_MiB, 64, 0);
  EXPECT_EQ(cache.cached_bytes(), 14_MiB);
}

TEST(BlockCache, LiveAndCachedBytesStayWithinTheCapacity) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{16_MiB};
  void* a = cache.allocate(8_MiB, 64, 8_MiB);
  void* b = cache.allocate(8_MiB, 64, 16_MiB);
  cache.deallocate(a, 8_MiB, 64, 8_MiB);
  EXPECT_EQ(cache.cached_bytes(), 8_MiB);
  cache.deallocate(b, 8_MiB, 64, 0);
  EXPECT_EQ(cache.cached_bytes(), 16_MiB);
  // 12 MiB fits no cached block: both are unmapped to make room for a fresh one.
  void* c = cache.allocate(12_MiB, 64, 12_MiB);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  fill_and_check(c, 12_MiB, 5);
  void* d = cache.allocate(4_MiB, 64, 16_MiB);
  cache.deallocate(c, 12_MiB, 64, 4_MiB);
  EXPECT_EQ(cache.cached_bytes(), 12_MiB);
  cache.deallocate(d, 4_MiB, 64, 0);
  EXPECT_EQ(cache.cached_bytes(), 16_MiB);
  // A block whose caching would pass the capacity is unmapped instead.
  block_cache small{6_MiB};
  void* e = small.allocate(8_MiB, 64, 8_MiB);
  small.deallocate(e, 8_MiB, 64, 0);
  EXPECT_EQ(small.cached_bytes(), 0U);
}

TEST(BlockCache, SmallBlocksAndLargeAlignmentsAreNotCached) {
  block_cache cache{64_MiB};
  void* small = cache.allocate(1_MiB, 64, 1_MiB);
  fill_and_check(small, 1_MiB, 6);
  cache.deallocate(small, 1_MiB, 64, 0);
  void* aligned = cache.allocate(8_MiB, 4_MiB, 8_MiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % 4_MiB, 0U);
  cache.deallocate(aligned, 8_MiB, 4_MiB, 0);
  EXPECT_EQ(cache.cached_bytes(), 0U);
}

TEST(BlockCache, TheEmulatedDeviceCountsLiveBytesOnlyAndCachesWithinItsCapacity) {
  emulated_device_memory_resource device{40_MiB};
  void* a = device.allocate(24_MiB);
  device.deallocate(a, 24_MiB);
  EXPECT_EQ(device.used_bytes(), 0U);
  EXPECT_EQ(device.available_bytes(), 40_MiB);
  EXPECT_EQ(device.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 24_MiB : 0U);
  // The whole capacity is still there: the cached block is given up for a larger request.
  void* b = device.allocate(40_MiB);
  EXPECT_EQ(device.used_bytes(), 40_MiB);
  EXPECT_EQ(device.cached_bytes(), 0U);
  fill_and_check(b, 40_MiB, 7);
  device.deallocate(b, 40_MiB);
  EXPECT_EQ(device.peak_bytes(), 40_MiB);
}

TEST(BlockCache, ConcurrentAllocationsKeepTheirBytesAndTheBound) {
  constexpr std::size_t CAPACITY = 96_MiB;
  block_cache cache{CAPACITY};
  std::atomic<std::size_t> live{0};
  std::atomic<bool> over{false};
  std::vector<std::thread> threads;
  for (unsigned thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&, thread] {
      for (unsigned round = 0; round < 40; ++round) {
        std::size_t const bytes = (4 + (thread * 7 + round * 3) % 13) * 1_MiB;
        std::size_t const now   = live.fetch_add(bytes) + bytes;
        void* block             = cache.allocate(bytes, 64, now);
        auto const value        = static_cast<unsigned char>(thread * 50 + round);
        std::memset(block, value, bytes);
        auto const* read = static_cast<unsigned char const*>(block);
        for (std::size_t at = 0; at < bytes; at += 64_KiB) {
          if (read[at] != value) {
            over = true;  // another thread wrote into this block
          }
        }
        std::size_t const after = live.fetch_sub(bytes) - bytes;
        cache.deallocate(block, bytes, 64, after);
        if (cache.cached_bytes() > CAPACITY) {
          over = true;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_FALSE(over.load());
  EXPECT_LE(cache.cached_bytes(), CAPACITY);
}

}  // namespace
}  // namespace spillway
