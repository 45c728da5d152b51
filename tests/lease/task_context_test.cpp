/**
 * @file task_context_test.cpp
 * @brief A task context registers its task for its lifetime, returns its leases on destruction,
 * binds threads, and reports blocking scopes to its observers.
 */
#include "lease/watchdog.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <mutex>
#include <optional>
#include <stdexcept>
#include <thread>
#include <vector>

namespace spillway {
namespace {

TEST(TaskContext, ExposesItsIdPriorityAndArbiter) {
  lease_arbiter arbiter{100};
  task_context const task{arbiter, task_id{7}, 3};
  EXPECT_EQ(task.id(), task_id{7});
  EXPECT_EQ(task.priority(), 3);
  EXPECT_EQ(&task.arbiter(), &arbiter);
}

TEST(TaskContext, RequestsLeasesForItsTask) {
  lease_arbiter arbiter{100};
  task_context task{arbiter, task_id{7}};
  lease_request_options options;
  options.is_base          = true;
  memory_lease const base  = task.request_lease(10, options);
  memory_lease const other = task.request_lease(25);
  EXPECT_EQ(base.task(), task_id{7});
  EXPECT_EQ(task.total_lease(), 35U);
  EXPECT_EQ(task.base_lease(), 10U);
  EXPECT_EQ(arbiter.total_lease(task_id{7}), 35U);
}

TEST(TaskContext, DestructionReturnsEveryLeaseAndLeavesOutlivingLeasesInert) {
  lease_arbiter arbiter{100};
  std::optional<memory_lease> survivor;
  {
    task_context task{arbiter, task_id{7}};
    survivor.emplace(task.request_lease(40));
    memory_lease const other = task.request_lease(20);
    static_cast<void>(task.request_lease(5));  // a temporary lease, returned at once
    EXPECT_EQ(arbiter.used_bytes(), 60U);
  }
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(arbiter.total_lease(task_id{7}), 0U);
  survivor.reset();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

TEST(TaskContext, ConcurrentPriorityDecidesWhoIsServedFirst) {
  test::run_with_watchdog([] {
    lease_arbiter arbiter{100};
    task_context low{arbiter, task_id{1}, 0};
    task_context high{arbiter, task_id{2}, 9};
    memory_lease holder = arbiter.request_lease(task_id{3}, 100);
    std::vector<int> order;
    std::mutex mutex;
    std::thread low_thread = test::checked_thread([&] {
      memory_lease lease = low.request_lease(100);
      std::lock_guard lock{mutex};
      order.push_back(0);
      lease.close();
    });
    test::wait_until([&] { return arbiter.waiting_requests() == 1; });
    std::thread high_thread = test::checked_thread([&] {
      memory_lease lease = high.request_lease(100);
      std::lock_guard lock{mutex};
      order.push_back(9);
      lease.close();  // recorded before the low-priority request can be granted
    });
    test::wait_until([&] { return arbiter.waiting_requests() == 2; });
    holder.close();
    low_thread.join();
    high_thread.join();
    EXPECT_EQ(order, (std::vector<int>{9, 0}));
  });
}

TEST(TaskContext, CancelMakesItsRequestsFail) {
  lease_arbiter arbiter{100};
  task_context task{arbiter, task_id{7}};
  task.cancel();
  EXPECT_TRUE(arbiter.is_cancelled(task.id()));
  EXPECT_THROW(static_cast<void>(task.request_lease(1)), cancelled_error);
}

TEST(TaskContext, ThreadBindingMakesTheTaskCurrentAndNests) {
  lease_arbiter arbiter{100};
  task_context first{arbiter, task_id{1}};
  task_context second{arbiter, task_id{2}};
  EXPECT_EQ(task_context::current(), nullptr);
  {
    task_context::thread_binding const outer{first};
    EXPECT_EQ(task_context::current(), &first);
    {
      task_context::thread_binding const inner{second};
      EXPECT_EQ(task_context::current(), &second);
    }
    EXPECT_EQ(task_context::current(), &first);
    task_context const* elsewhere = &first;
    std::thread other = test::checked_thread([&] { elsewhere = task_context::current(); });
    other.join();
    EXPECT_EQ(elsewhere, nullptr) << "a binding is per thread";
  }
  EXPECT_EQ(task_context::current(), nullptr);
}

TEST(TaskContext, BlockingObserversSeeOnlyTheOutermostScope) {
  lease_arbiter arbiter{100};
  task_context task{arbiter, task_id{1}};
  std::vector<bool> seen;
  std::size_t const id = task.add_blocking_observer([&](bool waiting) { seen.push_back(waiting); });
  {
    auto const outer = task.blocked();
    { auto const inner = task.blocked(); }
    EXPECT_EQ(seen, (std::vector<bool>{true}));
  }
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
  task.remove_blocking_observer(id);
  { auto const again = task.blocked(); }
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
}

TEST(TaskContext, BlockingScopeLeftByAnExceptionEndsTheWait) {
  lease_arbiter arbiter{100};
  task_context task{arbiter, task_id{1}};
  std::vector<bool> seen;
  static_cast<void>(task.add_blocking_observer([&](bool waiting) { seen.push_back(waiting); }));
  try {
    auto const scope = task.blocked();
    throw std::runtime_error("the receive failed");
  } catch (std::runtime_error const&) {
  }
  EXPECT_EQ(seen, (std::vector<bool>{true, false}));
  memory_lease const lease = task.request_lease(10);  // the task works normally afterwards
  EXPECT_EQ(lease.bytes(), 10U);
}

}  // namespace
}  // namespace spillway
