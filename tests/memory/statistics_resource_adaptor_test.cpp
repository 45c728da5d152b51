/**
 * @file statistics_resource_adaptor_test.cpp
 * @brief Current, peak and total bytes and counts: exact on one thread and under concurrency.
 */
#include "memory/throwing_memory_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <barrier>
#include <thread>
#include <vector>

namespace spillway {
namespace {

/// Compares every field, so that a failure names the one that is wrong.
void expect_statistics(allocation_statistics const& actual, allocation_statistics const& expected) {
  EXPECT_EQ(actual.current_bytes, expected.current_bytes);
  EXPECT_EQ(actual.peak_bytes, expected.peak_bytes);
  EXPECT_EQ(actual.total_bytes, expected.total_bytes);
  EXPECT_EQ(actual.current_count, expected.current_count);
  EXPECT_EQ(actual.peak_count, expected.peak_count);
  EXPECT_EQ(actual.total_count, expected.total_count);
}

TEST(StatisticsResourceAdaptor, CountsOnOneThread) {
  host_memory_resource host;
  statistics_resource_adaptor stats{host};
  expect_statistics(stats.statistics(), {0, 0, 0, 0, 0, 0});
  void* a = stats.allocate(100);
  void* b = stats.allocate(200);
  void* c = stats.allocate(300);
  expect_statistics(stats.statistics(), {600, 600, 600, 3, 3, 3});
  stats.deallocate(b, 200);
  expect_statistics(stats.statistics(), {400, 600, 600, 2, 3, 3});
  void* d = stats.allocate(50);
  expect_statistics(stats.statistics(), {450, 600, 650, 3, 3, 4});
  stats.deallocate(a, 100);
  stats.deallocate(c, 300);
  stats.deallocate(d, 50);
  expect_statistics(stats.statistics(), {0, 600, 650, 0, 3, 4});
}

TEST(StatisticsResourceAdaptor, ResetPeaksStartsFromTheCurrentValues) {
  host_memory_resource host;
  statistics_resource_adaptor stats{host};
  void* a = stats.allocate(1000);
  void* b = stats.allocate(24);
  stats.deallocate(a, 1000);
  expect_statistics(stats.statistics(), {24, 1024, 1024, 1, 2, 2});
  stats.reset_peaks();
  expect_statistics(stats.statistics(), {24, 24, 1024, 1, 1, 2});
  void* c = stats.allocate(10);
  expect_statistics(stats.statistics(), {34, 34, 1034, 2, 2, 3});
  stats.deallocate(b, 24);
  stats.deallocate(c, 10);
  expect_statistics(stats.statistics(), {0, 34, 1034, 0, 2, 3});
}

TEST(StatisticsResourceAdaptor, ThrowingUpstreamIsNotCounted) {
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  statistics_resource_adaptor stats{upstream};
  void* held = stats.allocate(128);
  upstream.fail_next(2);
  EXPECT_THROW(static_cast<void>(stats.allocate(4096)), out_of_memory);
  EXPECT_THROW(static_cast<void>(stats.allocate(64)), out_of_memory);
  EXPECT_EQ(upstream.failures(), 2U);
  expect_statistics(stats.statistics(), {128, 128, 128, 1, 1, 1});
  stats.deallocate(held, 128);
  expect_statistics(stats.statistics(), {0, 128, 128, 0, 1, 1});
}

TEST(StatisticsResourceAdaptor, KindIsForwarded) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  EXPECT_EQ(stats.kind(), memory_kind::DEVICE);
  EXPECT_EQ(&stats.upstream().get(), &device);
}

TEST(StatisticsResourceAdaptor, ConcurrentEightThreadsExactCounts) {
  constexpr std::size_t THREADS    = 8;
  constexpr std::size_t ITERATIONS = 2000;
  constexpr std::size_t HELD       = 4;  // each thread keeps this many blocks between steps
  auto size_of                     = [](std::size_t thread, std::size_t iteration) {
    return 64 * (1 + (thread + iteration) % 7);
  };
  std::size_t expected_bytes = 0;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    for (std::size_t iteration = 0; iteration < ITERATIONS; ++iteration) {
      expected_bytes += size_of(thread, iteration);
    }
  }
  host_memory_resource host;
  statistics_resource_adaptor stats{host};
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&stats, &size_of, thread] {
      std::vector<std::pair<void*, std::size_t>> held;
      for (std::size_t iteration = 0; iteration < ITERATIONS; ++iteration) {
        std::size_t const bytes = size_of(thread, iteration);
        held.emplace_back(stats.allocate(bytes), bytes);
        if (held.size() > HELD) {
          stats.deallocate(held.front().first, held.front().second);
          held.erase(held.begin());
        }
      }
      for (auto const& [pointer, bytes] : held) {
        stats.deallocate(pointer, bytes);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  auto const result = stats.statistics();
  EXPECT_EQ(result.current_bytes, 0U);
  EXPECT_EQ(result.current_count, 0U);
  EXPECT_EQ(result.total_bytes, expected_bytes);
  EXPECT_EQ(result.total_count, THREADS * ITERATIONS);
  // Never more than HELD + 1 blocks of at most 448 bytes per thread.
  EXPECT_LE(result.peak_count, THREADS * (HELD + 1));
  EXPECT_LE(result.peak_bytes, THREADS * (HELD + 1) * 448);
  EXPECT_GE(result.peak_count, HELD + 1);
}

TEST(StatisticsResourceAdaptor, ConcurrentPeakIsExactWhenEveryoneHoldsAtABarrier) {
  constexpr std::size_t THREADS = 8;
  auto bytes_of                 = [](std::size_t thread) { return 1000 * (thread + 1); };
  host_memory_resource host;
  statistics_resource_adaptor stats{host};
  std::barrier all_allocated{static_cast<std::ptrdiff_t>(THREADS)};
  std::barrier all_freed{static_cast<std::ptrdiff_t>(THREADS)};
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&, thread] {
      std::size_t const bytes = bytes_of(thread);
      void* first             = stats.allocate(bytes);
      void* second            = stats.allocate(bytes);
      // Every thread holds both blocks here: the peak is all of them, exactly.
      all_allocated.arrive_and_wait();
      stats.deallocate(first, bytes);
      stats.deallocate(second, bytes);
      all_freed.arrive_and_wait();
      // A second round of half the size cannot raise the peak.
      void* third = stats.allocate(bytes / 2);
      stats.deallocate(third, bytes / 2);
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::size_t const held = 2 * (1000 * THREADS * (THREADS + 1) / 2);  // 2 x (1000 + ... + 8000)
  auto const result      = stats.statistics();
  EXPECT_EQ(result.peak_bytes, held);
  EXPECT_EQ(result.peak_count, 2 * THREADS);
  EXPECT_EQ(result.total_bytes, held + held / 4);
  EXPECT_EQ(result.total_count, 3 * THREADS);
  EXPECT_EQ(result.current_bytes, 0U);
  EXPECT_EQ(result.current_count, 0U);
}

TEST(StatisticsResourceAdaptor, ConcurrentPeakNeverExceedsTheUpstreamsCapacity) {
  // Four threads take turns at a device that holds two blocks: each frees its block while
  // another takes the room. The count must never hold a block the upstream has already freed
  // beside the one that took its place, or the peak would read more than the device holds.
  constexpr std::size_t THREADS    = 4;
  constexpr std::size_t ITERATIONS = 200000;
  constexpr std::size_t BLOCK      = 4096;
  emulated_device_memory_resource device{2 * BLOCK};
  statistics_resource_adaptor stats{device};
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&stats] {
      for (std::size_t iteration = 0; iteration < ITERATIONS; ++iteration) {
        void* pointer = nullptr;
        try {
          pointer = stats.allocate(BLOCK);
        } catch (out_of_memory const&) {
          std::this_thread::yield();
          continue;
        }
        stats.deallocate(pointer, BLOCK);
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  auto const result = stats.statistics();
  EXPECT_LE(result.peak_bytes, 2 * BLOCK);
  EXPECT_LE(result.peak_count, 2U);
  EXPECT_LE(result.peak_bytes, device.peak_bytes());
  EXPECT_EQ(result.current_bytes, 0U);
  EXPECT_GT(result.total_count, 0U);
}

}  // namespace
}  // namespace spillway
