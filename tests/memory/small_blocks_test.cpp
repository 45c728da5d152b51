/**
 * @file small_blocks_test.cpp
 * @brief Small blocks cut from slabs: slot sizes, blocks that never overlap, slabs given back
 * once empty (one of each size kept), and concurrent use.
 */
#include "memory/detail/small_blocks.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {
namespace {

using detail::small_block_pool;

/// Slabs from `aligned_alloc`, with a record of what is out.
struct slab_source {
  std::mutex mutex;
  std::map<void*, std::size_t> out;
  std::size_t maps   = 0;
  std::size_t unmaps = 0;

  small_block_pool pool() {
    return small_block_pool{[this](std::size_t bytes) {
                              void* slab = std::aligned_alloc(4096, bytes);
                              std::scoped_lock const lock(mutex);
                              out.emplace(slab, bytes);
                              ++maps;
                              return slab;
                            },
                            [this](void* slab, std::size_t bytes) {
                              {
                                std::scoped_lock const lock(mutex);
                                EXPECT_EQ(out.at(slab), bytes);
                                out.erase(slab);
                                ++unmaps;
                              }
                              std::free(slab);
                            }};
  }
};

TEST(SmallBlockPool, SlotsAreMultiplesOfTheAlignmentFourPerDoubling) {
  EXPECT_EQ(small_block_pool::slot_bytes(1), 256U);
  EXPECT_EQ(small_block_pool::slot_bytes(256), 256U);
  EXPECT_EQ(small_block_pool::slot_bytes(257), 512U);
  EXPECT_EQ(small_block_pool::slot_bytes(1024), 1024U);
  EXPECT_EQ(small_block_pool::slot_bytes(1025), 1280U);
  EXPECT_EQ(small_block_pool::slot_bytes(40000), 40960U);
  EXPECT_EQ(small_block_pool::slot_bytes(65535), 65536U);
  for (std::size_t bytes = 1; bytes < 65536; bytes += 97) {
    std::size_t const slot = small_block_pool::slot_bytes(bytes);
    ASSERT_GE(slot, bytes);
    ASSERT_EQ(slot % detail::SMALL_SLOT_ALIGNMENT, 0U);
    ASSERT_LE(slot, std::max<std::size_t>(1024, bytes + bytes / 4 + 1)) << bytes;
    ASSERT_GE(small_block_pool::slab_bytes(slot) / slot, 8U);
  }
}

TEST(SmallBlockPool, BlocksNeverOverlapAndAnEmptySlabGoesBack) {
  slab_source source;
  {
    auto pool = source.pool();
    std::vector<std::pair<unsigned char*, std::size_t>> blocks;
    for (std::size_t index = 0; index < 3000; ++index) {
      std::size_t const bytes = 1 + (index * 7919) % 20000;
      auto* block             = static_cast<unsigned char*>(pool.allocate(bytes));
      ASSERT_EQ(reinterpret_cast<std::uintptr_t>(block) % detail::SMALL_SLOT_ALIGNMENT, 0U);
      std::memset(block, static_cast<int>(index % 251), bytes);
      blocks.emplace_back(block, bytes);
    }
    EXPECT_GT(pool.slab_bytes_held(), 0U);
    // Free every other one, take as many again, then check every block kept its bytes.
    for (std::size_t index = 0; index < blocks.size(); index += 2) {
      pool.deallocate(blocks[index].first, blocks[index].second);
    }
    for (std::size_t index = 0; index < blocks.size(); index += 2) {
      blocks[index].first = static_cast<unsigned char*>(pool.allocate(blocks[index].second));
      std::memset(blocks[index].first, static_cast<int>(index % 251), blocks[index].second);
    }
    for (std::size_t index = 0; index < blocks.size(); ++index) {
      auto const [block, bytes] = blocks[index];
      ASSERT_EQ(block[0], index % 251) << index;
      ASSERT_EQ(block[bytes - 1], index % 251) << index;
    }
    std::set<std::size_t> slots;
    for (auto const& [block, bytes] : blocks) {
      pool.deallocate(block, bytes);
      slots.insert(small_block_pool::slot_bytes(bytes));
    }
    // Every empty slab went back but one of each size, kept for the next block of that size.
    std::size_t kept = 0;
    for (auto const slot : slots) {
      kept += small_block_pool::slab_bytes(slot);
    }
    EXPECT_EQ(pool.slab_bytes_held(), kept);
    EXPECT_EQ(source.out.size(), slots.size());
    // One block after another of the same size: the kept slab serves them all.
    auto const maps = source.maps;
    for (int round = 0; round < 3; ++round) {
      pool.deallocate(pool.allocate(100), 100);
    }
    EXPECT_EQ(source.maps, maps);
  }
  EXPECT_EQ(source.maps, source.unmaps);
}

TEST(SmallBlockPool, ASlabHoldsItsSlotsBeforeAnotherIsTaken) {
  slab_source source;
  auto pool              = source.pool();
  std::size_t const slot = small_block_pool::slot_bytes(5000);
  std::size_t const per  = small_block_pool::slab_bytes(slot) / slot;
  std::vector<void*> blocks;
  for (std::size_t index = 0; index < per; ++index) {
    blocks.push_back(pool.allocate(5000));
  }
  EXPECT_EQ(source.maps, 1U);
  blocks.push_back(pool.allocate(5000));
  EXPECT_EQ(source.maps, 2U);
  pool.deallocate(blocks.front(), 5000);  // a slot free in the first slab: used next
  void* again = pool.allocate(5000);
  EXPECT_EQ(again, blocks.front());
  EXPECT_EQ(source.maps, 2U);
  blocks.front() = again;
  for (void* block : blocks) {
    pool.deallocate(block, 5000);
  }
  EXPECT_EQ(source.unmaps, 1U) << "the first slab emptied went back; the last one stays";
  EXPECT_EQ(pool.slab_bytes_held(), small_block_pool::slab_bytes(slot));
}

TEST(SmallBlockPool, ConcurrentThreadsKeepTheirBytes) {
  slab_source source;
  {
    auto pool = source.pool();
    std::vector<std::thread> threads;
    for (int thread = 0; thread < 4; ++thread) {
      threads.emplace_back([&pool, thread] {
        std::mt19937 random(static_cast<unsigned>(thread));
        std::vector<std::pair<unsigned char*, std::size_t>> mine;
        for (int round = 0; round < 4000; ++round) {
          if (mine.size() > 64 || (!mine.empty() && random() % 3 == 0)) {
            auto const at             = random() % mine.size();
            auto const [block, bytes] = mine[at];
            ASSERT_EQ(block[0], thread + 1);
            ASSERT_EQ(block[bytes - 1], thread + 1);
            pool.deallocate(block, bytes);
            mine.erase(mine.begin() + static_cast<std::ptrdiff_t>(at));
          } else {
            std::size_t const bytes = 1 + random() % 30000;
            auto* block             = static_cast<unsigned char*>(pool.allocate(bytes));
            std::memset(block, thread + 1, bytes);
            mine.emplace_back(block, bytes);
          }
        }
        for (auto const& [block, bytes] : mine) {
          pool.deallocate(block, bytes);
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    // At most one empty slab of each size stays.
    std::size_t most = 0;
    for (std::size_t slot = detail::SMALL_SLOT_ALIGNMENT;
         slot <= small_block_pool::slot_bytes(30000);
         slot = small_block_pool::slot_bytes(slot + 1)) {
      most += small_block_pool::slab_bytes(slot);
    }
    EXPECT_LE(pool.slab_bytes_held(), most);
  }
  EXPECT_EQ(source.maps, source.unmaps);
}

}  // namespace
}  // namespace spillway
