/**
 * @file device_semaphore_test.cpp
 * @brief At most K tasks hold the device, in FIFO order; each holder has its base lease; holds
 * nest per task and end on every exit path; waiting for a slot counts as waiting.
 */
#include "lease/watchdog.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/events.hpp>
#include <spillway/lease/device_semaphore.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <future>
#include <memory>
#include <optional>
#include <ostream>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace spillway {

/// gtest prints task ids in failures as "task 3" (found by argument-dependent lookup).
inline void PrintTo(task_id id, std::ostream* out) { *out << to_string(id); }

namespace {

using test::run_with_watchdog;
using test::wait_until;

TEST(DeviceSemaphore, ZeroSlotsIsInvalid) {
  lease_arbiter arbiter{100};
  EXPECT_THROW(device_semaphore(arbiter, 0, 10), invalid_argument);
}

TEST(DeviceSemaphore, AcquireGrantsTheBaseLeaseAndReleaseReturnsIt) {
  event_log events;
  lease_arbiter arbiter{100};
  device_semaphore semaphore{arbiter, 2, 30, &events};
  EXPECT_EQ(semaphore.max_tasks(), 2U);
  EXPECT_EQ(semaphore.base_lease_bytes(), 30U);
  task_context task{arbiter, task_id{1}};
  semaphore.acquire(task);
  EXPECT_EQ(semaphore.holders(), 1U);
  EXPECT_EQ(semaphore.hold_count(task.id()), 1U);
  EXPECT_EQ(arbiter.base_lease(task.id()), 30U);
  EXPECT_EQ(task.base_lease(), 30U);
  EXPECT_EQ(arbiter.used_bytes(), 30U);
  semaphore.release(task);
  EXPECT_EQ(semaphore.holders(), 0U);
  EXPECT_EQ(semaphore.hold_count(task.id()), 0U);
  EXPECT_EQ(arbiter.base_lease(task.id()), 0U);
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(events.count(event_kind::SEMAPHORE_ACQUIRED), 1U);
  EXPECT_EQ(events.count(event_kind::SEMAPHORE_RELEASED), 1U);
}

TEST(DeviceSemaphore, HoldsNestPerTaskAndOnlyTheOutermostReleaseGivesUp) {
  lease_arbiter arbiter{100};
  device_semaphore semaphore{arbiter, 1, 30};
  task_context task{arbiter, task_id{1}};
  semaphore.acquire(task);
  semaphore.acquire(task);  // re-entrant: would deadlock with one slot otherwise
  EXPECT_EQ(semaphore.hold_count(task.id()), 2U);
  EXPECT_EQ(semaphore.holders(), 1U);
  EXPECT_EQ(arbiter.base_lease(task.id()), 30U) << "one base lease, not two";
  semaphore.release(task);
  EXPECT_EQ(semaphore.holders(), 1U);
  EXPECT_EQ(arbiter.base_lease(task.id()), 30U);
  semaphore.release(task);
  EXPECT_EQ(semaphore.holders(), 0U);
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

TEST(DeviceSemaphore, ReleasingWhatIsNotHeldIsALogicError) {
  lease_arbiter arbiter{100};
  device_semaphore semaphore{arbiter, 1, 0};
  task_context task{arbiter, task_id{1}};
  try {
    semaphore.release(task);
    FAIL() << "releasing an unheld semaphore succeeded";
  } catch (logic_error const& error) {
    EXPECT_NE(std::string{error.what()}.find("task 1"), std::string::npos) << error.what();
  }
}

TEST(DeviceSemaphore, DestroyingTheTaskContextReleasesTheSemaphore) {
  lease_arbiter arbiter{100};
  device_semaphore semaphore{arbiter, 1, 30};
  {
    task_context task{arbiter, task_id{1}};
    semaphore.acquire(task);
    semaphore.acquire(task);
    EXPECT_EQ(semaphore.holders(), 1U);
  }
  EXPECT_EQ(semaphore.holders(), 0U);
  EXPECT_EQ(semaphore.hold_count(task_id{1}), 0U);
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  task_context next{arbiter, task_id{2}};
  device_semaphore::guard const guard{semaphore, next};  // the slot is free again
  EXPECT_EQ(arbiter.base_lease(next.id()), 30U);
}

TEST(DeviceSemaphore, GuardReleasesWhenAnExceptionUnwinds) {
  lease_arbiter arbiter{100};
  device_semaphore semaphore{arbiter, 1, 30};
  task_context task{arbiter, task_id{1}};
  try {
    device_semaphore::guard const guard{semaphore, task};
    EXPECT_EQ(semaphore.hold_count(task.id()), 1U);
    throw std::runtime_error("the step failed");
  } catch (std::runtime_error const&) {
  }
  EXPECT_EQ(semaphore.holders(), 0U);
  EXPECT_EQ(arbiter.base_lease(task.id()), 0U);
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

TEST(DeviceSemaphore, ConcurrentAtMostMaxTasksHoldTheDeviceAtOnce) {
  constexpr std::size_t SLOTS   = 3;
  constexpr std::size_t THREADS = 8;
  constexpr std::size_t ROUNDS  = 200;
  run_with_watchdog([&] {
    lease_arbiter arbiter{SLOTS * 10};
    device_semaphore semaphore{arbiter, SLOTS, 10};
    std::atomic<std::size_t> inside{0};
    std::atomic<std::size_t> most{0};
    std::atomic<std::size_t> over_budget{0};
    std::vector<std::thread> threads;
    for (std::size_t t = 1; t <= THREADS; ++t) {
      threads.push_back(test::checked_thread([&, t] {
        task_context task{arbiter, task_id{t}};
        for (std::size_t round = 0; round < ROUNDS; ++round) {
          device_semaphore::guard const guard{semaphore, task};
          std::size_t const now = inside.fetch_add(1) + 1;
          std::size_t seen      = most.load();
          while (now > seen && !most.compare_exchange_weak(seen, now)) {
          }
          if (arbiter.base_lease(task.id()) != 10) {
            over_budget.fetch_add(1);
          }
          inside.fetch_sub(1);
        }
      }));
    }
    for (auto& thread : threads) {
      thread.join();
    }
    EXPECT_LE(most.load(), SLOTS);
    EXPECT_GE(most.load(), 1U);
    EXPECT_EQ(over_budget.load(), 0U);
    EXPECT_EQ(semaphore.holders(), 0U);
    EXPECT_EQ(arbiter.used_bytes(), 0U);
  });
}

TEST(DeviceSemaphore, ConcurrentAcquisitionIsFirstComeFirstServed) {
  run_with_watchdog([] {
    event_log events;
    lease_arbiter arbiter{100};
    device_semaphore semaphore{arbiter, 1, 10, &events};
    task_context first_holder{arbiter, task_id{100}};
    semaphore.acquire(first_holder);
    std::vector<std::unique_ptr<task_context>> tasks;
    std::vector<std::thread> threads;
    for (std::uint64_t id = 1; id <= 4; ++id) {
      tasks.push_back(std::make_unique<task_context>(arbiter, task_id{id}));
      task_context& task = *tasks.back();
      threads.push_back(test::checked_thread([&semaphore, &task] {
        device_semaphore::guard const guard{semaphore, task};
      }));
      wait_until([&] { return semaphore.waiters() == id; });
    }
    semaphore.release(first_holder);
    for (auto& thread : threads) {
      thread.join();
    }
    std::vector<task_id> order;
    for (auto const& e : events.events()) {
      if (e.kind == event_kind::SEMAPHORE_ACQUIRED) {
        order.push_back(e.task);
      }
    }
    EXPECT_EQ(order,
              (std::vector<task_id>{task_id{100}, task_id{1}, task_id{2}, task_id{3}, task_id{4}}));
  });
}

TEST(DeviceSemaphore, ConcurrentCancelWhileWaitingThrowsCancelledError) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    device_semaphore semaphore{arbiter, 1, 10};
    task_context holder{arbiter, task_id{1}};
    task_context waiter{arbiter, task_id{2}};
    device_semaphore::guard const guard{semaphore, holder};
    std::string message;
    std::thread thread = test::checked_thread([&] {
      try {
        semaphore.acquire(waiter);
        ADD_FAILURE() << "a cancelled task acquired the semaphore";
      } catch (cancelled_error const& error) {
        message = error.what();
      }
    });
    wait_until([&] { return semaphore.waiters() == 1; });
    waiter.cancel();
    thread.join();
    EXPECT_NE(message.find("task 2"), std::string::npos) << message;
    EXPECT_NE(message.find("semaphore"), std::string::npos) << message;
    EXPECT_EQ(semaphore.waiters(), 0U);
    EXPECT_EQ(semaphore.holders(), 1U);
    EXPECT_EQ(semaphore.hold_count(waiter.id()), 0U);
  });
}

