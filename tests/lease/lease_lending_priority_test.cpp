/**
 * @file lease_lending_priority_test.cpp
 * @brief Lending and priorities (lease_arbiter.hpp, "Lending and priorities"): a waiting task's
 * bytes are lent only to tasks of its own or a higher priority, and reclaims queue by priority,
 * so that lending never makes a task wait on a task of lower priority. With a stress run of
 * tasks of mixed priorities.
 */
#include "lease/lease_events.hpp"
#include "lease/lease_stress.hpp"
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
#include <limits>
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

/**
 * A task that holds a lease, with a counting spill hook, and waits in a blocking scope ("on
 * another task") on a thread of its own until `leave` is called; the constructor returns once
 * the task is in its scope, where what it holds may be lent. Leaving the scope takes back what
 * the task lent, so `left` holds once its bytes are back.
 */
class holder_in_scope {
 public:
  holder_in_scope(task_context& task, std::size_t bytes) : task_{task} {
    task_.set_spill_hook(hook_.make());
    held_   = task_.request_lease(bytes);
    thread_ = test::checked_thread([this] {
      {
        auto const scope = task_.blocked();
        in_scope_        = true;
        leave_.get_future().wait();
      }
      lent_after_scope_ = task_.arbiter().lent_bytes(task_.id());
      left_             = true;
    });
    wait_until([&] { return in_scope_.load(); });
  }
  holder_in_scope(holder_in_scope const&)            = delete;
  holder_in_scope& operator=(holder_in_scope const&) = delete;
  ~holder_in_scope() {
    leave();
    if (thread_.joinable()) {
      thread_.join();
    }
  }

  /// Ends the wait: the task leaves its scope once its lent bytes are back.
  void leave() {
    if (!told_to_leave_) {
      told_to_leave_ = true;
      leave_.set_value();
    }
  }

  /// @return whether the task has left its scope
  [[nodiscard]] bool left() const { return left_.load(); }

  /// Waits for the task to leave its scope. @return the bytes it still had lent after the scope
  std::size_t join() {
    thread_.join();
    return lent_after_scope_;
  }

  /// @return the task's spill hook
  [[nodiscard]] counting_hook const& hook() const { return hook_; }

  /// Returns the lease the task holds.
  void close_held() { held_.close(); }

 private:
  task_context& task_;
  counting_hook hook_;
  memory_lease held_;
  std::promise<void> leave_;
  bool told_to_leave_ = false;
  std::atomic<bool> in_scope_{false};
  std::atomic<bool> left_{false};
  std::size_t lent_after_scope_ = std::numeric_limits<std::size_t>::max();  // until it leaves
  std::thread thread_;
};

/// The LEASE_LENT events of `log`.
std::vector<event> lent_events(event_log const& log) {
  return test::events_of(log, event_kind::LEASE_LENT);
}

/// Capacity 100, with an event log, and two tasks: LOW (priority 0) and HIGH (priority 1).
class LeaseLendingPriority : public ::testing::Test {
 protected:
  event_log events_;
  lease_arbiter arbiter_{100, &events_};
  task_context high_{arbiter_, TASK_HIGH, 1};
  task_context low_{arbiter_, TASK_LOW, 0};
};

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
TEST_F(LeaseLendingPriority, ConcurrentWaitingTaskLendsNothingToALowerPriorityHead) {
  run_with_watchdog([&] {
    holder_in_scope high_waits{high_, 60};

    std::promise<void> release_low;
    std::thread low_thread = test::checked_thread([&] {
      memory_lease const lease = low_.request_lease(50);
      release_low.get_future().wait();
    });
    wait_until([&] { return arbiter_.waiting_requests() == 1 || low_.total_lease() == 50; });
    high_waits.leave();
    wait_until([&] { return high_waits.left() || low_.total_lease() == 50; });

    EXPECT_TRUE(high_waits.left()) << "the priority-1 task waited for a priority-0 task";
    EXPECT_EQ(low_.total_lease(), 0U) << "the priority-0 task ran on bytes of the priority-1 task";
    EXPECT_EQ(high_waits.hook().calls.load(), 0U);
    EXPECT_TRUE(lent_events(events_).empty());
    EXPECT_EQ(arbiter_.lent_bytes(high_.id()), 0U);

    release_low.set_value();
    high_waits.join();
    high_waits.close_held();  // now LOW fits
    low_thread.join();
    EXPECT_EQ(arbiter_.used_bytes(), 0U);
  });
}

/*
 * Lending upward still works. Capacity 100. LOW (priority 0) holds 60 and waits in a blocking
 * scope; HIGH (priority 1) asks for 50 and borrows LOW's spilled 10. When LOW's wait ends it
 * waits for HIGH's lease: a task of lower priority waits on one of higher priority, as it would
 * for any memory HIGH holds.
 */
