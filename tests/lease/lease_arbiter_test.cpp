/**
 * @file lease_arbiter_test.cpp
 * @brief The arbiter's policy (lease_arbiter.hpp): immediate grants, FIFO within a priority,
 * priorities, lending from waiting tasks, blocking scopes, reclaims, whole-device requests,
 * cancellation, timeouts, statistics and events, and a stress run that checks FIFO order and the
 * capacity at every instant.
 */
#include "lease/lease_events.hpp"
#include "lease/lease_stress.hpp"
#include "lease/watchdog.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/events.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <future>
#include <limits>
#include <map>
#include <mutex>
#include <optional>
#include <ostream>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway {

/// gtest prints task ids in failures as "task 3" (found by argument-dependent lookup).
inline void PrintTo(task_id id, std::ostream* out) { *out << to_string(id); }

namespace {

using namespace std::chrono_literals;
using test::events_of;
using test::run_with_watchdog;
using test::wait_until;

constexpr task_id TASK_A{1};
constexpr task_id TASK_B{2};
constexpr task_id TASK_C{3};
constexpr task_id TASK_D{4};

/// The tasks of the LEASE_GRANTED events, in grant order.
std::vector<task_id> grant_order(event_log const& log) {
  std::vector<task_id> result;
  for (auto const& e : events_of(log, event_kind::LEASE_GRANTED)) {
    result.push_back(e.task);
  }
  return result;
}

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

/**
 * @brief A spill hook that "spills" what it is asked, up to `budget` bytes in all (what the task
 * can make spillable), and remembers every request.
 */
struct recording_hook {
  std::mutex mutex;
  std::vector<std::size_t> asks;
  std::atomic<std::size_t> calls{0};
  std::atomic<std::size_t> freed{0};
  std::size_t budget = std::numeric_limits<std::size_t>::max();  ///< spillable bytes in all

