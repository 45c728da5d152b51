// The Arrow memory pool over a spillway resource: what Arrow allocates, reallocates and frees
// reaches the resource with the sizes it was allocated with.
#include "io/io_test_support.hpp"

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/arrow_batch_reader.hpp"
#include "io/arrow/arrow_memory_pool.hpp"

#include <arrow/buffer.h>
#include <arrow/io/file.h>
#include <arrow/io/interfaces.h>
#include <arrow/util/thread_pool.h>
#endif

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

/// Fills `bytes` bytes with a pattern of `seed`.
void fill(std::uint8_t* block, int bytes, int seed) {
  for (int index = 0; index < bytes; ++index) {
    block[index] = static_cast<std::uint8_t>(index * seed);
  }
}

/// Whether the first `bytes` bytes hold the pattern of `seed`.
bool holds(std::uint8_t const* block, int bytes, int seed) {
  for (int index = 0; index < bytes; ++index) {
    if (block[index] != static_cast<std::uint8_t>(index * seed)) {
      return false;
    }
  }
  return true;
}

/// A pool over a counted host resource, and a block of 4 KiB from it holding a pattern.
class ArrowMemoryPool : public ::testing::Test {
 protected:
  std::uint8_t* filled_block(int seed) {
    std::uint8_t* block = nullptr;
    if (!pool_.Allocate(4096, 64, &block).ok()) {
      ADD_FAILURE() << "the pool refused 4 KiB";
      return nullptr;
    }
    fill(block, 4096, seed);
    return block;
  }

  host_memory_resource host_;
  statistics_resource_adaptor counted_{host_};
  detail::arrow_memory_pool pool_{counted_};
};

TEST_F(ArrowMemoryPool, ReallocationsToAtLeastHalfStayInTheirBlockAndFreeItWhole) {
  std::uint8_t* const block = filled_block(7);
  ASSERT_NE(block, nullptr);
  // Shrunk to fit (a builder's finish), shrunk again, then grown within the block: it stays.
  std::uint8_t* moved = block;
  ASSERT_TRUE(pool_.Reallocate(4096, 3000, 64, &moved).ok());
  EXPECT_EQ(moved, block);
  ASSERT_TRUE(pool_.Reallocate(3000, 2500, 64, &moved).ok());
  EXPECT_EQ(moved, block);
  ASSERT_TRUE(pool_.Reallocate(2500, 4000, 64, &moved).ok());
  EXPECT_EQ(moved, block);
  EXPECT_TRUE(holds(moved, 2500, 7));
  EXPECT_EQ(counted_.statistics().current_bytes, 4096U) << "the whole block stays allocated";
  EXPECT_EQ(pool_.bytes_allocated(), 4096);
  // Arrow frees it with the size it knows last; the resource gets the whole block back.
  pool_.Free(moved, 4000, 64);
  EXPECT_EQ(counted_.statistics().current_bytes, 0U);
  EXPECT_EQ(pool_.bytes_allocated(), 0);
}

TEST_F(ArrowMemoryPool, ReallocationsBelowHalfOrPastTheBlockMoveTheBytes) {
  std::uint8_t* const block = filled_block(5);
  ASSERT_NE(block, nullptr);
  std::uint8_t* moved = block;
  ASSERT_TRUE(pool_.Reallocate(4096, 3072, 64, &moved).ok());
  ASSERT_EQ(moved, block);
  ASSERT_TRUE(pool_.Reallocate(3072, 8192, 64, &moved).ok());  // past the block: moves
  EXPECT_EQ(counted_.statistics().current_bytes, 8192U) << "the old block went back whole";
  EXPECT_TRUE(holds(moved, 3072, 5));
  std::uint8_t* small = moved;
  ASSERT_TRUE(pool_.Reallocate(8192, 1000, 64, &small).ok());  // under half: moves
  EXPECT_NE(small, moved);
  EXPECT_EQ(counted_.statistics().current_bytes, 1000U);
  EXPECT_TRUE(holds(small, 1000, 5));
  // Shrunk in place, then to nothing: the whole block goes back.
  ASSERT_TRUE(pool_.Reallocate(1000, 600, 64, &small).ok());
  ASSERT_TRUE(pool_.Reallocate(600, 0, 64, &small).ok());
  EXPECT_EQ(counted_.statistics().current_bytes, 0U);
  EXPECT_EQ(pool_.bytes_allocated(), 0);
  // From nothing (Arrow's zero-size area) to a block, and back.
  std::uint8_t* empty = nullptr;
  ASSERT_TRUE(pool_.Allocate(0, 64, &empty).ok());
  ASSERT_TRUE(pool_.Reallocate(0, 256, 64, &empty).ok());
  EXPECT_EQ(counted_.statistics().current_bytes, 256U);
  fill(empty, 256, 3);
  pool_.Free(empty, 256, 64);
  EXPECT_EQ(counted_.statistics().current_bytes, 0U);
}