TEST_F(LeaseLendingPriority, ConcurrentWaitingTaskLendsToAHigherPriorityHead) {
  run_with_watchdog([&] {
    holder_in_scope low_waits{low_, 60};

    memory_lease high_lease = high_.request_lease(50);  // borrows on this thread
    EXPECT_EQ(high_lease.bytes(), 50U);
    EXPECT_EQ(low_waits.hook().freed.load(), 10U);
    auto const lent = lent_events(events_);
    ASSERT_EQ(lent.size(), 1U);
    EXPECT_EQ(lent[0].task, low_.id());
    EXPECT_EQ(lent[0].other_task, high_.id());
    EXPECT_EQ(lent[0].bytes, 10U);

    low_waits.leave();
    wait_until([&] { return arbiter_.waiting_requests() == 1; });  // LOW's reclaim
    EXPECT_FALSE(low_waits.left());
    high_lease.close();
    EXPECT_EQ(low_waits.join(), 0U);
    EXPECT_EQ(arbiter_.used_bytes(), 60U);
    low_waits.close_held();
    EXPECT_EQ(arbiter_.used_bytes(), 0U);
  });
}

/*
 * Reclaims queue by priority. Capacity 100. LOW (priority 0) holds 60 and lends 10 to HIGH
 * (priority 1), which holds 50. LOW's wait ends: its reclaim of 10 waits, as nothing is free.
 * HIGH then asks for 10 more. HIGH's request goes ahead of LOW's reclaim and borrows 10 more
 * from LOW (still waiting, for its bytes): HIGH never waits on LOW. Were the reclaim ahead of it,
 * HIGH's bytes would go to LOW's reclaim, or, with no lending downward, both would wait forever.
 */
TEST_F(LeaseLendingPriority, ConcurrentHigherPriorityRequestGoesAheadOfALowerPriorityReclaim) {
  run_with_watchdog([&] {
    counting_hook high_hook;
    high_.set_spill_hook(high_hook.make());
    holder_in_scope low_waits{low_, 60};

    std::promise<void> ask_more;
    std::promise<void> release_high;
    std::thread high_thread = test::checked_thread([&] {
      memory_lease const first = high_.request_lease(50);
      ask_more.get_future().wait();
      lease_request_options options;
      options.timeout           = 20s;  // only turns a hang into a failure
      memory_lease const second = high_.request_lease(10, options);
      release_high.get_future().wait();
    });
    wait_until([&] { return high_.total_lease() == 50; });
    EXPECT_EQ(arbiter_.lent_bytes(low_.id()), 10U);

    low_waits.leave();
    wait_until([&] { return arbiter_.waiting_requests() == 1; });  // LOW's reclaim
    ask_more.set_value();
    wait_until([&] { return high_.total_lease() == 60 || low_waits.left(); });

    EXPECT_EQ(high_.total_lease(), 60U) << "HIGH's request waited behind LOW's reclaim";
    EXPECT_FALSE(low_waits.left()) << "LOW took its bytes back ahead of HIGH's request";
    EXPECT_EQ(high_hook.calls.load(), 0U) << "HIGH's bytes were lent to LOW";
    EXPECT_EQ(arbiter_.lent_bytes(low_.id()), 20U);
    for (auto const& e : lent_events(events_)) {
      EXPECT_EQ(e.task, low_.id());
      EXPECT_EQ(e.other_task, high_.id());
    }

    release_high.set_value();
    low_waits.join();  // LOW's reclaim goes through once HIGH has returned its leases
    EXPECT_EQ(arbiter_.lent_bytes(low_.id()), 0U);
    low_waits.close_held();
    high_thread.join();
    EXPECT_EQ(arbiter_.used_bytes(), 0U);
  });
}

/*
 * A request that fits and has a higher priority than every waiter is granted at once, also when
 * the head is a reclaim of a lower priority; one of the reclaim's priority is not. Capacity 100:
 * LOW (priority 0) holds 60 and lends 20 to OTHER (priority 1), which holds 60. LOW's reclaim of
 * 20 waits with 10 free once OTHER returns 10.
 */
TEST_F(LeaseLendingPriority, ConcurrentHigherPriorityRequestThatFitsPassesALowerPriorityReclaim) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    task_context low{arbiter, TASK_LOW, 0};
    task_context other{arbiter, TASK_OTHER, 1};
    task_context higher{arbiter, TASK_HIGHER, 2};
    task_context same{arbiter, TASK_HIGH, 0};
    holder_in_scope low_waits{low, 60};
    memory_lease other_a = other.request_lease(30);
    memory_lease other_b = other.request_lease(10);
    memory_lease other_c = other.request_lease(20);  // borrows 20 of LOW's
    EXPECT_EQ(arbiter.lent_bytes(low.id()), 20U);
    low_waits.leave();
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
    EXPECT_EQ(low_waits.join(), 0U);
    other_a.close();
    low_waits.close_held();
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
TEST_F(LeaseLendingPriority, ConcurrentStressOfMixedPrioritiesLendsOnlyUpward) {
  std::size_t lent_seen = 0;
  run_with_watchdog([&] {
    test::lease_stress_options const options{
      .capacity   = 1000,
      .operations = 2000,
      .priority_of =
        test::stress_priorities(12, [](std::size_t t) { return static_cast<int>(t % 3); }),
      .scope_one_in = 16,
      .seeds        = std::mt19937_64{20240917},
    };
    event_log events;
    lease_arbiter arbiter{options.capacity, &events};
    test::expect_capacity_kept_and_every_byte_returned(
      arbiter, options.capacity, test::run_lease_stress(arbiter, options));
    auto const& priority_of = options.priority_of;
    auto const totals       = arbiter.total_statistics();
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
