/**
 * @file pool_memory_resource_test.cpp
 * @brief The pool: sizing and growth, the out-of-memory report, fragmentation and coalescing of
 * large and small blocks, over-aligned requests, upstream failure, and concurrent use.
 */
#include "testing/resource_conformance.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <barrier>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using ::testing::HasSubstr;

/// A block held by a test, with the byte value written over it.
struct held_block {
  void* pointer;
  std::size_t bytes;
  unsigned char value;
};

TEST(PoolMemoryResource, InitialSizeIsTakenUpFront) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  {
    pool_memory_resource pool{upstream, 4_MiB, 16_MiB};
    EXPECT_EQ(pool.pool_size(), 4_MiB);
    EXPECT_EQ(pool.allocated_bytes(), 0U);
    EXPECT_EQ(pool.free_block_count(), 1U);
    EXPECT_EQ(pool.largest_free_block(), 4_MiB);
    EXPECT_EQ(upstream.statistics().current_bytes, 4_MiB);
    EXPECT_EQ(upstream.statistics().total_count, 1U);
  }
  // Chunks go back upstream at destruction.
  EXPECT_EQ(upstream.statistics().current_bytes, 0U);
  EXPECT_EQ(upstream.statistics().current_count, 0U);
}

TEST(PoolMemoryResource, InitialSizeAboveMaximumThrowsInvalidArgument) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  EXPECT_THROW(pool_memory_resource(upstream, 2_MiB, 1_MiB), invalid_argument);
  EXPECT_EQ(upstream.statistics().total_count, 0U);
}

TEST(PoolMemoryResource, ConstructorPropagatesUpstreamOutOfMemory) {
  emulated_device_memory_resource device{1_MiB};
  EXPECT_THROW(pool_memory_resource(device, 2_MiB), out_of_memory);
  EXPECT_EQ(device.used_bytes(), 0U);
}

TEST(PoolMemoryResource, KindIsTheUpstreamKind) {
  emulated_device_memory_resource device;
  pool_memory_resource pool{device};
  EXPECT_EQ(pool.kind(), memory_kind::DEVICE);
  EXPECT_TRUE(pool.upstream() == resource_ref{device});
}

TEST(PoolMemoryResource, NonPowerOfTwoAlignmentThrowsInvalidArgument) {
  host_memory_resource host;
  pool_memory_resource pool{host};
  EXPECT_THROW(static_cast<void>(pool.allocate(64, 96)), invalid_argument);
  EXPECT_EQ(pool.allocated_bytes(), 0U);
}

TEST(PoolMemoryResource, AllocatedBytesCountsRoundedBlocks) {
  host_memory_resource host;
  pool_memory_resource pool{host};
  void* small = pool.allocate(100);  // a small block: the 128-byte class
  EXPECT_EQ(pool.allocated_bytes(), 128U);
  void* large = pool.allocate(100000);  // a large block: rounded to 64 bytes
  EXPECT_EQ(pool.allocated_bytes(), 128U + 100032U);
  pool.deallocate(small, 100);
  EXPECT_EQ(pool.allocated_bytes(), 100032U);
  pool.deallocate(large, 100000);
  EXPECT_EQ(pool.allocated_bytes(), 0U);
}

TEST(PoolMemoryResource, GrowsByDoublingWhenUnbounded) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  pool_memory_resource pool{upstream};
  EXPECT_EQ(pool.pool_size(), 0U);
  std::vector<void*> blocks;
  constexpr std::size_t BLOCK = 100_KiB;  // ten fit in 1 MiB, twenty in 2 MiB
  std::vector<std::size_t> sizes;
  for (std::size_t index = 0; index < 21; ++index) {
    blocks.push_back(pool.allocate(BLOCK));
    sizes.push_back(pool.pool_size());
  }
  EXPECT_EQ(sizes[0], 1_MiB);  // the minimum growth
  EXPECT_EQ(sizes[9], 1_MiB);
  EXPECT_EQ(sizes[10], 2_MiB);  // doubled
  EXPECT_EQ(sizes[19], 2_MiB);
  EXPECT_EQ(sizes[20], 4_MiB);  // doubled again
  EXPECT_EQ(upstream.statistics().current_count, 3U);
  EXPECT_EQ(upstream.statistics().current_bytes, 4_MiB);
  for (void* pointer : blocks) {
    pool.deallocate(pointer, BLOCK);
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  // Chunks never merge with each other, but each is whole again.
  EXPECT_EQ(pool.free_block_count(), 3U);
  EXPECT_EQ(pool.largest_free_block(), 2_MiB);
}

