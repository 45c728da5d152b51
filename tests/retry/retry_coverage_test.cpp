/**
 * @file retry_coverage_test.cpp
 * @brief With coverage on, allocations of bound tasks outside retry blocks are recorded with a
 * call site, those of a thread of no task as task 0; inside `with_retry` or with coverage off,
 * nothing is recorded.
 */
#include "retry/oom_test_device.hpp"

#include <spillway/lease/task_context.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/retry/with_retry.hpp>

#include <gtest/gtest.h>

namespace spillway {
namespace {

constexpr std::size_t CAPACITY = 1 << 20;

class RetryCoverage : public ::testing::Test {
 protected:
  void SetUp() override {
    previous_ = set_retry_coverage(true);
    clear_unprotected_allocations();
  }
  void TearDown() override {
    set_retry_coverage(previous_);
    clear_unprotected_allocations();
  }

 private:
  bool previous_ = false;
};

TEST_F(RetryCoverage, SwitchReportsThePreviousState) {
  EXPECT_TRUE(retry_coverage_enabled());
  EXPECT_TRUE(set_retry_coverage(false));
  EXPECT_FALSE(retry_coverage_enabled());
  EXPECT_FALSE(set_retry_coverage(true));
}

TEST_F(RetryCoverage, AllocationOfABoundTaskOutsideWithRetryIsRecordedWithItsCallSite) {
  test::oom_test_device d{CAPACITY};
  task_context task{d.arbiter, task_id{3}};
  task_context::thread_binding const binding{task};
  test::device_allocation const allocation{d.adaptor, 128};
  auto const records = unprotected_allocations();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].task, task_id{3});
  EXPECT_EQ(records[0].bytes, 128U);
  EXPECT_FALSE(records[0].call_site.empty());
  clear_unprotected_allocations();
  EXPECT_TRUE(unprotected_allocations().empty());
}

TEST_F(RetryCoverage, AllocationInsideWithRetryIsNotRecorded) {
  test::oom_test_device d{CAPACITY};
  task_context task{d.arbiter, task_id{3}};
  EXPECT_FALSE(in_retry_block());
  with_retry(d.coordinator, task, test::range_input{4}, [&](test::range_input&) {
    EXPECT_TRUE(in_retry_block());
    test::device_allocation const allocation{d.adaptor, 128};
  });
  EXPECT_FALSE(in_retry_block());
  EXPECT_TRUE(unprotected_allocations().empty());
}

TEST_F(RetryCoverage, AnAllocationOfAThreadOfNoTaskIsRecordedAsTaskZero) {
  test::oom_test_device d{CAPACITY};
  { test::device_allocation const unbound{d.adaptor, 64}; }
  auto const records = unprotected_allocations();
  ASSERT_EQ(records.size(), 1U);
  EXPECT_EQ(records[0].task, task_id{});
  EXPECT_EQ(records[0].bytes, 64U);
}

TEST_F(RetryCoverage, AllocationsWithCoverageOffAreNotRecorded) {
  test::oom_test_device d{CAPACITY};
  task_context task{d.arbiter, task_id{3}};
  task_context::thread_binding const binding{task};
  set_retry_coverage(false);
  { test::device_allocation const off{d.adaptor, 64}; }
  EXPECT_TRUE(unprotected_allocations().empty());
}

TEST_F(RetryCoverage, RetryBlockMarkersNest) {
  EXPECT_FALSE(in_retry_block());
  {
    retry_block_marker const outer;
    {
      retry_block_marker const inner;
      EXPECT_TRUE(in_retry_block());
    }
    EXPECT_TRUE(in_retry_block());
  }
  EXPECT_FALSE(in_retry_block());
}

}  // namespace
}  // namespace spillway