/*
 * While B waits for the semaphore it counts as waiting: A, at the head of the arbiter's queue,
 * borrows from B's spillable lease. Capacity 100: B holds 60; A asks for 50.
 */
TEST(DeviceSemaphore, ConcurrentWaitingForASlotLetsTheTasksLeasesBeLent) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    device_semaphore semaphore{arbiter, 1, 0};
    task_context holder{arbiter, task_id{1}};
    task_context b{arbiter, task_id{2}};
    task_context a{arbiter, task_id{3}};
    std::atomic<std::size_t> spilled{0};
    b.set_spill_hook([&](std::size_t bytes) {
      spilled.fetch_add(bytes);
      return bytes;
    });
    memory_lease b_held = b.request_lease(60);
    std::optional<device_semaphore::guard> holding;
    holding.emplace(semaphore, holder);
    std::thread b_thread = test::checked_thread([&] {
      device_semaphore::guard const guard{semaphore, b};
    });
    wait_until([&] { return semaphore.waiters() == 1; });
    memory_lease a_lease = a.request_lease(50);  // granted by lending; would wait otherwise
    EXPECT_EQ(spilled.load(), 10U);
    EXPECT_EQ(arbiter.lent_bytes(b.id()), 10U);
    holding.reset();
    // B gets the slot but first takes its 10 bytes back, which needs A's lease returned.
    wait_until([&] { return arbiter.waiting_requests() == 1; });
    a_lease.close();
    b_thread.join();
    EXPECT_EQ(arbiter.lent_bytes(b.id()), 0U);
    EXPECT_EQ(arbiter.used_bytes(), 60U);
  });
}

