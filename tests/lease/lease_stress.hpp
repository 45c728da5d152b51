/**
 * @file lease_stress.hpp
 * @brief The stress run of the lease suites: tasks, each on its own thread, request and return
 * leases at random against one arbiter of a small capacity, while an outside tracker follows the
 * bytes they hold. A task that lends has a spill hook, holds up to three leases (so it waits
 * while holding, and can lend) and now and then waits in a blocking scope for a moment; a task
 * that does not lend has no hook and holds one lease at a time.
 *
 * The outside tracker is incremented after a grant or a blocking scope (by the bytes granted
 * plus the bytes the task's hook had spilled, which the grant or the end of the scope took back)
 * and decremented before a return or by the hook, so that its peak is what the tasks held at
 * once. Each test checks the run's counts and its arbiter (and event log) afterwards.
 */
#pragma once

#include "lease/watchdog.hpp"

#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <latch>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace spillway::test {

/** @brief How a stress run's tasks behave. Tasks are numbered 1 to `priority_of.size() - 1`. */
struct lease_stress_options {
  std::size_t capacity   = 0;    ///< the arbiter's capacity; a request is 1 to capacity/4 bytes
  std::size_t operations = 0;    ///< operations of each task
  std::vector<int> priority_of;  ///< each task's priority, by task id ([0] unused)
  /// whether a task lends (see the file comment); every task does unless told otherwise
  std::function<bool(std::size_t task)> lends = [](std::size_t) { return true; };
  std::size_t scope_one_in = 16;  ///< a lending task that holds a lease enters a blocking scope
                                  ///< on about one operation in this many
  std::mt19937_64 seeds;          ///< draws each task's seed, one for each index of priority_of
};

/**
 * @return the priorities of `tasks` tasks for `lease_stress_options::priority_of`: task t (from
 * 1, in order) gets `priority(t)`
 */
inline std::vector<int> stress_priorities(std::size_t tasks,
                                          std::function<int(std::size_t task)> const& priority) {
  std::vector<int> result(tasks + 1);
  for (std::size_t t = 1; t <= tasks; ++t) {
    result[t] = priority(t);
  }
  return result;
}

/** @brief What a stress run counted. */
struct lease_stress_counts {
  std::size_t outside_peak    = 0;  ///< the outside tracker's peak
  std::size_t outside_end     = 0;  ///< the outside tracker at the end (every lease returned)
  std::size_t over_capacity   = 0;  ///< grants after which the arbiter used more than capacity
  std::size_t requests        = 0;  ///< requests granted
  std::size_t requested_bytes = 0;  ///< bytes they asked for
  std::size_t scopes          = 0;  ///< blocking scopes left
};

/** @brief The outside tracker: the bytes the tasks hold by their own count, and its peak. */
class held_bytes_tracker {
 public:
  /// Counts `bytes` more held, raising the peak.
  void add(std::size_t bytes) {
    std::size_t const now = now_.fetch_add(bytes) + bytes;
    std::size_t peak      = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
  }
  /// Counts `bytes` fewer held.
  void remove(std::size_t bytes) { now_.fetch_sub(bytes); }
  /// @return the bytes held now
  [[nodiscard]] std::size_t now() const { return now_.load(); }
  /// @return the most bytes held at once
  [[nodiscard]] std::size_t peak() const { return peak_.load(); }

 private:
  std::atomic<std::size_t> now_{0};
  std::atomic<std::size_t> peak_{0};
};

/**
 * @brief Runs the stress described by `options` against `arbiter`, all tasks starting at once,
 * and returns once every task has returned its leases and ended.
 */
inline lease_stress_counts run_lease_stress(lease_arbiter& arbiter,
                                            lease_stress_options const& options) {
  std::size_t const tasks = options.priority_of.size() - 1;
  held_bytes_tracker outside;
  std::atomic<std::size_t> over_capacity{0};
  std::atomic<std::size_t> requested_bytes{0};
  std::atomic<std::size_t> requests{0};
  std::atomic<std::size_t> scopes{0};
  std::mt19937_64 seeds = options.seeds;
  std::vector<std::uint64_t> thread_seeds(tasks + 1);
  for (auto& seed : thread_seeds) {
    seed = seeds();
  }
  std::latch start{static_cast<std::ptrdiff_t>(tasks)};
  std::vector<std::thread> threads;
  for (std::size_t t = 1; t <= tasks; ++t) {
    threads.push_back(checked_thread([&, t] {
      std::mt19937_64 random{thread_seeds[t]};
      bool const lends = options.lends(t);
      std::atomic<std::size_t> spilled{0};
      task_context task{arbiter, task_id{t}, options.priority_of[t]};
      if (lends) {
        task.set_spill_hook([&](std::size_t bytes) {
          outside.remove(bytes);
          spilled.fetch_add(bytes);
          return bytes;
        });
      }
      std::size_t const max_held = lends ? 3 : 1;
      std::vector<memory_lease> held;
      start.arrive_and_wait();  // all at once, for contention
      for (std::size_t op = 0; op < options.operations; ++op) {
        if (lends && !held.empty() && random() % options.scope_one_in == 0) {
          // Wait on "another task" for a moment: the held leases may be lent meanwhile, and
          // leaving the scope takes them back before the task goes on.
          {
            auto const scope = task.blocked();
            std::this_thread::yield();
          }
          outside.add(spilled.exchange(0));
          scopes.fetch_add(1);
          continue;
        }
        bool const request = held.empty() || (held.size() < max_held && random() % 2 == 0);
        if (request) {
          std::size_t const bytes = 1 + random() % (options.capacity / 4);
          memory_lease lease      = task.request_lease(bytes);
          std::size_t const back  = spilled.exchange(0);
          outside.add(bytes + back);
          if (arbiter.used_bytes() > options.capacity) {
            over_capacity.fetch_add(1);
          }
          requested_bytes.fetch_add(bytes);
          requests.fetch_add(1);
          held.push_back(std::move(lease));
        } else {
          std::size_t const index = random() % held.size();
          outside.remove(held[index].bytes());
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
        }
      }
      for (auto& lease : held) {
        outside.remove(lease.bytes());
        lease.close();
      }
    }));
  }
  for (auto& thread : threads) {
    thread.join();
  }
  return {outside.peak(),
          outside.now(),
          over_capacity.load(),
          requests.load(),
          requested_bytes.load(),
          scopes.load()};
}

/**
 * @brief The checks of every stress run: the capacity was never exceeded (the arbiter's used and
 * peak bytes, and the outside tracker), every byte is returned and no request waits, the
 * arbiter counted every grant and byte the tasks asked for, and every lent byte was borrowed.
 */
inline void expect_capacity_kept_and_every_byte_returned(lease_arbiter const& arbiter,
                                                         std::size_t capacity,
                                                         lease_stress_counts const& counts) {
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_LE(arbiter.peak_used_bytes(), capacity);
  EXPECT_EQ(counts.over_capacity, 0U);
  EXPECT_LE(counts.outside_peak, capacity);
  EXPECT_EQ(counts.outside_end, 0U);
  EXPECT_EQ(arbiter.waiting_requests(), 0U);
  auto const totals = arbiter.total_statistics();
  EXPECT_EQ(totals.grants, counts.requests);
  EXPECT_EQ(totals.granted_bytes, counts.requested_bytes);
  EXPECT_EQ(totals.lent_bytes, totals.borrowed_bytes);
}

}  // namespace spillway::test
