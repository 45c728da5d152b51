/**
 * @file large_pages_test.cpp
 * @brief The cache of freed large blocks behind the emulated device and the host resource:
 * reuse, a larger block cut down to a request or split, a smaller one grown to it, the limit, small
 * blocks passed through, and concurrent use.
 */
#include "memory/detail/large_pages.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
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

/// Checks that the first byte of every page of `bytes` bytes of `block` is `value`.
void check_pages(void const* block, std::size_t bytes, unsigned char value) {
  auto const* bytes_of = static_cast<unsigned char const*>(block);
  for (std::size_t at = 0; at < bytes; at += 4096) {
    ASSERT_EQ(bytes_of[at], value) << "page at " << at;
  }
}

/// Writes `bytes` of `value` to `block` and checks every page of them reads back.
void fill_and_check(void* block, std::size_t bytes, unsigned char value) {
  std::memset(block, value, bytes);
  check_pages(block, bytes, value);
  ASSERT_EQ(static_cast<unsigned char const*>(block)[bytes - 1], value);
}

TEST(BlockCache, AFreedBlockIsHandedOutAgain) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  void* first = cache.allocate(8_MiB, 64);
  fill_and_check(first, 8_MiB, 1);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(first) % detail::LARGE_BLOCK_ALIGNMENT, 0U);
  cache.deallocate(first, 8_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 8_MiB);
  void* again = cache.allocate(8_MiB - 100, 64);
  EXPECT_EQ(again, first);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  fill_and_check(again, 8_MiB - 100, 2);
  cache.deallocate(again, 8_MiB - 100, 64);
}

TEST(BlockCache, ASomewhatLargerBlockIsCutDownAMuchLargerOneSplitOnlyWhereNoneGrows) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  // A block up to a quarter larger than the request is cut down to it; the short tail goes.
  void* large = cache.allocate(8_MiB, 64);
  cache.deallocate(large, 8_MiB, 64);
  void* smaller = cache.allocate(7_MiB, 4096);
  EXPECT_EQ(smaller, large);
  EXPECT_EQ(cache.cached_bytes(), 0U) << "the short tail is unmapped, not cached";
  fill_and_check(smaller, 7_MiB, 3);
  cache.deallocate(smaller, 7_MiB, 4096);
  // Much larger, and no smaller block to grow: the request takes the head, the tail stays
  // cached with its pages and bytes.
  void* head = cache.allocate(2_MiB, 64);
  EXPECT_EQ(head, large);
  EXPECT_EQ(cache.cached_bytes(), 5_MiB);
  void* tail = cache.allocate(5_MiB, 64);
  EXPECT_EQ(tail, static_cast<std::byte*>(large) + 2_MiB);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  check_pages(tail, 5_MiB, 3);
  fill_and_check(head, 2_MiB, 4);
  fill_and_check(tail, 5_MiB, 5);
  check_pages(head, 2_MiB, 4);  // the two parts of one mapping stay apart
  // Much larger, with a smaller block: the smaller one grows (its bytes stay, only the growth
  // is fresh) and the large block is kept whole for a large request.
  cache.deallocate(head, 2_MiB, 64);
  cache.deallocate(tail, 5_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 7_MiB);
  void* grown = cache.allocate(3_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 5_MiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(grown) % detail::LARGE_BLOCK_ALIGNMENT, 0U);
  check_pages(grown, 2_MiB, 4);
  fill_and_check(grown, 3_MiB, 6);
  EXPECT_EQ(cache.allocate(5_MiB, 64), tail);
  cache.deallocate(grown, 3_MiB, 64);
  cache.deallocate(tail, 5_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 8_MiB);
}

TEST(BlockCache, TheLargestSmallerBlockGrowsToARequestNoneFits) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  void* a = cache.allocate(2_MiB, 64);
  void* b = cache.allocate(5_MiB, 64);
  fill_and_check(a, 2_MiB, 10);
  fill_and_check(b, 5_MiB, 11);
  cache.deallocate(a, 2_MiB, 64);
  cache.deallocate(b, 5_MiB, 64);
  // 12 MiB: neither fits; the 5 MiB block grows (its bytes are still there), the 2 MiB stays.
  void* grown = cache.allocate(12_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 2_MiB);
  check_pages(grown, 5_MiB, 11);
  fill_and_check(grown, 12_MiB, 12);
  // The 2 MiB block still serves a request of its size.
  EXPECT_EQ(cache.allocate(2_MiB - 100, 64), a);
  cache.deallocate(a, 2_MiB - 100, 64);
  cache.deallocate(grown, 12_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 14_MiB);
}