  spill_hook make() {
    return [this](std::size_t bytes) {
      {
        std::lock_guard lock{mutex};
        asks.push_back(bytes);
      }
      calls.fetch_add(1);
      std::size_t const done = freed.load();
      std::size_t const give = std::min(bytes, budget - std::min(budget, done));
      freed.fetch_add(give);
      return give;
    };
  }
  std::vector<std::size_t> recorded() {
    std::lock_guard lock{mutex};
    return asks;
  }
};

TEST(LeaseArbiter, RequestsThatFitAreGrantedAtOnce) {
  event_log events;
  lease_arbiter arbiter{100, &events};
  EXPECT_EQ(arbiter.capacity(), 100U);
  memory_lease const first  = arbiter.request_lease(TASK_A, 30);
  memory_lease const second = arbiter.request_lease(TASK_A, 20);
  memory_lease const third  = arbiter.request_lease(TASK_B, 50);  // exactly fills the device
  EXPECT_EQ(arbiter.used_bytes(), 100U);
  EXPECT_EQ(arbiter.peak_used_bytes(), 100U);
  EXPECT_EQ(arbiter.waiting_requests(), 0U);
  EXPECT_EQ(arbiter.total_lease(TASK_A), 50U);
  EXPECT_EQ(arbiter.total_lease(TASK_B), 50U);
  EXPECT_EQ(arbiter.total_lease(TASK_C), 0U);
  auto const stats = arbiter.statistics(TASK_A);
  EXPECT_EQ(stats.grants, 2U);
  EXPECT_EQ(stats.granted_bytes, 50U);
  EXPECT_EQ(stats.waits, 0U);
  EXPECT_EQ(stats.wait_time, 0ns);
  auto const granted = events_of(events, event_kind::LEASE_GRANTED);
  ASSERT_EQ(granted.size(), 3U);
  for (auto const& e : granted) {
    EXPECT_EQ(e.duration, 0ns) << "an immediate grant reports no waiting";
  }
  EXPECT_EQ(granted[0].bytes, 30U);
  EXPECT_EQ(granted[2].task, TASK_B);
  EXPECT_EQ(events.count(event_kind::LEASE_WAIT_BEGIN), 0U);
}

TEST(LeaseArbiter, BaseLeaseIsReportedApartFromOtherLeases) {
  lease_arbiter arbiter{100};
  lease_request_options options;
  options.is_base          = true;
  memory_lease const base  = arbiter.request_lease(TASK_A, 25, options);
  memory_lease const extra = arbiter.request_lease(TASK_A, 15);
  EXPECT_EQ(arbiter.base_lease(TASK_A), 25U);
  EXPECT_EQ(arbiter.total_lease(TASK_A), 40U);
  EXPECT_EQ(arbiter.base_lease(TASK_B), 0U);
}

TEST(LeaseArbiter, ReturnAllLeasesReturnsEveryLeaseOfThatTaskOnly) {
  event_log events;
  lease_arbiter arbiter{100, &events};
  lease_request_options options;
  options.is_base     = true;
  memory_lease base   = arbiter.request_lease(TASK_A, 25, options);
  memory_lease extra  = arbiter.request_lease(TASK_A, 15);
  memory_lease others = arbiter.request_lease(TASK_B, 10);
  arbiter.return_all_leases(TASK_A);
  EXPECT_EQ(arbiter.total_lease(TASK_A), 0U);
  EXPECT_EQ(arbiter.base_lease(TASK_A), 0U);
  EXPECT_EQ(arbiter.total_lease(TASK_B), 10U);
  EXPECT_EQ(arbiter.used_bytes(), 10U);
  EXPECT_EQ(events.total_bytes(event_kind::LEASE_RETURNED), 40U);
  base.close();
  extra.close();
  EXPECT_EQ(arbiter.used_bytes(), 10U);
  EXPECT_EQ(events.total_bytes(event_kind::LEASE_RETURNED), 40U) << "inert leases return nothing";
  arbiter.return_all_leases(task_id{99});  // unknown: nothing happens
  EXPECT_EQ(arbiter.used_bytes(), 10U);
}

TEST(LeaseArbiter, TryRequestLeaseGrantsWhatFitsAndOtherwiseReturnsNothing) {
  lease_arbiter arbiter{100};
  auto first = arbiter.try_request_lease(TASK_A, 70);
  ASSERT_TRUE(first.has_value());
  EXPECT_EQ(first->bytes(), 70U);
  EXPECT_FALSE(arbiter.try_request_lease(TASK_B, 31).has_value());
  EXPECT_FALSE(arbiter.try_request_lease(TASK_B, 500).has_value()) << "never a whole-device grant";
  auto second = arbiter.try_request_lease(TASK_B, 30);
  ASSERT_TRUE(second.has_value());
  EXPECT_EQ(arbiter.used_bytes(), 100U);
  EXPECT_EQ(arbiter.waiting_requests(), 0U);
  second->close();
  arbiter.cancel(TASK_B);
  EXPECT_FALSE(arbiter.try_request_lease(TASK_B, 1).has_value()) << "a cancelled task gets nothing";
}

TEST(LeaseArbiter, ConcurrentLaterRequestOfTheSamePriorityDoesNotOvertakeAnEarlierOne) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    memory_lease holder = arbiter.request_lease(TASK_A, 60);
    std::thread large =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_B, 50); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread small =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_C, 10); });
    wait_until([&] { return arbiter.waiting_requests() == 2; });
    // 40 bytes are free and the small request would fit, yet it waits behind the large one.
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    EXPECT_EQ(arbiter.total_lease(TASK_C), 0U);
    // try_request_lease answers "nothing" rather than overtaking either of them.
    EXPECT_FALSE(arbiter.try_request_lease(TASK_D, 10).has_value());
    EXPECT_EQ(arbiter.waiting_requests(), 2U);
    holder.close();
    large.join();
    small.join();
    EXPECT_EQ(grant_order(events), (std::vector<task_id>{TASK_A, TASK_B, TASK_C}));
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

TEST(LeaseArbiter, ConcurrentHigherPriorityIsServedFirst) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    arbiter.register_task(TASK_B, 0);
    arbiter.register_task(TASK_C, 5);
    memory_lease holder = arbiter.request_lease(TASK_A, 100);
    std::thread low =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_B, 60); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread high =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_C, 60); });
    wait_until([&] { return arbiter.waiting_requests() == 2; });
    holder.close();  // only one of the two fits at a time: the later, higher-priority one goes
    high.join();
    low.join();
    EXPECT_EQ(grant_order(events), (std::vector<task_id>{TASK_A, TASK_C, TASK_B}));
  });
}

TEST(LeaseArbiter, ConcurrentHigherPriorityRequestThatFitsPassesALowerPriorityHead) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    arbiter.register_task(TASK_B, 0);
    arbiter.register_task(TASK_C, 1);
    memory_lease holder = arbiter.request_lease(TASK_A, 60);
    std::thread low =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_B, 50); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    // Same priority as the head: no overtaking. Higher priority: granted at once.
    EXPECT_FALSE(arbiter.try_request_lease(TASK_D, 30).has_value());
    memory_lease const urgent = arbiter.request_lease(TASK_C, 30);
    EXPECT_EQ(urgent.bytes(), 30U);
    EXPECT_EQ(arbiter.waiting_requests(), 1U);
    EXPECT_EQ(arbiter.statistics(TASK_C).waits, 0U);
    holder.close();
    low.join();
  });
}

