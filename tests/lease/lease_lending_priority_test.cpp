/**
 * @file lease_lending_priority_test.cpp
 * @brief Lending and priorities (lease_arbiter.hpp, "Lending and priorities"): a waiting task's
 * bytes are lent only to tasks of its own or a higher priority, and reclaims queue by priority,
 * so that lending never makes a task wait on a task of lower priority. With a stress run of
 * tasks of mixed priorities.
 */
#include "lease/watchdog.hpp"

#include <spillway/core/events.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <latch>
#include <optional>
#include <ostream>
#include <random>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {

/// gtest prints task ids in failures as "task 3" (found by argument-dependent lookup).
inline void PrintTo(task_id id, std::ostream* out) { *out << to_string(id); }

namespace {

using namespace std::chrono_literals;
using test::run_with_watchdog;
using test::wait_until;

constexpr task_id TASK_LOW{1};
constexpr task_id TASK_HIGH{2};
constexpr task_id TASK_HIGHER{3};
constexpr task_id TASK_OTHER{4};

/// A spill hook that frees what it is asked and counts its calls.
struct counting_hook {
  std::atomic<std::size_t> calls{0};
  std::atomic<std::size_t> freed{0};

  spill_hook make() {
    return [this](std::size_t bytes) {
      calls.fetch_add(1);
      freed.fetch_add(bytes);
      return bytes;
    };
  }
};

/// The LEASE_LENT events of `log`.
std::vector<event> lent_events(event_log const& log) {
  std::vector<event> result;
  for (auto const& e : log.events()) {
    if (e.kind == event_kind::LEASE_LENT) {
      result.push_back(e);
    }
  }
  return result;
}

/*
 * The inversion. Capacity 100. HIGH (priority 1) holds 60 and waits in a blocking scope; LOW
 * (priority 0) asks for 50 with 40 free. Lending HIGH's bytes to LOW would make HIGH, when its
 * wait ends, wait for LOW to return its lease before it could go on. So LOW waits for free
 * memory instead, and HIGH leaves its scope at once.
 *
 * No verdict waits on the clock: HIGH enters its scope before LOW asks, and LOW decides whether
 * to borrow within its request, before it is seen queued. If LOW borrowed, it is granted while
 * HIGH still waits, and the test ends on that.
 */
TEST(LeaseLendingPriority, ConcurrentWaitingTaskLendsNothingToALowerPriorityHead) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    task_context high{arbiter, TASK_HIGH, 1};
    task_context low{arbiter, TASK_LOW, 0};
    counting_hook hook;
    high.set_spill_hook(hook.make());
    memory_lease high_held = high.request_lease(60);

    std::promise<void> leave_scope;
    std::atomic<bool> in_scope{false};
    std::atomic<bool> left_scope{false};
    std::thread high_thread = test::checked_thread([&] {
      {
        auto const scope = high.blocked();
        in_scope         = true;
        leave_scope.get_future().wait();
      }
      left_scope = true;
    });
    wait_until([&] { return in_scope.load(); });

    std::promise<void> release_low;
    std::thread low_thread = test::checked_thread([&] {
      memory_lease const lease = low.request_lease(50);
      release_low.get_future().wait();
    });
    wait_until([&] { return arbiter.waiting_requests() == 1 || low.total_lease() == 50; });
    leave_scope.set_value();
    wait_until([&] { return left_scope.load() || low.total_lease() == 50; });

    EXPECT_TRUE(left_scope.load()) << "the priority-1 task waited for a priority-0 task";
    EXPECT_EQ(low.total_lease(), 0U) << "the priority-0 task ran on bytes of the priority-1 task";
    EXPECT_EQ(hook.calls.load(), 0U);
    EXPECT_TRUE(lent_events(events).empty());
    EXPECT_EQ(arbiter.lent_bytes(high.id()), 0U);

