#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <mutex>
#include <numeric>
#include <optional>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using testing::POOL_SIZES;
using testing::worker_threads_guard;

TEST(WorkerPool, UsableCoresIsAtLeastOneAndTheDefaultSize) {
  std::size_t const cores = usable_cores();
  EXPECT_GE(cores, 1U);
  EXPECT_LE(cores, std::max(1U, std::thread::hardware_concurrency()));
  worker_threads_guard const pool{0};
  EXPECT_EQ(worker_threads(), cores);
}

TEST(WorkerPool, SetAndReadTheSize) {
  for (std::size_t const threads : POOL_SIZES) {
    worker_threads_guard const pool{threads};
    EXPECT_EQ(worker_threads(), threads);
  }
  EXPECT_THROW(set_worker_threads(MAX_WORKER_THREADS + 1), logic_error);
}

TEST(WorkerPool, CgroupQuotasRoundUp) {
  EXPECT_EQ(detail::cgroup_v2_cores("max 100000\n"), std::nullopt);
  EXPECT_EQ(detail::cgroup_v2_cores("100000 100000\n"), 1U);
  EXPECT_EQ(detail::cgroup_v2_cores("150000 100000\n"), 2U);
  EXPECT_EQ(detail::cgroup_v2_cores("50000 100000"), 1U);
  EXPECT_EQ(detail::cgroup_v2_cores("800000 100000"), 8U);
  EXPECT_EQ(detail::cgroup_v2_cores(""), std::nullopt);
  EXPECT_EQ(detail::cgroup_v2_cores("garbage"), std::nullopt);
  EXPECT_EQ(detail::cgroup_v1_cores("-1\n", "100000\n"), std::nullopt);
  EXPECT_EQ(detail::cgroup_v1_cores("250000\n", "100000\n"), 3U);
  EXPECT_EQ(detail::cgroup_v1_cores("100000", "0"), std::nullopt);
}

TEST(WorkerPool, ParallelPartsFollowThePoolAndTheGrain) {
  worker_threads_guard const pool{8};
  EXPECT_EQ(parallel_parts(0, 100), 1U);
  EXPECT_EQ(parallel_parts(99, 100), 1U);
  EXPECT_EQ(parallel_parts(350, 100), 3U);
  EXPECT_EQ(parallel_parts(1'000'000, 100), 8U);
  worker_threads_guard const one{1};
  EXPECT_EQ(parallel_parts(1'000'000, 100), 1U);
}

TEST(WorkerPool, EveryPartRunsOnceForManySizes) {
  for (std::size_t const threads : POOL_SIZES) {
    worker_threads_guard const pool{threads};
    for (std::size_t const parts : std::vector<std::size_t>{0, 1, 2, 3, 7, 8, 16, 17, 100, 1000}) {
      std::vector<std::atomic<int>> runs(parts);
      std::vector<std::size_t> sums(parts, 0);
      parallel_for(parts, [&](std::size_t part) {
        runs[part].fetch_add(1);
        sums[part] = part * part;
      });
      for (std::size_t part = 0; part < parts; ++part) {
        ASSERT_EQ(runs[part].load(), 1) << threads << " threads, " << parts << " parts";
        ASSERT_EQ(sums[part], part * part);
      }
    }
  }
}

TEST(WorkerPool, OneThreadRunsInlineInOrder) {
  worker_threads_guard const pool{1};
  std::thread::id const caller = std::this_thread::get_id();
  std::vector<std::size_t> order;
  parallel_for(5, [&](std::size_t part) {
    EXPECT_EQ(std::this_thread::get_id(), caller);
    order.push_back(part);
  });
  EXPECT_EQ(order, (std::vector<std::size_t>{0, 1, 2, 3, 4}));
}

TEST(WorkerPool, TheCallerRunsPartZero) {
  for (std::size_t const threads : POOL_SIZES) {
    worker_threads_guard const pool{threads};
    std::thread::id const caller = std::this_thread::get_id();
    std::thread::id first;
    parallel_for(threads * 2, [&](std::size_t part) {
      if (part == 0) {
        first = std::this_thread::get_id();
      }
    });
    EXPECT_EQ(first, caller);
  }
}

TEST(WorkerPool, UsesSeveralThreads) {
  worker_threads_guard const pool{4};
  // Each part waits until all four have started: only four threads at once can get there.
  std::atomic<std::size_t> started{0};
  std::mutex seen_mutex;
  std::set<std::thread::id> seen;
  parallel_for(4, [&](std::size_t) {
    started.fetch_add(1);
    while (started.load() < 4) {
      std::this_thread::yield();
    }
    std::lock_guard const lock{seen_mutex};
    seen.insert(std::this_thread::get_id());
  });
  EXPECT_EQ(seen.size(), 4U);
}

TEST(WorkerPool, ExceptionsPropagateAfterEveryPartRan) {
  for (std::size_t const threads : POOL_SIZES) {
    worker_threads_guard const pool{threads};
    std::atomic<std::size_t> ran{0};
    try {
      parallel_for(20, [&](std::size_t part) {
        ran.fetch_add(1);
        if (part == 13 || part == 7) {
          throw std::runtime_error{"part " + std::to_string(part)};
        }
      });
      FAIL() << "no exception";
    } catch (std::runtime_error const& error) {
      EXPECT_STREQ(error.what(), "part 7");  // the lowest failing part
    }
    EXPECT_EQ(ran.load(), 20U);
    // The pool still works after a failure.
    std::atomic<std::size_t> after{0};
    parallel_for(10, [&](std::size_t) { after.fetch_add(1); });
    EXPECT_EQ(after.load(), 10U);
  }
}

TEST(WorkerPool, NestedParallelForDoesNotDeadlock) {
  for (std::size_t const threads : POOL_SIZES) {
    worker_threads_guard const pool{threads};
    std::vector<std::atomic<std::size_t>> cells(16 * 16 * 4);
    parallel_for(16, [&](std::size_t outer) {
      parallel_for(16, [&](std::size_t middle) {
        parallel_for(
          4, [&](std::size_t inner) { cells[(outer * 16 + middle) * 4 + inner].fetch_add(1); });
      });
    });
    for (auto const& cell : cells) {
      ASSERT_EQ(cell.load(), 1U) << threads << " threads";
    }
  }
}

TEST(WorkerPool, CallsFromSeveralThreadsAtOnce) {
  worker_threads_guard const pool{3};
  std::vector<std::thread> callers;
  std::vector<std::size_t> totals(6, 0);
  for (std::size_t caller = 0; caller < totals.size(); ++caller) {
    callers.emplace_back([&, caller] {
      for (int round = 0; round < 50; ++round) {
        std::vector<std::size_t> values(9, 0);
        parallel_for(values.size(), [&](std::size_t part) { values[part] = part + caller; });
        totals[caller] += std::accumulate(values.begin(), values.end(), std::size_t{0});
      }
    });
  }
  for (auto& caller : callers) {
    caller.join();
  }
  for (std::size_t caller = 0; caller < totals.size(); ++caller) {
    EXPECT_EQ(totals[caller], 50 * (36 + 9 * caller));
  }
}

}  // namespace
}  // namespace spillway