/*
 * Lending. Capacity 100; B holds 60 and asks for 30 more (90 in all would fit), but A asked for
 * 50 first. A cannot be granted (40 free) until B returns memory, and B cannot be granted before
 * A (FIFO). Without lending both wait forever. B is waiting, so the arbiter asks B's spill hook to
 * free A's shortfall of 10 bytes and lends them to A; B is granted once A returns its lease, and
 * takes its 10 lent bytes back with that grant.
 */
TEST(LeaseArbiter, ConcurrentLendingGrantsTheHeadFromTheSpilledBytesOfAWaitingTask) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    recording_hook hook;
    arbiter.register_task(TASK_B, 0, hook.make());
    memory_lease b_held = arbiter.request_lease(TASK_B, 60);
    std::promise<void> release_a;
    std::thread a = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_A, 50);
      release_a.get_future().wait();
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread b = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_B, 30);
      EXPECT_EQ(arbiter.lent_bytes(TASK_B), 0U) << "B's grant took its lent bytes back";
    });
    wait_until([&] { return arbiter.total_lease(TASK_A) == 50; });
    EXPECT_EQ(hook.recorded(), (std::vector<std::size_t>{10}));
    EXPECT_EQ(arbiter.lent_bytes(TASK_B), 10U);
    EXPECT_EQ(arbiter.used_bytes(), 100U);  // 50 resident for B, 50 for A
    EXPECT_EQ(arbiter.waiting_requests(), 1U);
    auto const lent = events_of(events, event_kind::LEASE_LENT);
    ASSERT_EQ(lent.size(), 1U);
    EXPECT_EQ(lent[0].task, TASK_B);
    EXPECT_EQ(lent[0].other_task, TASK_A);
    EXPECT_EQ(lent[0].bytes, 10U);
    EXPECT_EQ(arbiter.statistics(TASK_B).lent_bytes, 10U);
    EXPECT_EQ(arbiter.statistics(TASK_A).borrowed_bytes, 10U);
    EXPECT_EQ(arbiter.total_statistics().lent_bytes, 10U);
    EXPECT_EQ(arbiter.total_statistics().borrowed_bytes, 10U);

    release_a.set_value();
    a.join();
    b.join();
    EXPECT_EQ(arbiter.lent_bytes(TASK_B), 0U);
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    EXPECT_EQ(arbiter.peak_used_bytes(), 100U);
    auto const reclaimed = events_of(events, event_kind::LEASE_RECLAIMED);
    ASSERT_EQ(reclaimed.size(), 1U);
    EXPECT_EQ(reclaimed[0].task, TASK_B);
    EXPECT_EQ(reclaimed[0].bytes, 10U);
    EXPECT_EQ(grant_order(events), (std::vector<task_id>{TASK_B, TASK_A, TASK_B}));
    b_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

TEST(LeaseArbiter, ConcurrentHookThatFreesNothingLendsNothing) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    recording_hook hook;
    hook.budget = 0;  // "could not make anything spillable"
    arbiter.register_task(TASK_B, 0, hook.make());
    memory_lease b_held = arbiter.request_lease(TASK_B, 60);
    std::thread a =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_A, 50); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread b =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_B, 30); });
    wait_until([&] { return hook.calls.load() >= 1; });
    wait_until([&] { return arbiter.waiting_requests() == 2; });
    EXPECT_EQ(arbiter.lent_bytes(TASK_B), 0U);
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    EXPECT_EQ(arbiter.total_lease(TASK_A), 0U) << "nothing was lent, so A keeps waiting";
    EXPECT_EQ(events.count(event_kind::LEASE_LENT), 0U);
    EXPECT_EQ(arbiter.total_statistics().lent_bytes, 0U);
    b_held.close();  // unblocks: A, then B
    a.join();
    b.join();
    EXPECT_EQ(grant_order(events), (std::vector<task_id>{TASK_B, TASK_A, TASK_B}));
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * The blocking-scope deadlock. Capacity 100.
 * - W holds 60.
 * - H asks for 50: 40 are free, so H waits at the head of the queue.
 * - T asks for 20 after H. It would fit, but FIFO puts it behind H.
 * - W now waits, inside a blocking scope, for T's output.
 * Without the scope this hangs: H waits for W's memory, W waits for T's output, and T waits
 * behind H (see ConcurrentWithoutTheBlockingScopeTheHeadCannotBorrow). The scope marks W as
 * waiting, so its spillable bytes can be lent: W's hook frees H's shortfall (10), then, with H
 * still holding its lease, T's (20); T produces W's input, and W, leaving the scope, first takes
 * its 30 lent bytes back, which waits (ahead of everything) until H returns its lease.
 */
