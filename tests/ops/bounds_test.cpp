#include "ops/reference_order.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <limits>
#include <memory>
#include <numeric>
#include <vector>

namespace spillway {
namespace {

using testing::random_column;
using testing::reference_compare;
using testing::to_vector;

class Bounds : public testing::ops_fixture {};

/// Checks lower_bound and upper_bound of every needle against std's over the reference order.
void expect_bounds_of_std(table_view const& haystack,
                          table_view const& needles,
                          sort_order const& orders,
                          memory_resources mrs) {
  auto const lower  = lower_bound(haystack, needles, orders, default_stream(), mrs);
  auto const upper  = upper_bound(haystack, needles, orders, default_stream(), mrs);
  auto const lowers = to_vector(lower->view());
  auto const uppers = to_vector(upper->view());
  std::vector<std::size_t> rows(haystack.num_rows());
  std::iota(rows.begin(), rows.end(), 0);
  for (std::size_t needle = 0; needle < needles.num_rows(); ++needle) {
    auto const less_than_needle = [&](std::size_t row, std::size_t) {
      return reference_compare(haystack, row, needles, needle, orders) < 0;
    };
    auto const needle_less_than = [&](std::size_t, std::size_t row) {
      return reference_compare(needles, needle, haystack, row, orders) < 0;
    };
    auto const expected_lower = static_cast<std::uint64_t>(
      std::lower_bound(rows.begin(), rows.end(), needle, less_than_needle) - rows.begin());
    auto const expected_upper = static_cast<std::uint64_t>(
      std::upper_bound(rows.begin(), rows.end(), needle, needle_less_than) - rows.begin());
    ASSERT_EQ(lowers[needle], expected_lower) << "needle " << needle;
    ASSERT_EQ(uppers[needle], expected_upper) << "needle " << needle;
  }
}

TEST_F(Bounds, MatchStdLowerAndUpperBound) {
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  auto const first  = random_column(type_id::INT16, 800, 1, 0.1, input_);
  auto const second = random_column(type_id::STRING, 800, 2, 0.1, input_, 2);
  auto* shorts      = first->mutable_data<std::int16_t>();
  for (std::size_t row = 0; row < 800; ++row) {
    shorts[row] = static_cast<std::int16_t>(shorts[row] % 6);
  }
  table_view const unsorted{first->view(), second->view()};
  auto const haystack_table =
    sort(unsorted, unsorted, orders, sort_stability::UNSTABLE, default_stream(), input_);
  table_view const haystack = haystack_table->view();
  // Needles: rows of the haystack itself and new random rows.
  auto const needle_first  = random_column(type_id::INT16, 300, 3, 0.1, input_);
  auto const needle_second = random_column(type_id::STRING, 300, 4, 0.1, input_, 2);
  auto* needle_shorts      = needle_first->mutable_data<std::int16_t>();
  for (std::size_t row = 0; row < 300; ++row) {
    needle_shorts[row] = static_cast<std::int16_t>(needle_shorts[row] % 8 - 1);
  }
  table_view const random_needles{needle_first->view(), needle_second->view()};
  for (table_view const& needles : {random_needles, unsorted}) {
    auto const lower = lower_bound(haystack, needles, orders, default_stream(), mrs_);
    auto const upper = upper_bound(haystack, needles, orders, default_stream(), mrs_);
    expect_resources(lower->allocated_bytes() + upper->allocated_bytes());
    EXPECT_EQ(temporary_.statistics().total_count, 0U);
    expect_bounds_of_std(haystack, needles, orders, mrs_);
  }
}

TEST_F(Bounds, FixedWidthKeysWithTiesNullsAndFloatSpecialsOnBothSearches) {
  // Complete prefixes (an integer and a float with nulls): equal prefixes decide the ties. Over
  // the prefix search's haystack limit, the same needles go through the row comparison.
  sort_order const orders{{order::ASCENDING, null_order::AFTER},
                          {order::DESCENDING, null_order::BEFORE}};
  auto const make_keys = [&](std::size_t rows, std::uint64_t seed) {
    auto ints               = random_column(type_id::INT64, rows, seed, 0.05, input_);
    auto floats             = random_column(type_id::FLOAT64, rows, seed + 1, 0.1, input_);
    auto* value             = ints->mutable_data<std::int64_t>();
    auto* real              = floats->mutable_data<double>();
    double const specials[] = {0.0,
                               -0.0,
                               std::numeric_limits<double>::quiet_NaN(),
                               -std::numeric_limits<double>::infinity(),
                               1.5};
    for (std::size_t row = 0; row < rows; ++row) {
      value[row] = value[row] % 7 - 3;
      real[row]  = specials[(static_cast<std::size_t>(value[row] + 3) + row) % 5];
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(std::move(ints));
    columns.push_back(std::move(floats));
    return std::make_unique<table>(std::move(columns));
  };
  auto const needles = make_keys(3000, 11);  // more than one block of needles
  for (std::size_t const rows : {std::size_t{200}, std::size_t{5000}}) {
    auto const keys = make_keys(rows, 21);
    auto const haystack =
      sort(keys->view(), keys->view(), orders, sort_stability::STABLE, default_stream(), input_);
    expect_bounds_of_std(haystack->view(), needles->view(), orders, mrs_);
    expect_bounds_of_std(haystack->view(), haystack->view(), orders, mrs_);
  }
}

TEST_F(Bounds, EmptyHaystackAndEmptyNeedles) {
  auto const empty   = random_column(type_id::FLOAT32, 0, 1, 0.0, input_);
  auto const needles = random_column(type_id::FLOAT32, 4, 1, 0.5, input_);
  auto const lower =
    lower_bound(table_view{empty->view()}, table_view{needles->view()}, {}, default_stream(), mrs_);
  EXPECT_EQ(to_vector(lower->view()), (std::vector<std::uint64_t>{0, 0, 0, 0}));
  auto const none =
    upper_bound(table_view{needles->view()}, table_view{empty->view()}, {}, default_stream(), mrs_);
  EXPECT_EQ(none->size(), 0U);
  expect_resources(lower->allocated_bytes() + none->allocated_bytes());
}

TEST_F(Bounds, RejectsDifferentKeyTypes) {
  auto const ints   = random_column(type_id::INT32, 4, 1, 0.0, input_);
  auto const floats = random_column(type_id::FLOAT32, 4, 1, 0.0, input_);
  EXPECT_THROW((void)lower_bound(
                 table_view{ints->view()}, table_view{floats->view()}, {}, default_stream(), mrs_),
               invalid_argument);
  EXPECT_THROW(
    (void)upper_bound(
      table_view{ints->view()}, table_view{ints->view(), ints->view()}, {}, default_stream(), mrs_),
    invalid_argument);
  expect_resources(0);
}

}  // namespace
}  // namespace spillway