TEST(BlockCache, TheLimitHoldsLargestBlocksGoFirst) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{16_MiB};
  void* a = cache.allocate(8_MiB, 64);
  void* b = cache.allocate(4_MiB, 64);
  void* c = cache.allocate(6_MiB, 64);
  cache.deallocate(a, 8_MiB, 64);
  cache.deallocate(b, 4_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 12_MiB);
  // 6 more MiB would pass 16: the largest cached block (8 MiB) is unmapped first.
  cache.deallocate(c, 6_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 10_MiB);
  // A block larger than the limit is never cached, nor made of cached blocks.
  void* d = cache.allocate(20_MiB, 64);
  fill_and_check(d, 20_MiB, 5);
  cache.deallocate(d, 20_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 10_MiB);
}

TEST(BlockCache, TheMappedCeilingBoundsLiveAndCachedBlocksTogether) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  cache.set_mapped_ceiling(16_MiB);
  void* a = cache.allocate(6_MiB, 64);
  void* b = cache.allocate(6_MiB, 64);
  EXPECT_EQ(cache.live_bytes(), 12_MiB);
  cache.deallocate(a, 6_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 6_MiB);  // 6 live + 6 cached: within 16
  // 8 MiB more live leaves room for only 2 cached: the cached block is given back, not cut.
  void* c = cache.allocate(8_MiB, 64);
  fill_and_check(c, 8_MiB, 3);
  EXPECT_EQ(cache.live_bytes(), 14_MiB);
  EXPECT_LE(cache.live_bytes() + cache.cached_bytes(), 16_MiB);
  // Freed while 8 MiB stay live: the 6 MiB block fits under the ceiling and is kept.
  cache.deallocate(b, 6_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 6_MiB);
  EXPECT_LE(cache.live_bytes() + cache.cached_bytes(), 16_MiB);
  // Live bytes past the ceiling (their owners' budgets allow it, not the cache's) keep nothing.
  void* d = cache.allocate(12_MiB, 64);
  fill_and_check(d, 12_MiB, 4);
  EXPECT_EQ(cache.live_bytes(), 20_MiB);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  cache.deallocate(c, 8_MiB, 64);
  EXPECT_EQ(cache.cached_bytes(), 0U);  // 12 live + 8 would pass 16
  cache.deallocate(d, 12_MiB, 64);
  EXPECT_EQ(cache.live_bytes(), 0U);
  EXPECT_EQ(cache.cached_bytes(), 12_MiB);
  // Lowering the ceiling gives cached blocks back at once.
  cache.set_mapped_ceiling(4_MiB);
  EXPECT_EQ(cache.cached_bytes(), 0U);
}

TEST(BlockCache, AnEmulatedDeviceAndItsHostKeepToTheHostsMappedCeiling) {
  SKIP_UNLESS_MAPPED();
  host_memory_resource host{64_MiB};
  emulated_device_memory_resource device{32_MiB, host};
  host.set_mapped_ceiling(40_MiB);
  void* on_device = device.allocate(24_MiB);
  void* on_host   = host.allocate(12_MiB);
  device.deallocate(on_device, 24_MiB);
  EXPECT_EQ(host.cached_bytes(), 24_MiB);  // 12 live + 24 cached
  void* more = host.allocate(16_MiB);      // cut from the cached block
  EXPECT_LE(host.cached_bytes() + 28_MiB, 40_MiB);
  host.deallocate(more, 16_MiB);
  host.deallocate(on_host, 12_MiB);
  EXPECT_LE(host.cached_bytes(), 40_MiB);
}

TEST(BlockCache, LargeAlignmentsAreNotCached) {
  block_cache cache{64_MiB};
  void* aligned = cache.allocate(8_MiB, 1_MiB);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(aligned) % 1_MiB, 0U);
  fill_and_check(aligned, 8_MiB, 7);
  cache.deallocate(aligned, 8_MiB, 1_MiB);
  std::size_t const below = detail::LARGE_BLOCK_MIN_BYTES - 1;
  void* small             = cache.allocate(below, 1024);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(small) % 1024, 0U);
  fill_and_check(small, below, 6);
  cache.deallocate(small, below, 1024);
  EXPECT_EQ(cache.cached_bytes(), 0U);
  EXPECT_EQ(cache.slab_bytes(), 0U);
}