TEST(LeaseArbiter, ConcurrentBlockingScopeLetsTheHeadBorrowFromATaskWaitingOnATaskBehindIt) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    task_context w{arbiter, TASK_A};
    task_context h{arbiter, TASK_B};
    task_context t{arbiter, TASK_C};
    recording_hook hook;
    w.set_spill_hook(hook.make());
    memory_lease w_held = w.request_lease(60);

    std::promise<void> w_may_wait;
    std::promise<int> t_output;
    std::promise<void> t_may_finish;
    std::size_t lent_after_scope = 1;
    std::size_t used_after_scope = 0;
    std::promise<void> h_may_finish;
    std::thread h_thread = test::checked_thread([&] {
      memory_lease const lease = h.request_lease(50);
      EXPECT_EQ(lease.bytes(), 50U);
      h_may_finish.get_future().wait();
    });
    wait_until([&] { return arbiter.statistics(h.id()).waits == 1; });
    std::thread t_thread = test::checked_thread([&] {
      memory_lease const lease = t.request_lease(20);
      t_output.set_value(42);
      t_may_finish.get_future().wait();
    });
    wait_until([&] { return arbiter.waiting_requests() == 2; });
    EXPECT_EQ(hook.calls.load(), 0U) << "W is not waiting yet: nothing of W's may be lent";
    std::thread w_thread = test::checked_thread([&] {
      int value = 0;
      {
        auto const scope = w.blocked();
        value            = t_output.get_future().get();
      }
      lent_after_scope = arbiter.lent_bytes(w.id());
      used_after_scope = arbiter.used_bytes();
      EXPECT_EQ(value, 42);
    });
    // H borrows its shortfall (10) from W. H holds its lease for now, so T, at the head next with
    // nothing free, borrows its 20 from W too.
    wait_until([&] { return arbiter.total_lease(h.id()) == 50; });
    wait_until([&] { return arbiter.total_lease(t.id()) == 20; });
    EXPECT_EQ(hook.recorded(), (std::vector<std::size_t>{10, 20}));
    EXPECT_EQ(arbiter.statistics(w.id()).lent_bytes, 30U);
    EXPECT_EQ(arbiter.statistics(h.id()).borrowed_bytes, 10U);
    EXPECT_EQ(arbiter.statistics(t.id()).borrowed_bytes, 20U);
    // T's output ends W's wait; W's reclaim of 30 waits, ahead of everything, for H's lease.
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    EXPECT_EQ(arbiter.used_bytes(), 100U);
    h_may_finish.set_value();
    h_thread.join();
    w_thread.join();
    EXPECT_EQ(lent_after_scope, 0U) << "W took its lent bytes back before continuing";
    EXPECT_EQ(used_after_scope, 80U) << "W's 60 and T's 20, each counted once";
    EXPECT_EQ(arbiter.lent_bytes(w.id()), 0U);
    EXPECT_EQ(arbiter.total_lease(w.id()), 60U);
    EXPECT_EQ(events.total_bytes(event_kind::LEASE_RECLAIMED), 30U);
    t_may_finish.set_value();
    t_thread.join();
    w_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
    EXPECT_EQ(arbiter.peak_used_bytes(), 100U);
  });
}

/*
 * The same wait without the blocking scope: W is not waiting as far as the arbiter knows, so
 * nothing of W's can be lent and the head cannot be granted. A timeout on the head's request
 * shows it (nothing else could ever grant it), and unblocks T so that the test ends.
 */
TEST(LeaseArbiter, ConcurrentWithoutTheBlockingScopeTheHeadCannotBorrow) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    task_context w{arbiter, TASK_A};
    task_context h{arbiter, TASK_B};
    task_context t{arbiter, TASK_C};
    recording_hook hook;
    w.set_spill_hook(hook.make());
    memory_lease w_held = w.request_lease(60);
    std::promise<int> t_output;
    std::thread h_thread = test::checked_thread([&] {
      lease_request_options options;
      options.timeout = 300ms;
      EXPECT_THROW(static_cast<void>(h.request_lease(50, options)), timeout_error);
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread t_thread = test::checked_thread([&] {
      memory_lease const lease = t.request_lease(20);
      t_output.set_value(42);
    });
    // No wait for T to queue: H's timeout may already have fired on a slow machine.
    std::thread w_thread =
      test::checked_thread([&] { EXPECT_EQ(t_output.get_future().get(), 42); });  // no scope
    h_thread.join();
    t_thread.join();
    w_thread.join();
    EXPECT_EQ(hook.calls.load(), 0U);
    EXPECT_EQ(arbiter.total_statistics().lent_bytes, 0U);
  });
}

/*
 * A lender leaving its scope takes its lent bytes back ahead of every queued request. W lends
 * 10 to H; X then queues for 45. When H returns its 50, W's reclaim (10) goes first, leaving 40:
 * X keeps waiting until W returns memory. Had X gone first, W's reclaim would have had to wait.
 */
