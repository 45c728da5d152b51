#include "ops/reference_order.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::random_column;
using testing::to_vector;

class Sample : public testing::ops_fixture {
 protected:
  /// A table whose INT64 column 0 holds the row numbers, and a STRING column.
  std::unique_ptr<table> numbered(std::size_t rows) {
    std::vector<std::int64_t> numbers(rows);
    std::iota(numbers.begin(), numbers.end(), 0);
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column<std::int64_t>(type_id::INT64, numbers, {}, input_));
    columns.push_back(random_column(type_id::STRING, rows, 3, 0.2, input_));
    return std::make_unique<table>(std::move(columns));
  }
};

TEST_F(Sample, DistinctRowsInInputOrder) {
  auto const input = numbered(1000);
  for (std::size_t const count : {0U, 1U, 17U, 999U, 1000U, 5000U}) {
    auto const picked = sample(input->view(), count, 42, default_stream(), mrs_);
    expect_resources(picked->allocated_bytes());
    table_view const view = picked->view();
    ASSERT_EQ(view.num_rows(), std::min<std::size_t>(count, 1000));
    for (std::size_t row = 0; row < view.num_rows(); ++row) {
      auto const source = view.column(0).data<std::int64_t>()[row];
      if (row > 0) {
        ASSERT_LT(view.column(0).data<std::int64_t>()[row - 1], source);
      }
      // The string moved with its row.
      EXPECT_EQ(testing::row_to_string(view.column(1), row),
                testing::row_to_string(input->view().column(1), static_cast<std::size_t>(source)));
    }
  }
}

TEST_F(Sample, SameSeedSameSampleOtherSeedOtherSample) {
  auto const input = numbered(5000);
  auto const a     = sample(input->view(), 50, 7, default_stream(), mrs_);
  auto const b     = sample(input->view(), 50, 7, default_stream(), mrs_);
  auto const c     = sample(input->view(), 50, 8, default_stream(), mrs_);
  SPILLWAY_EXPECT_TABLES_EQUAL(a->view(), b->view());
  EXPECT_NE(testing::describe_table_difference(a->view(), c->view()), "");
}

TEST_F(Sample, EveryRowIsEquallyLikely) {
  // 3 of 10 rows takes selection sampling, 3 of 40 Floyd's algorithm (one draw per sample).
  constexpr int TRIALS = 3000;
  for (std::size_t const rows : {10U, 40U}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    auto const input = numbered(rows);
    std::vector<int> hits(rows, 0);
    for (int seed = 0; seed < TRIALS; ++seed) {
      auto const picked =
        sample(input->view(), 3, static_cast<std::uint64_t>(seed), default_stream(), mrs_);
      for (std::size_t row = 0; row < 3; ++row) {
        ++hits[static_cast<std::size_t>(picked->view().column(0).data<std::int64_t>()[row])];
      }
    }
    // Expected 900 (225) per row; the standard deviation is about 25 (14); bounds at 4 of them.
    double const expected = 3.0 * TRIALS / static_cast<double>(rows);
    double const spread   = 4.0 * std::sqrt(expected * (1.0 - 3.0 / static_cast<double>(rows)));
    for (int const count : hits) {
      EXPECT_GT(count, expected - spread);
      EXPECT_LT(count, expected + spread);
    }
  }
}

class QuantileSplitters : public testing::ops_fixture {};

TEST_F(QuantileSplitters, CutASortedTableIntoNearlyEqualRanges) {
  auto const keys = random_column(type_id::UINT32, 1000, 9, 0.0, input_);
  // Distinct keys: ranges found by lower_bound are the quantile ranges.
  auto* values = keys->mutable_data<std::uint32_t>();
  for (std::size_t row = 0; row < 1000; ++row) {
    values[row] = static_cast<std::uint32_t>((row * 7919U) % 1000U);
  }
  sort_order const orders{{order::DESCENDING, null_order::AFTER}};
  auto const sorted = sort(table_view{keys->view()},
                           table_view{keys->view()},
                           orders,
                           sort_stability::UNSTABLE,
                           default_stream(),
                           input_);
  for (std::size_t const k : {1U, 2U, 7U, 10U, 999U, 1000U, 1500U}) {
    SCOPED_TRACE("k = " + std::to_string(k));
    auto const splitters = quantile_splitters(sorted->view(), k, default_stream(), mrs_);
    expect_resources(splitters->allocated_bytes());
    ASSERT_EQ(splitters->num_rows(), k - 1);
    auto const cuts = to_vector(
      lower_bound(sorted->view(), splitters->view(), orders, default_stream(), input_)->view());
    std::size_t previous = 0;
    for (std::size_t range = 0; range < k; ++range) {
      std::size_t const end  = range + 1 < k ? cuts[range] : 1000;
      std::size_t const size = end - previous;
      ASSERT_GE(end, previous);
      EXPECT_GE(size, 1000 / k) << "range " << range;
      EXPECT_LE(size, (1000 + k - 1) / k) << "range " << range;
      previous = end;
    }
  }
}

TEST_F(QuantileSplitters, EmptyInputAndZeroRanges) {
  auto const empty     = random_column(type_id::STRING, 0, 1, 0.0, input_);
  auto const splitters = quantile_splitters(table_view{empty->view()}, 4, default_stream(), mrs_);
  EXPECT_EQ(splitters->num_rows(), 0U);
  EXPECT_EQ(splitters->num_columns(), 1U);
  EXPECT_THROW((void)quantile_splitters(table_view{empty->view()}, 0, default_stream(), mrs_),
               invalid_argument);
  expect_resources(splitters->allocated_bytes());
}

}  // namespace
}  // namespace spillway