TEST(BlockCache, SmallBlocksComeFromSlabsThatGoBackToTheCacheWhenEmpty) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{64_MiB};
  std::size_t const bytes = 5000;
  std::size_t const slot  = detail::small_block_pool::slot_bytes(bytes);
  std::size_t const slab  = detail::small_block_pool::slab_bytes(slot);
  std::vector<void*> blocks;
  for (std::size_t index = 0; index <= slab / slot; ++index) {  // a slab full, one more
    blocks.push_back(cache.allocate(bytes, 64));
    fill_and_check(blocks.back(), bytes, 6);
  }
  EXPECT_EQ(cache.slab_bytes(), 2 * slab);
  EXPECT_EQ(cache.live_bytes(), 2 * slab) << "slabs count as live blocks";
  for (void* block : blocks) {
    cache.deallocate(block, bytes, 64);
  }
  // The first slab emptied is cached; the last one stays for the next small block.
  EXPECT_EQ(cache.slab_bytes(), slab);
  EXPECT_EQ(cache.live_bytes(), slab);
  EXPECT_EQ(cache.cached_bytes(), slab);
  void* again = cache.allocate(100, 64);  // a slab of another size: the cached one's pages
  EXPECT_EQ(cache.cached_bytes(), 0U);
  EXPECT_EQ(cache.slab_bytes(), 2 * slab);
  fill_and_check(again, 100, 8);
  cache.deallocate(again, 100, 64);
}

TEST(BlockCache, BlocksUnder256KiBKeepToAnEighthOfTheLimitAndPushNoLargeOneOut) {
  SKIP_UNLESS_MAPPED();
  block_cache cache{8_MiB};
  void* large = cache.allocate(7_MiB, 64);
  std::vector<void*> small;
  for (int index = 0; index < 12; ++index) {  // 12 x 128 KiB: 1.5 MiB
    small.push_back(cache.allocate(128_KiB, 64));
    fill_and_check(small.back(), 128_KiB, 9);
  }
  cache.deallocate(large, 7_MiB, 64);
  for (void* block : small) {
    cache.deallocate(block, 128_KiB, 64);
  }
  // 7 MiB plus an eighth of 8 MiB (1 MiB: 8 small blocks); the other 4 were unmapped at once.
  EXPECT_EQ(cache.cached_bytes(), 8_MiB);
  EXPECT_EQ(cache.allocate(7_MiB, 64), large);
  void* again = cache.allocate(128_KiB, 64);
  EXPECT_NE(std::find(small.begin(), small.end(), again), small.end());
  cache.deallocate(again, 128_KiB, 64);
  cache.deallocate(large, 7_MiB, 64);
}