TEST(PoolMemoryResource, MaximumSizeIsHonouredAndNamedWhenReached) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  pool_memory_resource pool{upstream, 0, 8_MiB};
  void* first  = pool.allocate(3_MiB);
  void* second = pool.allocate(3_MiB);
  EXPECT_EQ(pool.pool_size(), 6_MiB);
  try {
    void* third = pool.allocate(3_MiB);
    pool.deallocate(third, 3_MiB);
    FAIL() << "the pool grew to " << pool.pool_size() << " bytes past its 8 MiB maximum";
  } catch (out_of_memory const& error) {
    EXPECT_THAT(error.what(), HasSubstr("pool out of memory: requested 3145728 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("largest free block 0 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("pool size 6291456 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("maximum size 8388608 bytes"));
    EXPECT_EQ(error.requested_bytes(), 3_MiB);
    EXPECT_EQ(error.available_bytes(), 0U);
    EXPECT_EQ(error.capacity_bytes(), 8_MiB);
  }
  EXPECT_EQ(pool.pool_size(), 6_MiB);
  EXPECT_EQ(pool.allocated_bytes(), 6_MiB);
  // Exactly the rest of the maximum still fits.
  void* rest = pool.allocate(2_MiB);
  EXPECT_EQ(pool.pool_size(), 8_MiB);
  EXPECT_EQ(upstream.statistics().current_bytes, 8_MiB);
  EXPECT_THROW(static_cast<void>(pool.allocate(64)), out_of_memory);
  pool.deallocate(rest, 2_MiB);
  pool.deallocate(second, 3_MiB);
  pool.deallocate(first, 3_MiB);
  EXPECT_EQ(pool.allocated_bytes(), 0U);
}

TEST(PoolMemoryResource, MaximumIsHonouredWhenNotAMultipleOfTheBlockGranule) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  pool_memory_resource pool{upstream, 1000, 1000};
  EXPECT_EQ(pool.pool_size(), 1000U);
  EXPECT_EQ(upstream.statistics().current_bytes, 1000U);
  void* half = pool.allocate(500);  // a small block of the 512-byte class
  EXPECT_THROW(static_cast<void>(pool.allocate(1000)), out_of_memory);  // the 1024-byte class
  EXPECT_EQ(upstream.statistics().current_bytes, 1000U);
  pool.deallocate(half, 500);
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), 1000U);
}

TEST(PoolMemoryResource, LargeBlocksFragmentAndCoalesce) {
  constexpr std::size_t POOL   = 4_MiB;
  constexpr std::size_t BLOCK  = 128_KiB;  // above SMALL_BLOCK_LIMIT: served by the arena
  constexpr std::size_t BLOCKS = POOL / BLOCK;
  static_assert(BLOCK > pool_memory_resource::SMALL_BLOCK_LIMIT);
  host_memory_resource host;
  pool_memory_resource pool{host, POOL, POOL};
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < BLOCKS; ++index) {
    blocks.push_back(pool.allocate(BLOCK));
  }
  EXPECT_EQ(pool.free_block_count(), 0U);
  EXPECT_THROW(static_cast<void>(pool.allocate(BLOCK)), out_of_memory);

  for (std::size_t index = 0; index < BLOCKS; index += 2) {
    pool.deallocate(blocks[index], BLOCK);
  }
  EXPECT_EQ(pool.free_block_count(), BLOCKS / 2);
  EXPECT_EQ(pool.largest_free_block(), BLOCK);
  EXPECT_EQ(pool.allocated_bytes(), POOL / 2);
  // Half the pool is free, but in holes: twice a block does not fit and the pool may not grow.
  try {
    void* pointer = pool.allocate(2 * BLOCK);
    pool.deallocate(pointer, 2 * BLOCK);
    FAIL() << "a double block was served from a fragmented pool";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.available_bytes(), BLOCK);
    EXPECT_THAT(error.what(), HasSubstr("largest free block 131072 bytes"));
  }
  EXPECT_EQ(pool.pool_size(), POOL);

  for (std::size_t index = 1; index < BLOCKS; index += 2) {
    pool.deallocate(blocks[index], BLOCK);
  }
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), pool.pool_size());
  void* whole = pool.allocate(POOL);
  EXPECT_EQ(pool.allocated_bytes(), POOL);
  pool.deallocate(whole, POOL);
  EXPECT_EQ(pool.free_block_count(), 1U);
}

