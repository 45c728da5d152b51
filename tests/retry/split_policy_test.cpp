/**
 * @file split_policy_test.cpp
 * @brief What models a retryable input, and the default policy that halves by rows.
 */
#include "retry/oom_test_device.hpp"

#include <spillway/retry/split_policy.hpp>
#include <spillway/retry/table_input.hpp>

#include <gtest/gtest.h>

#include <string>

namespace spillway {
namespace {

static_assert(retryable_input<table_input>);
static_assert(retryable_input<test::range_input>);
static_assert(!retryable_input<int>);
static_assert(!retryable_input<std::string>);

TEST(SplitPolicy, SplitInHalfCutsByRowsInOrder) {
  test::range_input input{3, 10};  // 7 rows
  auto const [first, second] = split_in_half(input);
  EXPECT_EQ(first.begin(), 3U);
  EXPECT_EQ(first.end(), 6U);
  EXPECT_EQ(second.begin(), 6U);
  EXPECT_EQ(second.end(), 10U);
}

TEST(SplitPolicy, SplitInHalfOfTwoRowsLeavesOneRowEach) {
  test::range_input input{2};
  auto const [first, second] = split_in_half(input);
  EXPECT_EQ(first.rows(), 1U);
  EXPECT_EQ(second.rows(), 1U);
}

TEST(SplitPolicy, APolicyIsAnyCallableReturningTwoPieces) {
  split_policy<test::range_input> const peel_one = [](test::range_input& input) {
    return input.split_at(1);
  };
  test::range_input input{5};
  auto const [first, second] = peel_one(input);
  EXPECT_EQ(first.rows(), 1U);
  EXPECT_EQ(second.rows(), 4U);
}

}  // namespace
}  // namespace spillway
