/**
 * @file memory_lease_test.cpp
 * @brief A lease gives its bytes back exactly once: on close, on destruction, after a move, after
 * a shrink, and never again once its task's leases were all returned.
 */
#include <spillway/core/error.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/lease/task_context.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <utility>

namespace spillway {
namespace {

constexpr task_id TASK{1};

TEST(MemoryLease, DefaultConstructedIsEmptyAndClosed) {
  memory_lease lease;
  EXPECT_EQ(lease.bytes(), 0U);
  EXPECT_FALSE(lease.is_open());
  lease.close();  // harmless
  EXPECT_NO_THROW(lease.shrink(0));
  EXPECT_THROW(lease.shrink(1), invalid_argument);
}

TEST(MemoryLease, CloseReturnsTheBytesOnceAndIsIdempotent) {
  lease_arbiter arbiter{100};
  memory_lease lease = arbiter.request_lease(TASK, 40);
  EXPECT_TRUE(lease.is_open());
  EXPECT_EQ(lease.bytes(), 40U);
  EXPECT_EQ(lease.task(), TASK);
  EXPECT_EQ(arbiter.used_bytes(), 40U);
  lease.close();
  EXPECT_FALSE(lease.is_open());
  EXPECT_EQ(lease.bytes(), 0U);
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  lease.close();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(arbiter.total_lease(TASK), 0U);
}

TEST(MemoryLease, DestructionReturnsTheBytes) {
  lease_arbiter arbiter{100};
  {
    memory_lease const first  = arbiter.request_lease(TASK, 30);
    memory_lease const second = arbiter.request_lease(TASK, 20);
    EXPECT_EQ(arbiter.used_bytes(), 50U);
    EXPECT_EQ(arbiter.total_lease(TASK), 50U);
  }
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(arbiter.total_lease(TASK), 0U);
}

TEST(MemoryLease, MoveConstructionTransfersTheBytesWithoutADoubleReturn) {
  lease_arbiter arbiter{100};
  std::optional<memory_lease> moved;
  {
    memory_lease original = arbiter.request_lease(TASK, 30);
    moved.emplace(std::move(original));
    EXPECT_FALSE(original.is_open());  // NOLINT(bugprone-use-after-move): moved-from state
    EXPECT_EQ(original.bytes(), 0U);   // NOLINT(bugprone-use-after-move)
  }
  // The moved-from lease died and returned nothing.
  EXPECT_EQ(arbiter.used_bytes(), 30U);
  EXPECT_EQ(moved->bytes(), 30U);
  moved.reset();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

TEST(MemoryLease, MoveAssignmentReturnsTheOverwrittenBytesOnce) {
  lease_arbiter arbiter{100};
  memory_lease target = arbiter.request_lease(TASK, 30);
  memory_lease source = arbiter.request_lease(TASK, 20);
  EXPECT_EQ(arbiter.used_bytes(), 50U);
  target = std::move(source);
  EXPECT_EQ(arbiter.used_bytes(), 20U);  // the 30 came back, once
  EXPECT_EQ(target.bytes(), 20U);
  EXPECT_FALSE(source.is_open());  // NOLINT(bugprone-use-after-move)
  auto& alias = target;
  target      = std::move(alias);  // self-move keeps the lease
  EXPECT_EQ(target.bytes(), 20U);
  EXPECT_EQ(arbiter.used_bytes(), 20U);
  target.close();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

TEST(MemoryLease, ShrinkReturnsPartAndKeepsTheRest) {
  lease_arbiter arbiter{100};
  memory_lease lease = arbiter.request_lease(TASK, 60);
  lease.shrink(25);
  EXPECT_EQ(lease.bytes(), 35U);
  EXPECT_EQ(arbiter.used_bytes(), 35U);
  EXPECT_EQ(arbiter.total_lease(TASK), 35U);
  lease.shrink(0);
  EXPECT_EQ(arbiter.used_bytes(), 35U);
  lease.close();
  EXPECT_EQ(arbiter.used_bytes(), 0U);  // the shrunk part is not returned twice
}

TEST(MemoryLease, ShrinkingByMoreThanTheLeaseThrowsAndKeepsTheLease) {
  lease_arbiter arbiter{100};
  memory_lease lease = arbiter.request_lease(TASK, 10);
  try {
    lease.shrink(11);
    FAIL() << "shrinking a 10-byte lease by 11 bytes succeeded";
  } catch (invalid_argument const& error) {
    EXPECT_NE(std::string{error.what()}.find("11"), std::string::npos) << error.what();
    EXPECT_NE(std::string{error.what()}.find("10"), std::string::npos) << error.what();
  }
  EXPECT_EQ(lease.bytes(), 10U);
  EXPECT_EQ(arbiter.used_bytes(), 10U);
}

TEST(MemoryLease, ShrinkingTheBaseLeaseShrinksTheBase) {
  lease_arbiter arbiter{100};
  lease_request_options options;
  options.is_base    = true;
  memory_lease base  = arbiter.request_lease(TASK, 40, options);
  memory_lease other = arbiter.request_lease(TASK, 10);
  EXPECT_EQ(arbiter.base_lease(TASK), 40U);
  base.shrink(15);
  EXPECT_EQ(arbiter.base_lease(TASK), 25U);
  EXPECT_EQ(arbiter.total_lease(TASK), 35U);
  other.close();
  EXPECT_EQ(arbiter.base_lease(TASK), 25U);
  base.close();
  EXPECT_EQ(arbiter.base_lease(TASK), 0U);
}

TEST(MemoryLease, AfterReturnAllLeasesAnOutlivingLeaseReturnsNothing) {
  lease_arbiter arbiter{100};
  memory_lease first  = arbiter.request_lease(TASK, 30);
  memory_lease second = arbiter.request_lease(TASK, 20);
  memory_lease other  = arbiter.request_lease(task_id{2}, 10);
  arbiter.return_all_leases(TASK);
  EXPECT_EQ(arbiter.used_bytes(), 10U);
  EXPECT_EQ(arbiter.total_lease(TASK), 0U);

  // A new lease of the same task after the mass return must not be eaten by the old ones.
  memory_lease fresh = arbiter.request_lease(TASK, 40);
  EXPECT_EQ(arbiter.used_bytes(), 50U);
  second.shrink(5);
  first.close();
  second.close();
  EXPECT_EQ(arbiter.used_bytes(), 50U);
  EXPECT_EQ(arbiter.total_lease(TASK), 40U);
  fresh.close();
  other.close();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
  EXPECT_EQ(arbiter.total_lease(TASK), 0U);
}

TEST(MemoryLease, ALeaseOutlivingItsTaskReturnsNothingToANewTaskWithTheSameId) {
  lease_arbiter arbiter{100};
  std::optional<memory_lease> survivor;
  {
    task_context const task{arbiter, TASK};
    survivor.emplace(arbiter.request_lease(TASK, 30));
  }  // the context returns all leases of the task and unregisters it
  EXPECT_EQ(arbiter.used_bytes(), 0U);

  task_context const reborn{arbiter, TASK};
  memory_lease fresh = arbiter.request_lease(TASK, 50);
  survivor.reset();  // belongs to the previous life of the id: inert
  EXPECT_EQ(arbiter.used_bytes(), 50U);
  EXPECT_EQ(arbiter.total_lease(TASK), 50U);
  fresh.close();
  EXPECT_EQ(arbiter.used_bytes(), 0U);
}

}  // namespace
}  // namespace spillway