    release_low.set_value();
    high_thread.join();
    high_held.close();  // now LOW fits
    low_thread.join();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * Lending upward still works. Capacity 100. LOW (priority 0) holds 60 and waits in a blocking
 * scope; HIGH (priority 1) asks for 50 and borrows LOW's spilled 10. When LOW's wait ends it
 * waits for HIGH's lease: a task of lower priority waits on one of higher priority, as it would
 * for any memory HIGH holds.
 */
TEST(LeaseLendingPriority, ConcurrentWaitingTaskLendsToAHigherPriorityHead) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    task_context high{arbiter, TASK_HIGH, 1};
    task_context low{arbiter, TASK_LOW, 0};
    counting_hook hook;
    low.set_spill_hook(hook.make());
    memory_lease low_held = low.request_lease(60);

    std::promise<void> leave_scope;
    std::atomic<bool> in_scope{false};
    std::atomic<bool> left_scope{false};
    std::size_t lent_after_scope = 99;
    std::thread low_thread       = test::checked_thread([&] {
      {
        auto const scope = low.blocked();
        in_scope         = true;
        leave_scope.get_future().wait();
      }
      lent_after_scope = arbiter.lent_bytes(low.id());
      left_scope       = true;
    });
    wait_until([&] { return in_scope.load(); });

    memory_lease high_lease = high.request_lease(50);  // borrows on this thread
    EXPECT_EQ(high_lease.bytes(), 50U);
    EXPECT_EQ(hook.freed.load(), 10U);
    auto const lent = lent_events(events);
    ASSERT_EQ(lent.size(), 1U);
    EXPECT_EQ(lent[0].task, low.id());
    EXPECT_EQ(lent[0].other_task, high.id());
    EXPECT_EQ(lent[0].bytes, 10U);

    leave_scope.set_value();
    wait_until([&] { return arbiter.waiting_requests() == 1; });  // LOW's reclaim
    EXPECT_FALSE(left_scope.load());
    high_lease.close();
    low_thread.join();
    EXPECT_EQ(lent_after_scope, 0U);
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    low_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * Reclaims queue by priority. Capacity 100. LOW (priority 0) holds 60 and lends 10 to HIGH
 * (priority 1), which holds 50. LOW's wait ends: its reclaim of 10 waits, as nothing is free.
 * HIGH then asks for 10 more. HIGH's request goes ahead of LOW's reclaim and borrows 10 more
 * from LOW (still waiting, for its bytes): HIGH never waits on LOW. Were the reclaim ahead of it,
 * HIGH's bytes would go to LOW's reclaim, or, with no lending downward, both would wait forever.
 */
TEST(LeaseLendingPriority, ConcurrentHigherPriorityRequestGoesAheadOfALowerPriorityReclaim) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    task_context high{arbiter, TASK_HIGH, 1};
    task_context low{arbiter, TASK_LOW, 0};
    counting_hook low_hook;
    counting_hook high_hook;
    low.set_spill_hook(low_hook.make());
    high.set_spill_hook(high_hook.make());
    memory_lease low_held = low.request_lease(60);

    std::promise<void> leave_scope;
    std::atomic<bool> in_scope{false};
    std::atomic<bool> left_scope{false};
    std::thread low_thread = test::checked_thread([&] {
      {
        auto const scope = low.blocked();
        in_scope         = true;
        leave_scope.get_future().wait();
      }
      left_scope = true;
    });
    wait_until([&] { return in_scope.load(); });

    std::promise<void> ask_more;
    std::promise<void> release_high;
    std::thread high_thread = test::checked_thread([&] {
      memory_lease const first = high.request_lease(50);
      ask_more.get_future().wait();
      lease_request_options options;
      options.timeout           = 20s;  // only turns a hang into a failure
      memory_lease const second = high.request_lease(10, options);
      release_high.get_future().wait();
    });
    wait_until([&] { return high.total_lease() == 50; });
    EXPECT_EQ(arbiter.lent_bytes(low.id()), 10U);

    leave_scope.set_value();
    wait_until([&] { return arbiter.waiting_requests() == 1; });  // LOW's reclaim
    ask_more.set_value();
    wait_until([&] { return high.total_lease() == 60 || left_scope.load(); });

    EXPECT_EQ(high.total_lease(), 60U) << "HIGH's request waited behind LOW's reclaim";
    EXPECT_FALSE(left_scope.load()) << "LOW took its bytes back ahead of HIGH's request";
    EXPECT_EQ(high_hook.calls.load(), 0U) << "HIGH's bytes were lent to LOW";
    EXPECT_EQ(arbiter.lent_bytes(low.id()), 20U);
    for (auto const& e : lent_events(events)) {
      EXPECT_EQ(e.task, low.id());
      EXPECT_EQ(e.other_task, high.id());
    }