TEST(LeaseArbiter, ConcurrentReclaimIsServedAheadOfQueuedRequests) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    task_context w{arbiter, TASK_A};
    recording_hook hook;
    hook.budget = 10;  // W can make only 10 bytes spillable: X cannot borrow
    w.set_spill_hook(hook.make());
    memory_lease w_held = w.request_lease(60);
    std::promise<void> leave_scope;
    std::promise<void> release_h;
    std::thread w_thread = test::checked_thread([&] {
      {
        auto const scope = w.blocked();
        leave_scope.get_future().wait();
      }
      EXPECT_EQ(arbiter.lent_bytes(w.id()), 0U);
    });
    std::thread h_thread = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_B, 50);
      release_h.get_future().wait();
    });
    wait_until([&] { return arbiter.total_lease(TASK_B) == 50; });
    EXPECT_EQ(arbiter.lent_bytes(w.id()), 10U);
    std::thread x_thread =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_C, 45); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    leave_scope.set_value();  // W's reclaim queues ahead of X
    wait_until([&] { return arbiter.waiting_requests() == 2; });
    release_h.set_value();
    h_thread.join();
    w_thread.join();  // W was served although X queued first
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    EXPECT_EQ(arbiter.total_lease(TASK_C), 0U) << "X still waits: 40 free, 45 wanted";
    w_held.close();
    x_thread.join();
    auto const all       = events.events();
    auto const reclaimed = std::find_if(
      all.begin(), all.end(), [](event const& e) { return e.kind == event_kind::LEASE_RECLAIMED; });
    auto const x_granted = std::find_if(all.begin(), all.end(), [](event const& e) {
      return e.kind == event_kind::LEASE_GRANTED && e.task == TASK_C;
    });
    ASSERT_NE(reclaimed, all.end());
    ASSERT_NE(x_granted, all.end());
    EXPECT_LT(reclaimed - all.begin(), x_granted - all.begin());
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/// Captures WARN lines for the life of the object.
class warning_capture {
 public:
  warning_capture()
    : observer_([this](log_level level, std::string_view message) {
        if (level != log_level::WARN) {
          return;
        }
        std::lock_guard lock{mutex_};
        lines_.emplace_back(message);
      }) {}
  std::vector<std::string> lines() {
    std::lock_guard lock{mutex_};
    return lines_;
  }

 private:
  std::mutex mutex_;
  std::vector<std::string> lines_;
  scoped_log_observer observer_;
};

TEST(LeaseArbiter, ConcurrentWholeDeviceRequestWarnsAndIsGrantedOnlyOnAFreeDevice) {
  run_with_watchdog([] {
    warning_capture warnings;
    event_log events;
    lease_arbiter arbiter{100, &events};
    memory_lease other = arbiter.request_lease(TASK_B, 30);
    std::thread whole  = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_A, 250);
      EXPECT_EQ(lease.bytes(), 100U);
      EXPECT_EQ(arbiter.used_bytes(), 100U);
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    auto const lines = warnings.lines();
    ASSERT_EQ(lines.size(), 1U);
    EXPECT_TRUE(contains(lines[0], "task 1")) << lines[0];
    EXPECT_TRUE(contains(lines[0], "250 bytes")) << lines[0];
    EXPECT_TRUE(contains(lines[0], "granting 100 bytes")) << lines[0];
    EXPECT_EQ(arbiter.used_bytes(), 30U) << "not granted while another lease is open";
    other.close();
    whole.join();
    EXPECT_EQ(arbiter.statistics(TASK_A).whole_device, 1U);
    EXPECT_EQ(arbiter.total_statistics().whole_device, 1U);
    auto const fallbacks = events_of(events, event_kind::LEASE_WHOLE_DEVICE);
    ASSERT_EQ(fallbacks.size(), 1U);
    EXPECT_EQ(fallbacks[0].bytes, 250U);
    EXPECT_EQ(fallbacks[0].value, 100);
    EXPECT_EQ(arbiter.peak_used_bytes(), 100U);
  });
}

TEST(LeaseArbiter, WholeDeviceRequestOfATaskHoldingBytesTopsItUpToTheCapacity) {
  warning_capture warnings;
  lease_arbiter arbiter{100};
  memory_lease const held = arbiter.request_lease(TASK_A, 30);
  memory_lease const rest = arbiter.request_lease(TASK_A, 90);  // 120 in all: the whole device
  EXPECT_EQ(rest.bytes(), 70U);
  EXPECT_EQ(arbiter.total_lease(TASK_A), 100U);
  auto const lines = warnings.lines();
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_TRUE(contains(lines[0], "task 1")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "90 bytes")) << lines[0];
  EXPECT_TRUE(contains(lines[0], "granting 70 bytes")) << lines[0];
}