TEST_F(ArrowMemoryPool, ConcurrentReallocationsKeepEveryBlocksSize) {
  // Arrow's decoding threads shrink and free their own buffers at once.
  std::vector<std::thread> threads;
  for (int thread = 0; thread < 4; ++thread) {
    threads.emplace_back([this, thread] {
      for (int round = 0; round < 2000; ++round) {
        int const size      = 64 * (1 + (round + thread) % 64);
        std::uint8_t* block = nullptr;
        ASSERT_TRUE(pool_.Allocate(size, 64, &block).ok());
        fill(block, size, thread + 1);
        ASSERT_TRUE(pool_.Reallocate(size, size * 3 / 4, 64, &block).ok());
        ASSERT_TRUE(holds(block, size * 3 / 4, thread + 1));
        ASSERT_TRUE(pool_.Reallocate(size * 3 / 4, size * 2, 64, &block).ok());
        ASSERT_TRUE(holds(block, size * 3 / 4, thread + 1));
        pool_.Free(block, size * 2, 64);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(counted_.statistics().current_bytes, 0U);
  EXPECT_EQ(pool_.bytes_allocated(), 0);
}

/// Runs what it is given at once, on the caller's thread, and counts it.
class counting_executor final : public arrow::internal::Executor {
 public:
  int GetCapacity() override { return 1; }
  [[nodiscard]] int spawned() const { return spawned_.load(); }

 protected:
  arrow::Status SpawnReal(arrow::internal::TaskHints /*hints*/,
                          arrow::internal::FnOnce<void()> task,
                          arrow::StopToken /*stop*/,
                          StopCallback&& /*on_stop*/) override {
    ++spawned_;
    std::move(task)();
    return arrow::Status::OK();
  }

 private:
  std::atomic<int> spawned_{0};
};

class ArrowInputFiles : public testing::io_test {};

TEST_F(ArrowInputFiles, EveryReadOfAMappedFileIsDoneBeforeItReturns) {
  // A read handed to Arrow's I/O threads can hold a reader, and what it took from our pool,
  // past the reader's end: its buffers are then freed into a pool that is gone. The IPC
  // reader reads its footer with the `allow_short_read` overload, so both must stay here.
  auto const file = path("bytes.bin");
  std::ofstream{file, std::ios::binary} << std::string(10000, 'x');
  auto input = detail::open_mapped(file);
  ASSERT_TRUE(input.ok()) << input.status().ToString();
  counting_executor executor;
  arrow::io::IOContext const context{arrow::default_memory_pool(), &executor};
  auto whole = (*input)->ReadAsync(context, 0, 10000);
  auto tail  = (*input)->ReadAsync(context, 9000, 5000, true);
  ASSERT_TRUE(whole.is_finished());
  ASSERT_TRUE(tail.is_finished());
  EXPECT_EQ(executor.spawned(), 0) << "a read was left to an I/O thread";
  ASSERT_TRUE(whole.result().ok());
  EXPECT_EQ((*whole.result())->size(), 10000);
  ASSERT_TRUE(tail.result().ok());
  EXPECT_EQ((*tail.result())->size(), 1000);
  EXPECT_EQ(*(*input)->GetSize(), 10000);
}

#endif

}  // namespace
}  // namespace spillway