    release_high.set_value();
    low_thread.join();  // LOW's reclaim goes through once HIGH has returned its leases
    EXPECT_EQ(arbiter.lent_bytes(low.id()), 0U);
    low_held.close();
    high_thread.join();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * A request that fits and has a higher priority than every waiter is granted at once, also when
 * the head is a reclaim of a lower priority; one of the reclaim's priority is not. Capacity 100:
 * LOW (priority 0) holds 60 and lends 20 to OTHER (priority 1), which holds 60. LOW's reclaim of
 * 20 waits with 10 free once OTHER returns 10.
 */
TEST(LeaseLendingPriority, ConcurrentHigherPriorityRequestThatFitsPassesALowerPriorityReclaim) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    task_context low{arbiter, TASK_LOW, 0};
    task_context other{arbiter, TASK_OTHER, 1};
    task_context higher{arbiter, TASK_HIGHER, 2};
    task_context same{arbiter, TASK_HIGH, 0};
    counting_hook hook;
    low.set_spill_hook(hook.make());
    memory_lease low_held = low.request_lease(60);

    std::promise<void> leave_scope;
    std::atomic<bool> in_scope{false};
    std::thread low_thread = test::checked_thread([&] {
      {
        auto const scope = low.blocked();
        in_scope         = true;
        leave_scope.get_future().wait();
      }
      EXPECT_EQ(arbiter.lent_bytes(low.id()), 0U);
    });
    wait_until([&] { return in_scope.load(); });
    memory_lease other_a = other.request_lease(30);
    memory_lease other_b = other.request_lease(10);
    memory_lease other_c = other.request_lease(20);  // borrows 20 of LOW's
    EXPECT_EQ(arbiter.lent_bytes(low.id()), 20U);
    leave_scope.set_value();
    wait_until([&] { return arbiter.waiting_requests() == 1; });  // LOW's reclaim
    other_b.close();                                              // 10 free; the reclaim needs 20

