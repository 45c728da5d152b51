/**
 * @file table_input_test.cpp
 * @brief The in-memory retryable input: row ranges of a shared table, or of rows viewed where their
 * owner keeps them, split in order.
 */
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/table/table.hpp>

#include <gtest/gtest.h>

#include <memory>

namespace spillway {
namespace {

std::shared_ptr<table const> sample_table(host_memory_resource& host, std::size_t rows) {
  return testing::random_table(
    {data_type{type_id::INT64}, data_type{type_id::STRING}}, rows, 17, 0.25, host);
}

TEST(TableInput, CoversTheWholeTable) {
  host_memory_resource host;
  auto const source = sample_table(host, 12);
  table_input const input{source};
  EXPECT_EQ(input.rows(), 12U);
  EXPECT_EQ(input.begin(), 0U);
  EXPECT_EQ(input.end(), 12U);
  SPILLWAY_EXPECT_TABLES_EQUAL(source->view(), input.materialize());
}

TEST(TableInput, SplitAtMakesTwoOrderedPiecesSharingTheTable) {
  host_memory_resource host;
  auto const source = sample_table(host, 12);
  table_input const input{source};
  auto const [first, second] = input.split_at(5);
  EXPECT_EQ(first.begin(), 0U);
  EXPECT_EQ(first.end(), 5U);
  EXPECT_EQ(second.begin(), 5U);
  EXPECT_EQ(second.end(), 12U);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(source->view(), 0, 5), first.materialize());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(source->view(), 5, 12), second.materialize());
  auto const [left, right] = second.split_at(2);
  EXPECT_EQ(left.begin(), 5U);
  EXPECT_EQ(right.begin(), 7U);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(source->view(), 7, 12), right.materialize());
}

TEST(TableInput, OverRowsItDoesNotOwnSplitsAndMaterializesThem) {
  host_memory_resource host;
  auto const owner = sample_table(host, 12);
  auto const rows  = slice(owner->view(), 2, 11);
  table_input const input{rows};
  EXPECT_EQ(input.rows(), 9U);
  SPILLWAY_EXPECT_TABLES_EQUAL(rows, input.materialize());
  auto const [first, second] = input.split_at(4);
  EXPECT_EQ(first.begin(), 0U);
  EXPECT_EQ(second.begin(), 4U);
  EXPECT_EQ(second.end(), 9U);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(owner->view(), 2, 6), first.materialize());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(owner->view(), 6, 11), second.materialize());
}

TEST(TableInput, SplitAtMustLeaveTwoNonEmptyPieces) {
  host_memory_resource host;
  table_input const input{sample_table(host, 4)};
  EXPECT_THROW(static_cast<void>(input.split_at(0)), invalid_argument);
  EXPECT_THROW(static_cast<void>(input.split_at(4)), invalid_argument);
  table_input const single{sample_table(host, 1)};
  EXPECT_THROW(static_cast<void>(single.split_at(1)), invalid_argument);
}

TEST(TableInput, MakeSpillableIsCountedPerPiece) {
  host_memory_resource host;
  table_input input{sample_table(host, 4)};
  EXPECT_EQ(input.spillable_calls(), 0U);
  input.make_spillable();
  input.make_spillable();
  EXPECT_EQ(input.spillable_calls(), 2U);
  auto const [first, second] = input.split_at(2);
  EXPECT_EQ(first.spillable_calls(), 0U);
}

}  // namespace
}  // namespace spillway