TEST(PoolMemoryResource, SmallBlocksAreFlushedFromTheCachesOnDemand) {
  constexpr std::size_t POOL   = 1_MiB;
  constexpr std::size_t BLOCK  = 4_KiB;  // a small block: cached per thread shard
  constexpr std::size_t BLOCKS = POOL / BLOCK;
  static_assert(2 * BLOCK <= pool_memory_resource::SMALL_BLOCK_LIMIT);
  host_memory_resource host;
  pool_memory_resource pool{host, POOL, POOL};
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < BLOCKS; ++index) {
    blocks.push_back(pool.allocate(BLOCK));
  }
  EXPECT_EQ(pool.allocated_bytes(), POOL);
  EXPECT_THROW(static_cast<void>(pool.allocate(BLOCK)), out_of_memory);

  for (std::size_t index = 0; index < BLOCKS; index += 2) {
    pool.deallocate(blocks[index], BLOCK);
  }
  EXPECT_EQ(pool.allocated_bytes(), POOL / 2);
  // The freed blocks are holes even once flushed into the arena: twice a block cannot fit.
  EXPECT_THROW(static_cast<void>(pool.allocate(2 * BLOCK)), out_of_memory);
  EXPECT_EQ(pool.pool_size(), POOL);

  for (std::size_t index = 1; index < BLOCKS; index += 2) {
    pool.deallocate(blocks[index], BLOCK);
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  // The whole pool: only possible if the cached blocks are flushed and coalesced on demand.
  void* whole = pool.allocate(POOL);
  EXPECT_EQ(pool.allocated_bytes(), POOL);
  pool.deallocate(whole, POOL);
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), POOL);
}

TEST(PoolMemoryResource, FlushCachesCoalescesEverySmallBlock) {
  constexpr std::size_t POOL = 1_MiB;
  host_memory_resource host;
  pool_memory_resource pool{host, POOL, POOL};
  std::vector<std::pair<void*, std::size_t>> blocks;
  // Several classes, from 64 B to 64 KiB, a quarter of the pool in all.
  for (std::size_t bytes = 64; bytes <= pool_memory_resource::SMALL_BLOCK_LIMIT; bytes *= 4) {
    for (std::size_t copy = 0; copy < 3; ++copy) {
      blocks.emplace_back(pool.allocate(bytes), bytes);
    }
  }
  for (auto const& [pointer, bytes] : blocks) {
    pool.deallocate(pointer, bytes);
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), pool.pool_size());
  EXPECT_EQ(pool.pool_size(), POOL);
}