TEST(BlockCache, TheEmulatedDeviceCountsLiveBytesOnly) {
  emulated_device_memory_resource device{40_MiB};
  void* a = device.allocate(24_MiB);
  device.deallocate(a, 24_MiB);
  EXPECT_EQ(device.used_bytes(), 0U);
  EXPECT_EQ(device.available_bytes(), 40_MiB);
  EXPECT_EQ(device.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 24_MiB : 0U);
  // The whole capacity is still there; the cached block is not counted against it.
  void* b = device.allocate(40_MiB);
  EXPECT_EQ(device.used_bytes(), 40_MiB);
  fill_and_check(b, 40_MiB, 8);
  device.deallocate(b, 40_MiB);
  EXPECT_EQ(device.peak_bytes(), 40_MiB);
  // The 40 MiB request grew the cached 24 MiB block: one block of 40 MiB is cached now.
  EXPECT_EQ(device.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 40_MiB : 0U);
  // 30 MiB, with no smaller block to grow, is cut from it (10 MiB stay cached); 20 MiB then
  // grows the 10 MiB piece rather than cutting the 30 MiB block: 50 MiB cached.
  device.deallocate(device.allocate(30_MiB), 30_MiB);
  EXPECT_EQ(device.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 40_MiB : 0U);
  device.deallocate(device.allocate(20_MiB), 20_MiB);
  EXPECT_EQ(device.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 50_MiB : 0U);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(BlockCache, AnEmulatedDeviceSharingTheHostsCacheTakesTheBlocksTheHostFreed) {
  host_memory_resource plain;
  EXPECT_THROW((emulated_device_memory_resource{40_MiB, plain}), invalid_argument);
  host_memory_resource host{16_MiB};
  emulated_device_memory_resource device{40_MiB, host};
  EXPECT_FALSE(device.is_equal(host));
  void* scratch = host.allocate(8_MiB);
  fill_and_check(scratch, 8_MiB, 3);
  host.deallocate(scratch, 8_MiB);
  EXPECT_EQ(host.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 8_MiB : 0U);
  EXPECT_EQ(device.cached_bytes(), host.cached_bytes()) << "one cache";
  // The device's allocation takes the host's freed block (its pages stay), and counts it.
  void* shard = device.allocate(8_MiB);
  if (detail::LARGE_BLOCKS_MAPPED) {
    EXPECT_EQ(shard, scratch);
  }
  EXPECT_EQ(device.used_bytes(), 8_MiB);
  EXPECT_EQ(host.cached_bytes(), 0U);
  fill_and_check(shard, 8_MiB, 4);
  device.deallocate(shard, 8_MiB);
  // The shared cache keeps what both kept apart: 16 MiB for the host, 80 MiB for the device.
  void* big  = device.allocate(40_MiB);
  void* more = host.allocate(48_MiB);
  device.deallocate(big, 40_MiB);
  host.deallocate(more, 48_MiB);
  EXPECT_EQ(host.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 88_MiB : 0U);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(BlockCache, ASharedCacheKeepsTheSumOfBothLimitsUpToTheMost) {
  SKIP_UNLESS_MAPPED();
  // 1 MiB for the host and twice 10 MiB for the device: a freed block of 21 MiB stays, one of
  // 22 MiB goes back.
  host_memory_resource small{1_MiB};
  emulated_device_memory_resource sharing{10_MiB, small};
  void* over = small.allocate(22_MiB);
  small.deallocate(over, 22_MiB);
  EXPECT_EQ(small.cached_bytes(), 0U);
  void* at = small.allocate(21_MiB);
  small.deallocate(at, 21_MiB);
  EXPECT_EQ(small.cached_bytes(), 21_MiB);
  // 3 GiB and an unbounded device's 4 GiB keep at most 4 GiB (mapped, never touched here).
  host_memory_resource host{3_GiB};
  emulated_device_memory_resource device{std::numeric_limits<std::size_t>::max(), host};
  constexpr std::size_t most = emulated_device_memory_resource::MAX_CACHED_BYTES;
  void* beyond               = device.allocate(most + 64_KiB);
  device.deallocate(beyond, most + 64_KiB);
  EXPECT_EQ(host.cached_bytes(), 0U);
  void* largest = device.allocate(most);
  device.deallocate(largest, most);
  EXPECT_EQ(host.cached_bytes(), most);
}

TEST(BlockCache, HostResourcesWithACacheAreEqualOnlyToThemselves) {
  host_memory_resource plain;
  host_memory_resource other_plain;
  host_memory_resource cached{32_MiB};
  host_memory_resource other_cached{32_MiB};
  EXPECT_TRUE(plain.is_equal(other_plain));
  EXPECT_TRUE(cached.is_equal(cached));
  EXPECT_FALSE(cached.is_equal(plain));
  EXPECT_FALSE(plain.is_equal(cached));
  EXPECT_FALSE(cached.is_equal(other_cached));
  void* block = cached.allocate(4_MiB);
  fill_and_check(block, 4_MiB, 9);
  cached.deallocate(block, 4_MiB);
  EXPECT_EQ(cached.cached_bytes(), detail::LARGE_BLOCKS_MAPPED ? 4_MiB : 0U);
  EXPECT_EQ(plain.cached_bytes(), 0U);
}

TEST(BlockCache, ConcurrentAllocationsKeepTheirBytesAndTheLimit) {
  constexpr std::size_t LIMIT = 48_MiB;
  block_cache cache{LIMIT};
  std::atomic<bool> wrong{false};
  std::vector<std::thread> threads;
  for (unsigned thread = 0; thread < 4; ++thread) {
    threads.emplace_back([&, thread] {
      for (unsigned round = 0; round < 40; ++round) {
        std::size_t const bytes = (256 + ((thread * 7 + round * 3) % 13) * 1024) * 1_KiB;
        void* block             = cache.allocate(bytes, 64);
        auto const value        = static_cast<unsigned char>(thread * 50 + round);
        std::memset(block, value, bytes);
        auto const* read = static_cast<unsigned char const*>(block);
        for (std::size_t at = 0; at < bytes; at += 64_KiB) {
          if (read[at] != value) {
            wrong = true;  // another thread wrote into this block
          }
        }
        cache.deallocate(block, bytes, 64);
        if (cache.cached_bytes() > LIMIT) {
          wrong = true;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_FALSE(wrong.load());
  EXPECT_LE(cache.cached_bytes(), LIMIT);
}

}  // namespace
}  // namespace spillway