TEST(LeaseArbiter, ConcurrentCancelWakesAWaitingRequestWithCancelledError) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    memory_lease holder = arbiter.request_lease(TASK_B, 100);
    std::string message;
    std::thread waiter = test::checked_thread([&] {
      try {
        static_cast<void>(arbiter.request_lease(TASK_A, 40));
        ADD_FAILURE() << "a cancelled request was granted";
      } catch (cancelled_error const& error) {
        message = error.what();
      }
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    arbiter.cancel(TASK_A);
    waiter.join();
    EXPECT_TRUE(contains(message, "task 1")) << message;
    EXPECT_TRUE(contains(message, "40 bytes")) << message;
    EXPECT_TRUE(contains(message, "cancelled")) << message;
    EXPECT_TRUE(arbiter.is_cancelled(TASK_A));
    EXPECT_FALSE(arbiter.is_cancelled(TASK_B));
    EXPECT_EQ(arbiter.waiting_requests(), 0U);
    EXPECT_EQ(events.count(event_kind::LEASE_CANCELLED), 1U);
    EXPECT_EQ(arbiter.statistics(TASK_A).cancelled, 1U);
    EXPECT_EQ(arbiter.used_bytes(), 100U);
  });
}

TEST(LeaseArbiter, RequestsOfACancelledTaskFail) {
  lease_arbiter arbiter{100};
  arbiter.cancel(TASK_A);
  try {
    static_cast<void>(arbiter.request_lease(TASK_A, 1));
    FAIL() << "a cancelled task was granted a lease";
  } catch (cancelled_error const& error) {
    EXPECT_TRUE(contains(error.what(), "task 1")) << error.what();
    EXPECT_TRUE(contains(error.what(), "cancelled")) << error.what();
  }
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(arbiter.total_statistics().cancelled, 1U);
  memory_lease const fine = arbiter.request_lease(TASK_B, 1);
  EXPECT_EQ(fine.bytes(), 1U);
}

TEST(LeaseArbiter, TimeoutEndsAWaitWithTimeoutError) {
  event_log events;
  lease_arbiter arbiter{100, &events};
  memory_lease const holder = arbiter.request_lease(TASK_B, 80);
  lease_request_options options;
  options.timeout = 20ms;
  try {
    static_cast<void>(arbiter.request_lease(TASK_A, 30, options));
    FAIL() << "a request that cannot fit was granted";
  } catch (timeout_error const& error) {
    EXPECT_TRUE(contains(error.what(), "task 1")) << error.what();
    EXPECT_TRUE(contains(error.what(), "timed out")) << error.what();
  }
  EXPECT_EQ(arbiter.waiting_requests(), 0U);
  EXPECT_EQ(arbiter.statistics(TASK_A).timed_out, 1U);
  EXPECT_EQ(arbiter.statistics(TASK_A).waits, 1U);
  EXPECT_EQ(events.count(event_kind::LEASE_TIMED_OUT), 1U);
  EXPECT_EQ(arbiter.used_bytes(), 80U);
  memory_lease const fits = arbiter.request_lease(TASK_A, 20, options);  // still usable
  EXPECT_EQ(fits.bytes(), 20U);
}

/*
 * A lender whose own request times out must not run on with bytes it lent: it takes them back
 * (a reclaim, served first) before its timeout_error reaches it. Capacity 100: B holds 60 and
 * asks for 30 with a timeout behind A's 50; A borrows 10 of B's and keeps its lease until B's
 * timeout has fired. When B sees the timeout_error, it has no bytes lent and every byte is
 * counted once.
 */
TEST(LeaseArbiter, ConcurrentLenderWhoseRequestTimesOutTakesItsLentBytesBackFirst) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    recording_hook hook;
    arbiter.register_task(TASK_B, 0, hook.make());
    memory_lease b_held = arbiter.request_lease(TASK_B, 60);
    std::promise<void> release_a;
    std::thread a = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_A, 50);
      release_a.get_future().wait();
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::size_t lent_at_failure   = 99;
    std::size_t leased_at_failure = 0;
    std::thread b                 = test::checked_thread([&] {
      lease_request_options options;
      options.timeout = 50ms;
      try {
        static_cast<void>(arbiter.request_lease(TASK_B, 30, options));
        ADD_FAILURE() << "B was granted while A held its lease";
      } catch (timeout_error const&) {
        lent_at_failure   = arbiter.lent_bytes(TASK_B);
        leased_at_failure = arbiter.total_lease(TASK_B);
      }
    });
    wait_until([&] { return events.count(event_kind::LEASE_TIMED_OUT) == 1; });
    EXPECT_EQ(hook.freed.load(), 10U);
    release_a.set_value();
    a.join();
    b.join();
    EXPECT_EQ(lent_at_failure, 0U) << "B ran on with bytes that A's lease still counted";
    EXPECT_EQ(leased_at_failure, 60U);
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    b_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

