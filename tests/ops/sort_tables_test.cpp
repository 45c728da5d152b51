/**
 * @file sort_tables_test.cpp
 * @brief `sort` of whole tables (values by keys) and `is_sorted`.
 */
#include "ops/reference_order.hpp"
#include "ops/sort_test_support.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <optional>
#include <vector>

namespace spillway {
namespace {

using testing::describe;
using testing::every_column_order;
using testing::make_fixed_column;
using testing::random_column;
using testing::reference_compare;
using testing::reference_sorted_order;
using testing::SortedOrderTest;

class Sort : public testing::ops_fixture {};

TEST_F(Sort, StableSortKeepsInputOrderOfEqualKeys) {
  std::vector<std::int32_t> keys;
  std::vector<std::int64_t> payload;
  std::vector<bool> validity;
  for (std::size_t row = 0; row < 3000; ++row) {
    keys.push_back(static_cast<std::int32_t>((row * 31) % 4));
    payload.push_back(static_cast<std::int64_t>(row));
    validity.push_back(row % 5 != 0);
  }
  auto const key    = make_fixed_column<std::int32_t>(type_id::INT32, keys, validity, input_);
  auto const values = make_fixed_column<std::int64_t>(type_id::INT64, payload, {}, input_);
  auto const words  = random_column(type_id::STRING, 3000, 12, 0.1, input_);
  table_view const input{key->view(), values->view(), words->view()};
  sort_order const orders{{order::DESCENDING, null_order::AFTER}};
  auto const sorted =
    sort(input, table_view{key->view()}, orders, sort_stability::STABLE, default_stream(), mrs_);
  expect_resources(sorted->allocated_bytes());
  table_view const view = sorted->view();
  ASSERT_EQ(view.num_rows(), 3000U);
  for (std::size_t row = 1; row < view.num_rows(); ++row) {
    int const order_of_keys = reference_compare(view.select(std::vector<std::size_t>{0}),
                                                row - 1,
                                                view.select(std::vector<std::size_t>{0}),
                                                row,
                                                orders);
    ASSERT_LE(order_of_keys, 0) << "row " << row;
    if (order_of_keys == 0) {
      ASSERT_LT(view.column(1).data<std::int64_t>()[row - 1],
                view.column(1).data<std::int64_t>()[row])
        << "equal keys out of input order at row " << row;
    }
  }
  // The other columns moved with their keys.
  auto const expected_map = make_fixed_column<std::uint64_t>(
    type_id::UINT64, testing::reference_sorted_order(table_view{key->view()}, orders), {}, input_);
  auto const expected =
    gather(input, expected_map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), view);
}

/// Whether no row of `keys` comes before the row above it, by the reference order.
bool reference_is_sorted(table_view const& keys, sort_order const& orders) {
  for (std::size_t row = 1; row < keys.num_rows(); ++row) {
    if (reference_compare(keys, row, keys, row - 1, orders) < 0) {
      return false;
    }
  }
  return true;
}

/// `permutation` with the rows at `position - 1` and `position` swapped.
std::vector<std::uint64_t> swapped(std::vector<std::uint64_t> permutation, std::size_t position) {
  std::swap(permutation[position - 1], permutation[position]);
  return permutation;
}

class IsSorted : public SortedOrderTest {
 public:
  /// is_sorted of `keys` reordered by `permutation`, against the reference.
  void expect_matches_reference(table_view const& keys,
                                std::vector<std::uint64_t> const& permutation,
                                sort_order const& orders,
                                std::optional<bool> expected = std::nullopt) {
    auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, permutation, {}, input_);
    auto const reordered =
      gather(keys, map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
    bool const reference = reference_is_sorted(reordered->view(), orders);
    if (expected.has_value()) {
      ASSERT_EQ(reference, *expected) << "the case does not test what it says";
    }
    EXPECT_EQ(is_sorted(reordered->view(), orders), reference);
  }
};

TEST_F(IsSorted, EveryTypeAndOrderSortedOrOneSwapAtABlockBoundary) {
  // Rows out of order in the first row, around the 1024-row blocks of the fixed-width check, and
  // last; whether a swap breaks the order (ties do not) comes from the reference.
  std::size_t const rows = 3000;
  for (data_type const type : testing::all_types()) {
    for (double const nulls : {0.0, 0.2}) {
      SCOPED_TRACE(to_string(type) + (nulls > 0.0 ? " with nulls" : ""));
      auto const key = random_column(type, rows, 17, nulls, input_);
      table_view const keys{key->view()};
      for (auto const& key_order : every_column_order()) {
        sort_order const orders{key_order};
        SCOPED_TRACE(describe(orders));
        std::vector<std::uint64_t> identity(rows);
        for (std::size_t row = 0; row < rows; ++row) {
          identity[row] = row;
        }
        expect_matches_reference(keys, identity, orders);
        auto const order = testing::reference_sorted_order(keys, orders);
        expect_matches_reference(keys, order, orders, true);
        for (std::size_t const position : {1UL, 1023UL, 1024UL, 1025UL, 2048UL, rows - 1}) {
          expect_matches_reference(keys, swapped(order, position), orders);
        }
        // The first row moved last: out of order unless every key ties.
        std::vector<std::uint64_t> rotated(order.begin() + 1, order.end());
        rotated.push_back(order.front());
        expect_matches_reference(keys, rotated, orders);
      }
    }
  }
}

TEST_F(IsSorted, MultiKeySlicedEmptyAndFloatSpecials) {
  auto const text   = random_column(type_id::STRING, 2000, 5, 0.1, input_, 3);
  auto const number = random_column(type_id::INT16, 2000, 6, 0.1, input_);
  table_view const keys{text->view(), number->view()};
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  auto const order = testing::reference_sorted_order(keys, orders);
  expect_matches_reference(keys, order, orders, true);
  expect_matches_reference(keys, swapped(order, 1500), orders);
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, order, {}, input_);
  auto const sorted =
    gather(keys, map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
  EXPECT_TRUE(is_sorted(slice(sorted->view(), 100, 1900), orders));
  EXPECT_TRUE(is_sorted(slice(sorted->view(), 7, 7), orders));
  EXPECT_TRUE(is_sorted(table_view{}, {}));
  // NaN after every number, NaNs and signed zeros tied: the order row_comparator gives.
  double const nan     = std::numeric_limits<double>::quiet_NaN();
  double const inf     = std::numeric_limits<double>::infinity();
  auto const ascending = make_fixed_column<double>(
    type_id::FLOAT64, {-inf, -0.0, 0.0, -0.0, 2.0, inf, nan, nan}, {}, input_);
  EXPECT_TRUE(is_sorted(table_view{ascending->view()}));
  EXPECT_FALSE(is_sorted(table_view{ascending->view()}, {{order::DESCENDING, null_order::BEFORE}}));
  auto const nan_first = make_fixed_column<double>(type_id::FLOAT64, {nan, 2.0, 1.0}, {}, input_);
  EXPECT_FALSE(is_sorted(table_view{nan_first->view()}));
  EXPECT_TRUE(is_sorted(table_view{nan_first->view()}, {{order::DESCENDING, null_order::BEFORE}}));
  EXPECT_THROW((void)is_sorted(keys, {{}}), invalid_argument);
}

TEST_F(Sort, SortedInputIsCopiedFromTheOutputResourceAlone) {
  std::vector<std::int64_t> keys;
  for (std::size_t row = 0; row < PARALLEL_SORT_MIN_ROWS + 10; ++row) {
    keys.push_back(static_cast<std::int64_t>(row / 3));  // in order, with ties
  }
  auto const key   = make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, input_);
  auto const words = random_column(type_id::STRING, keys.size(), 12, 0.1, input_);
  table_view const input{key->view(), words->view()};
  for (auto stability : {sort_stability::STABLE, sort_stability::UNSTABLE}) {
    auto const sorted = sort(input, table_view{key->view()}, {}, stability, default_stream(), mrs_);
    expect_resources(sorted->allocated_bytes());
    SPILLWAY_EXPECT_TABLES_EQUAL(input, sorted->view());
  }
  // Neither an order nor normalized keys were built.
  EXPECT_EQ(temporary_.statistics().peak_bytes, 0U);
}

TEST_F(Sort, ValuesWithoutKeysKeepTheirOrder) {
  auto const values = random_column(type_id::STRING, 50, 3, 0.2, input_);
  auto const sorted = sort(
    table_view{values->view()}, table_view{}, {}, sort_stability::STABLE, default_stream(), mrs_);
  expect_resources(sorted->allocated_bytes());
  SPILLWAY_EXPECT_TABLES_EQUAL(table_view{values->view()}, sorted->view());
}

TEST_F(Sort, RejectsKeysOfAnotherLength) {
  auto const values = random_column(type_id::INT32, 10, 1, 0.0, input_);
  auto const keys   = random_column(type_id::INT32, 11, 1, 0.0, input_);
  EXPECT_THROW((void)sort(table_view{values->view()},
                          table_view{keys->view()},
                          {},
                          sort_stability::UNSTABLE,
                          default_stream(),
                          mrs_),
               invalid_argument);
  expect_resources(0);
}

}  // namespace
}  // namespace spillway
