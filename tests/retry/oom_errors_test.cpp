/**
 * @file oom_errors_test.cpp
 * @brief The two recoverable OOM outcomes carry their task, sizes and attempt, and are caught as
 * `out_of_memory` and `std::bad_alloc` by code that does not know them.
 */
#include <spillway/core/error.hpp>
#include <spillway/retry/oom_errors.hpp>

#include <gtest/gtest.h>

#include <new>
#include <string>
#include <type_traits>

namespace spillway {
namespace {

static_assert(std::is_base_of_v<out_of_memory, retry_oom>);
static_assert(std::is_base_of_v<out_of_memory, split_and_retry_oom>);
static_assert(std::is_base_of_v<std::bad_alloc, retry_oom>);
static_assert(!std::is_base_of_v<retry_oom, split_and_retry_oom>);
static_assert(!std::is_base_of_v<split_and_retry_oom, retry_oom>);

TEST(OomErrors, RetryOomCarriesTaskSizesAndAttempt) {
  retry_oom const error{"task 4: roll back", task_id{4}, 512, 128, 1024, 3};
  EXPECT_EQ(error.task(), task_id{4});
  EXPECT_EQ(error.requested_bytes(), 512U);
  EXPECT_EQ(error.available_bytes(), 128U);
  EXPECT_EQ(error.capacity_bytes(), 1024U);
  EXPECT_EQ(error.attempt(), 3U);
  EXPECT_STREQ(error.what(), "task 4: roll back");
}

TEST(OomErrors, SplitAndRetryOomCarriesTaskSizesAndAttempt) {
  split_and_retry_oom const error{"task 9: split", task_id{9}, 2048, 0, 4096, 1};
  EXPECT_EQ(error.task(), task_id{9});
  EXPECT_EQ(error.requested_bytes(), 2048U);
  EXPECT_EQ(error.available_bytes(), 0U);
  EXPECT_EQ(error.capacity_bytes(), 4096U);
  EXPECT_EQ(error.attempt(), 1U);
  EXPECT_STREQ(error.what(), "task 9: split");
}

TEST(OomErrors, BothAreCaughtAsOutOfMemoryAndBadAlloc) {
  try {
    throw retry_oom{"retry", task_id{1}, 10, 5, 20, 1};
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), 10U);
  }
  try {
    throw split_and_retry_oom{"split", task_id{1}, 10, 5, 20, 1};
  } catch (std::bad_alloc const& error) {
    EXPECT_EQ(std::string{error.what()}, "split");
  }
}

}  // namespace
}  // namespace spillway