TEST(PoolMemoryResource, OverAlignedAllocations) {
  constexpr std::size_t POOL      = 1_MiB;
  constexpr std::size_t ALIGNMENT = 4096;
  host_memory_resource host;
  pool_memory_resource pool{host, POOL, POOL};
  std::vector<held_block> blocks;
  unsigned char value = 1;
  for (std::size_t const bytes : {std::size_t{1}, std::size_t{100}, std::size_t{5000}, 70_KiB}) {
    void* aligned = pool.allocate(bytes, ALIGNMENT);
    EXPECT_TRUE(test::is_aligned(aligned, ALIGNMENT)) << bytes << " bytes at " << aligned;
    test::fill_block(aligned, bytes, value);
    blocks.push_back(held_block{aligned, bytes, value++});
    // Interleave blocks of the default alignment, so that over-aligned ones are not all at the
    // start of the chunk.
    void* plain = pool.allocate(bytes);
    test::fill_block(plain, bytes, value);
    blocks.push_back(held_block{plain, bytes, value++});
  }
  EXPECT_GT(pool.allocated_bytes(), 0U);
  for (std::size_t index = 0; index < blocks.size(); ++index) {
    auto const& block = blocks[index];
    EXPECT_TRUE(test::block_holds(block.pointer, block.bytes, block.value)) << index;
    pool.deallocate(block.pointer, block.bytes, index % 2 == 0 ? ALIGNMENT : DEFAULT_ALIGNMENT);
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), POOL);
}

TEST(PoolMemoryResource, UpstreamOutOfMemorySurfacesAsOutOfMemory) {
  emulated_device_memory_resource device{3_MiB};
  pool_memory_resource pool{device, 0, 16_MiB};
  void* first = pool.allocate(2_MiB);
  EXPECT_EQ(pool.pool_size(), 2_MiB);
  try {
    void* second = pool.allocate(2_MiB);
    pool.deallocate(second, 2_MiB);
    FAIL() << "4 MiB were served over a 3 MiB device";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), 2_MiB);
    EXPECT_THAT(error.what(), HasSubstr("pool out of memory"));
    EXPECT_THAT(error.what(), HasSubstr("upstream: emulated device out of memory"));
  }
  EXPECT_EQ(pool.pool_size(), 2_MiB);
  EXPECT_EQ(device.used_bytes(), 2_MiB);
  // The doubling step (2 MiB) does not fit upstream either, but the request itself does.
  void* third = pool.allocate(512_KiB);
  EXPECT_EQ(pool.pool_size(), 2_MiB + 512_KiB);
  EXPECT_EQ(device.used_bytes(), pool.pool_size());
  pool.deallocate(third, 512_KiB);
  pool.deallocate(first, 2_MiB);
}

TEST(PoolMemoryResource, ConcurrentRandomAllocationsStayIntact) {
  constexpr std::size_t THREADS    = 8;
  constexpr std::size_t OPERATIONS = 400;
  constexpr std::size_t MOST_HELD  = 12;
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  pool_memory_resource pool{upstream};
  std::vector<std::size_t> corrupted(THREADS, 0);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&pool, thread, &corrupted] {
      std::mt19937_64 random{0xC0FFEE + thread};
      std::vector<held_block> held;
      auto free_one = [&](std::size_t index) {
        held_block const block = held[index];
        if (!test::block_holds(block.pointer, block.bytes, block.value)) {
          ++corrupted[thread];
        }
        pool.deallocate(block.pointer, block.bytes);
        held[index] = held.back();
        held.pop_back();
      };
      for (std::size_t operation = 0; operation < OPERATIONS; ++operation) {
        bool const allocate = held.empty() || (held.size() < MOST_HELD && random() % 2 == 0);
        if (allocate) {
          // 64 B .. 1 MiB, spread evenly over the powers of two in between.
          std::size_t const low   = std::size_t{64} << (random() % 14);
          std::size_t const bytes = low + random() % low;
          auto const value        = static_cast<unsigned char>(1 + (thread * 37 + operation) % 255);
          void* pointer           = pool.allocate(bytes);
          test::fill_block(pointer, bytes, value);
          held.push_back(held_block{pointer, bytes, value});
        } else {
          free_one(random() % held.size());
        }
      }
      while (!held.empty()) {
        free_one(held.size() - 1);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    EXPECT_EQ(corrupted[thread], 0U) << "thread " << thread;
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  EXPECT_EQ(upstream.statistics().current_bytes, pool.pool_size());
  // With everything freed and flushed, each upstream chunk is one free block again.
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), upstream.statistics().current_count);
}