/*
 * As above, but B's timeout passes while B's spill hook is still running for A (spilling can take
 * long: it may write to disk). What the hook frees is lent when it returns, so B must not leave
 * before then: it would run on with bytes lent behind its back. The wait for B's deadline below
 * only gives B the chance to time out during the hook; the verdict does not depend on it.
 */
TEST(LeaseArbiter, ConcurrentLenderTimingOutWhileItsHookRunsStillTakesItsBytesBack) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    std::promise<void> hook_may_return;
    std::shared_future<void> const hook_released = hook_may_return.get_future().share();
    std::atomic<bool> hook_entered{false};
    std::chrono::steady_clock::time_point entered_at;
    arbiter.register_task(TASK_B, 0, [&](std::size_t bytes) {
      entered_at   = std::chrono::steady_clock::now();
      hook_entered = true;
      hook_released.wait();
      return bytes;
    });
    memory_lease b_held = arbiter.request_lease(TASK_B, 60);
    std::promise<void> release_a;
    std::thread a = test::checked_thread([&] {
      memory_lease const lease = arbiter.request_lease(TASK_A, 50);
      release_a.get_future().wait();
    });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::atomic<bool> b_threw{false};
    std::size_t lent_at_failure = 99;
    std::thread b               = test::checked_thread([&] {
      lease_request_options options;
      options.timeout = 100ms;
      try {
        static_cast<void>(arbiter.request_lease(TASK_B, 30, options));
        ADD_FAILURE() << "B was granted while A held its lease";
      } catch (timeout_error const&) {
        lent_at_failure = arbiter.lent_bytes(TASK_B);
        b_threw         = true;
      }
    });
    wait_until(
      [&] { return hook_entered.load() || events.count(event_kind::LEASE_TIMED_OUT) == 1; });
    if (!hook_entered.load()) {
      // B timed out before A could borrow from it: this machine did not reach the scenario.
      hook_may_return.set_value();
      b.join();
      b_held.close();
      release_a.set_value();
      a.join();
      GTEST_SKIP() << "B timed out before its hook was called";
    }
    wait_until(
      [&] { return b_threw.load() || std::chrono::steady_clock::now() >= entered_at + 300ms; });
    hook_may_return.set_value();
    wait_until([&] { return arbiter.total_lease(TASK_A) == 50; });
    release_a.set_value();
    a.join();
    b.join();
    EXPECT_EQ(lent_at_failure, 0U);
    EXPECT_EQ(arbiter.lent_bytes(TASK_B), 0U) << "B's bytes were lent after B stopped waiting";
    EXPECT_EQ(arbiter.used_bytes(), 60U);
    b_held.close();
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

TEST(LeaseArbiter, ConcurrentStatisticsCountWaitsAndWaitTimePerTaskAndInTotal) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100, &events};
    memory_lease holder = arbiter.request_lease(TASK_B, 90);
    std::thread waiter =
      test::checked_thread([&] { memory_lease const lease = arbiter.request_lease(TASK_A, 20); });
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    holder.close();
    waiter.join();
    auto const a = arbiter.statistics(TASK_A);
    EXPECT_EQ(a.waits, 1U);
    EXPECT_EQ(a.grants, 1U);
    EXPECT_EQ(a.granted_bytes, 20U);
    EXPECT_GT(a.wait_time, 0ns);
    auto const total = arbiter.total_statistics();
    EXPECT_EQ(total.waits, 1U);
    EXPECT_EQ(total.grants, 2U);
    EXPECT_EQ(total.granted_bytes, 110U);
    EXPECT_EQ(total.wait_time, a.wait_time);
    auto const begins = events_of(events, event_kind::LEASE_WAIT_BEGIN);
    ASSERT_EQ(begins.size(), 1U);
    EXPECT_EQ(begins[0].task, TASK_A);
    EXPECT_EQ(begins[0].bytes, 20U);
    auto const granted = events_of(events, event_kind::LEASE_GRANTED);
    ASSERT_EQ(granted.size(), 2U);
    EXPECT_EQ(granted[1].duration, a.wait_time) << "the grant event carries the wait";
    EXPECT_EQ(events.total_bytes(event_kind::LEASE_RETURNED), 110U);
    EXPECT_EQ(arbiter.statistics(task_id{77}).grants, 0U) << "unknown tasks have no counters";
  });
}