    EXPECT_FALSE(arbiter.try_request_lease(same.id(), 10).has_value())
      << "a request of the reclaim's priority passed it";
    auto urgent = arbiter.try_request_lease(higher.id(), 10);
    EXPECT_TRUE(urgent.has_value()) << "a lower-priority reclaim held back a request that fits";
    EXPECT_EQ(arbiter.waiting_requests(), 1U);
    if (urgent) {
      urgent->close();
    }
    other_c.close();
    low_thread.join();
    other_a.close();
    low_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * Stress: 12 tasks of priorities 0, 1 and 2 (four each), each on its own thread, request and
 * return leases at random against a small capacity. Every task has a spill hook, holds up to
 * three leases (so it waits while holding, and can lend), and now and then waits in a blocking
 * scope for a moment.
 *
 * Checks:
 * - it finishes (watchdog): lending only upward leaves no task waiting forever;
 * - every loan goes to a task of the lender's priority or higher (the LEASE_LENT events), so no
 *   lender ever waits on a task of lower priority to get its bytes back;
 * - the capacity is never exceeded: the arbiter's used and peak bytes, and an outside tracker
 *   incremented after a grant or a blocking scope (by the bytes granted plus the bytes the
 *   task's hook had spilled, which the grant or the end of the scope took back) and
 *   decremented before a return or by the hook;
 * - every byte is returned and every loan taken back at the end.
 */
TEST(LeaseLendingPriority, ConcurrentStressOfMixedPrioritiesLendsOnlyUpward) {
  constexpr std::size_t CAPACITY   = 1000;
  constexpr std::size_t THREADS    = 12;
  constexpr std::size_t OPERATIONS = 2000;
  std::size_t lent_seen            = 0;
  run_with_watchdog([&] {
    event_log events;
    lease_arbiter arbiter{CAPACITY, &events};
    std::atomic<std::size_t> outside{0};
    std::atomic<std::size_t> outside_peak{0};
    std::atomic<std::size_t> arbiter_over{0};
    std::atomic<std::size_t> requested_bytes{0};
    std::atomic<std::size_t> requests{0};
    std::vector<int> priority_of(THREADS + 1);
    for (std::size_t t = 1; t <= THREADS; ++t) {
      priority_of[t] = static_cast<int>(t % 3);
    }
    auto const raise_peak = [&](std::size_t now) {
      std::size_t peak = outside_peak.load();
      while (now > peak && !outside_peak.compare_exchange_weak(peak, now)) {
      }
    };
    std::mt19937_64 seeds{20240917};
    std::vector<std::uint64_t> thread_seeds(THREADS + 1);
    for (auto& seed : thread_seeds) {
      seed = seeds();
    }
    std::latch start{static_cast<std::ptrdiff_t>(THREADS)};
    std::vector<std::thread> threads;
    for (std::size_t t = 1; t <= THREADS; ++t) {
      threads.push_back(test::checked_thread([&, t] {
        std::mt19937_64 random{thread_seeds[t]};
        std::atomic<std::size_t> spilled{0};
        task_context task{arbiter, task_id{t}, priority_of[t]};
        task.set_spill_hook([&](std::size_t bytes) {
          outside.fetch_sub(bytes);
          spilled.fetch_add(bytes);
          return bytes;
        });
        std::vector<memory_lease> held;
        start.arrive_and_wait();  // all at once, for contention
        for (std::size_t op = 0; op < OPERATIONS; ++op) {
          if (!held.empty() && random() % 16 == 0) {
            {
              auto const scope = task.blocked();
              std::this_thread::yield();
            }
            std::size_t const back = spilled.exchange(0);
            raise_peak(outside.fetch_add(back) + back);
            continue;
          }
          bool const request = held.empty() || (held.size() < 3 && random() % 2 == 0);
          if (request) {
            std::size_t const bytes = 1 + random() % (CAPACITY / 4);
            memory_lease lease      = task.request_lease(bytes);
            std::size_t const back  = spilled.exchange(0);
            raise_peak(outside.fetch_add(bytes + back) + bytes + back);
            if (arbiter.used_bytes() > CAPACITY) {
              arbiter_over.fetch_add(1);
            }
            requested_bytes.fetch_add(bytes);
            requests.fetch_add(1);
            held.push_back(std::move(lease));
          } else {
            std::size_t const index = random() % held.size();
            outside.fetch_sub(held[index].bytes());
            held.erase(held.begin() + static_cast<std::ptrdiff_t>(index));
          }
        }
        for (auto& lease : held) {
          outside.fetch_sub(lease.bytes());
          lease.close();
        }
      }));
    }
    for (auto& thread : threads) {
      thread.join();
    }

    EXPECT_EQ(arbiter.used_bytes(), 0U);
    EXPECT_LE(arbiter.peak_used_bytes(), CAPACITY);
    EXPECT_EQ(arbiter_over.load(), 0U);
    EXPECT_LE(outside_peak.load(), CAPACITY);
    EXPECT_EQ(outside.load(), 0U);
    EXPECT_EQ(arbiter.waiting_requests(), 0U);
    auto const totals = arbiter.total_statistics();
    EXPECT_EQ(totals.grants, requests.load());
    EXPECT_EQ(totals.granted_bytes, requested_bytes.load());
    EXPECT_EQ(totals.lent_bytes, totals.borrowed_bytes);
    EXPECT_EQ(totals.lent_bytes, events.total_bytes(event_kind::LEASE_RECLAIMED))
      << "every lent byte was taken back";

    std::size_t downward = 0;
    std::string first_downward;
    for (auto const& e : lent_events(events)) {
      int const lender   = priority_of[e.task.value];
      int const borrower = priority_of[e.other_task.value];
      if (lender > borrower && downward++ == 0) {
        first_downward = to_string(e.task) + " (priority " + std::to_string(lender) + ") lent " +
                         std::to_string(e.bytes) + " bytes to " + to_string(e.other_task) +
                         " (priority " + std::to_string(borrower) + ")";
      }
    }
    EXPECT_EQ(downward, 0U) << first_downward;
    lent_seen = totals.lent_bytes;
  });
  RecordProperty("lent_bytes", static_cast<int>(lent_seen));
}

}  // namespace
}  // namespace spillway