TEST(PoolMemoryResource, ConcurrentBoundedPoolUnderPressureRecoversEverything) {
  // Threads together want more than the pool may hold, so some requests fail while others flush
  // the caches; whatever happens, every byte must come back and coalesce.
  constexpr std::size_t THREADS    = 8;
  constexpr std::size_t OPERATIONS = 300;
  constexpr std::size_t POOL       = 4_MiB;
  host_memory_resource host;
  pool_memory_resource pool{host, POOL, POOL};
  std::vector<std::size_t> corrupted(THREADS, 0);
  std::vector<std::size_t> failures(THREADS, 0);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&, thread] {
      std::mt19937_64 random{0xBADC0DE + thread};
      struct aligned_block {
        held_block block;
        std::size_t alignment;
      };
      std::vector<aligned_block> held;
      auto free_one = [&](std::size_t index) {
        aligned_block const entry = held[index];
        if (!test::block_holds(entry.block.pointer, entry.block.bytes, entry.block.value)) {
          ++corrupted[thread];
        }
        pool.deallocate(entry.block.pointer, entry.block.bytes, entry.alignment);
        held[index] = held.back();
        held.pop_back();
      };
      for (std::size_t operation = 0; operation < OPERATIONS; ++operation) {
        if (held.empty() || (held.size() < 8 && random() % 3 != 0)) {
          std::size_t const low       = std::size_t{64} << (random() % 12);  // 64 B .. 256 KiB
          std::size_t const bytes     = low + random() % low;
          std::size_t const alignment = random() % 8 == 0 ? 4096 : DEFAULT_ALIGNMENT;
          auto const value = static_cast<unsigned char>(1 + (thread * 41 + operation) % 255);
          try {
            void* pointer = pool.allocate(bytes, alignment);
            if (!test::is_aligned(pointer, alignment)) {
              ++corrupted[thread];
            }
            test::fill_block(pointer, bytes, value);
            held.push_back(aligned_block{held_block{pointer, bytes, value}, alignment});
          } catch (out_of_memory const&) {
            ++failures[thread];
          }
        } else {
          free_one(random() % held.size());
        }
      }
      while (!held.empty()) {
        free_one(held.size() - 1);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    EXPECT_EQ(corrupted[thread], 0U) << "thread " << thread;
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  EXPECT_EQ(pool.pool_size(), POOL);
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), 1U);
  EXPECT_EQ(pool.largest_free_block(), POOL);
}

TEST(PoolMemoryResource, ConcurrentCrossThreadFreesOnSharedCacheShards) {
  // More threads than twice the cache shards, so that shards are shared; each thread frees the
  // small blocks its neighbour allocated, so that blocks move between shards.
  constexpr std::size_t THREADS = 34;
  constexpr std::size_t BLOCKS  = 150;
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  pool_memory_resource pool{upstream};
  std::vector<std::vector<held_block>> allocated(THREADS);
  std::vector<std::size_t> corrupted(THREADS, 0);
  std::barrier all_allocated{static_cast<std::ptrdiff_t>(THREADS)};
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&, thread] {
      for (std::size_t block = 0; block < BLOCKS; ++block) {
        std::size_t const bytes = 1 + (thread * 131 + block * 977) % 8_KiB;
        auto const value        = static_cast<unsigned char>(1 + (thread + block) % 255);
        void* pointer           = pool.allocate(bytes);
        test::fill_block(pointer, bytes, value);
        allocated[thread].push_back(held_block{pointer, bytes, value});
      }
      all_allocated.arrive_and_wait();
      for (auto const& block : allocated[(thread + 1) % THREADS]) {
        if (!test::block_holds(block.pointer, block.bytes, block.value)) {
          ++corrupted[thread];
        }
        pool.deallocate(block.pointer, block.bytes);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    EXPECT_EQ(corrupted[thread], 0U) << "thread " << thread;
  }
  EXPECT_EQ(pool.allocated_bytes(), 0U);
  pool.flush_caches();
  EXPECT_EQ(pool.free_block_count(), upstream.statistics().current_count);
}

}  // namespace
}  // namespace spillway