/*
 * Stress: 16 tasks, each on its own thread, request and return leases at random (1 to
 * capacity/4 bytes, priorities 0..2) against a small capacity. Even tasks hold up to three leases
 * and have a spill hook (so a task that waits while holding can lend, which is what keeps tasks
 * that hold and wait from deadlocking), and now and then wait in a blocking scope; odd tasks have
 * no hook and hold one lease at a time.
 *
 * Checks:
 * - it finishes (watchdog);
 * - FIFO within a priority, and priority order: LEASE_WAIT_BEGIN and LEASE_GRANTED are recorded
 *   under the arbiter's lock, so the event log is the arbiter's own order. Replaying it, the
 *   requests that started waiting and are not yet granted form the queue; each grant of a
 *   request that waited must be the head of that queue (highest priority, then earliest wait
 *   begin), and a request granted without waiting must have a higher priority than every waiting
 *   request. (Each task makes one request at a time, so a task's grant after its wait begin is
 *   the grant of that request.)
 * - the capacity is never exceeded: the arbiter's used and peak bytes, and an outside tracker
 *   incremented after a grant or a blocking scope (by the bytes granted plus any bytes the task
 *   had lent, which the grant or the end of the scope took back) and decremented before a return
 *   or by a hook when it "spills".
 * - every byte is returned at the end.
 */
TEST(LeaseArbiter, ConcurrentStressKeepsFifoOrderAndTheCapacityAndReturnsEveryByte) {
  std::size_t waits_seen = 0;
  std::size_t lent_seen  = 0;
  run_with_watchdog([&] {
    std::mt19937_64 seeds{20240611};  // draws the priorities, then the tasks' seeds
    test::lease_stress_options const options{
      .capacity   = 1000,
      .operations = 3000,
      .priority_of =
        test::stress_priorities(16, [&](std::size_t) { return static_cast<int>(seeds() % 3); }),
      .lends        = [](std::size_t task) { return task % 2 == 0; },
      .scope_one_in = 32,
      .seeds        = seeds,
    };
    event_log events;
    lease_arbiter arbiter{options.capacity, &events};
    auto const counts = test::run_lease_stress(arbiter, options);
    test::expect_capacity_kept_and_every_byte_returned(arbiter, options.capacity, counts);
    auto const& priority_of = options.priority_of;
    auto const totals       = arbiter.total_statistics();
    EXPECT_EQ(totals.whole_device, 0U);

    // Replay the log: (negated priority, wait begin index) orders the queue like the arbiter.
    using queue_entry = std::tuple<int, std::size_t, std::uint64_t>;
    std::set<queue_entry> queue;
    std::unordered_map<std::uint64_t, queue_entry> waiting_of;
    std::size_t violations = 0;
    std::size_t waited     = 0;
    std::string first_violation;
    auto const violation = [&](std::string text) {
      if (violations++ == 0) {
        first_violation = std::move(text);
      }
    };
    auto const all = events.events();
    for (std::size_t index = 0; index < all.size(); ++index) {
      auto const& e      = all[index];
      int const priority = priority_of[e.task.value];
      if (e.kind == event_kind::LEASE_WAIT_BEGIN) {
        if (waiting_of.contains(e.task.value)) {
          violation("two waits of one task");
        }
        queue_entry const entry{-priority, index, e.task.value};
        queue.insert(entry);
        waiting_of[e.task.value] = entry;
        ++waited;
      } else if (e.kind == event_kind::LEASE_GRANTED) {
        auto found = waiting_of.find(e.task.value);
        if (found != waiting_of.end()) {
          if (*queue.begin() != found->second) {
            violation("event " + std::to_string(index) + ": " + to_string(e.task) + " (priority " +
                      std::to_string(priority) + ") granted while " +
                      to_string(task_id{std::get<2>(*queue.begin())}) + " (priority " +
                      std::to_string(-std::get<0>(*queue.begin())) + ") was ahead of it");
          }
          queue.erase(found->second);
          waiting_of.erase(found);
        } else if (!queue.empty() && -std::get<0>(*queue.begin()) >= priority) {
          violation("event " + std::to_string(index) + ": " + to_string(e.task) +
                    " granted at once past a waiting request of priority " +
                    std::to_string(-std::get<0>(*queue.begin())));
        }
      }
    }
    EXPECT_EQ(violations, 0U) << first_violation;
    EXPECT_TRUE(queue.empty());
    EXPECT_GT(waited, 0U) << "the stress never made a request wait";
    EXPECT_GT(counts.scopes, 0U);
    waits_seen = waited;
    lent_seen  = totals.lent_bytes;
  });
  RecordProperty("waits", static_cast<int>(waits_seen));
  RecordProperty("lent_bytes", static_cast<int>(lent_seen));
}

}  // namespace
}  // namespace spillway