/*
 * A task cancelled while taking its lent bytes back, right after it got a slot, must not keep
 * the slot: the semaphore would be lost for every later task. Setup as above; B is cancelled
 * while its reclaim waits for A's lease.
 */
TEST(DeviceSemaphore, ConcurrentCancelWhileTakingLentBytesBackGivesTheSlotUp) {
  run_with_watchdog([] {
    lease_arbiter arbiter{100};
    device_semaphore semaphore{arbiter, 1, 0};
    task_context holder{arbiter, task_id{1}};
    task_context b{arbiter, task_id{2}};
    task_context a{arbiter, task_id{3}};
    b.set_spill_hook([](std::size_t bytes) { return bytes; });
    memory_lease b_held = b.request_lease(60);
    std::optional<device_semaphore::guard> holding;
    holding.emplace(semaphore, holder);
    bool cancelled       = false;
    std::thread b_thread = test::checked_thread([&] {
      try {
        device_semaphore::guard const guard{semaphore, b};
        ADD_FAILURE() << "a cancelled task acquired the semaphore";
      } catch (cancelled_error const&) {
        cancelled = true;
      }
    });
    wait_until([&] { return semaphore.waiters() == 1; });
    memory_lease a_lease = a.request_lease(50);
    ASSERT_EQ(arbiter.lent_bytes(b.id()), 10U);
    holding.reset();
    wait_until([&] { return arbiter.waiting_requests() == 1; });  // B's reclaim
    b.cancel();
    b_thread.join();
    EXPECT_TRUE(cancelled);
    ASSERT_EQ(semaphore.holders(), 0U) << "the cancelled task kept the slot";
    EXPECT_EQ(semaphore.hold_count(b.id()), 0U);
    a_lease.close();
    task_context c{arbiter, task_id{4}};
    device_semaphore::guard const next{semaphore, c};
    EXPECT_EQ(semaphore.hold_count(c.id()), 1U);
  });
}

}  // namespace
}  // namespace spillway
