/**
 * @file sort_test_support.hpp
 * @brief What the sort test files share: every direction and null placement of a key, the
 * fixture that checks `sorted_order` against the reference order, and INT64 keys of several
 * shapes.
 */
#pragma once

#include "ops/reference_order.hpp"
#include "testing/table_generators.hpp"

#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spillway::testing {

/// Every combination of direction and null placement for one key.
inline std::vector<column_order> every_column_order() {
  return {{order::ASCENDING, null_order::BEFORE},
          {order::ASCENDING, null_order::AFTER},
          {order::DESCENDING, null_order::BEFORE},
          {order::DESCENDING, null_order::AFTER}};
}

inline std::string describe(sort_order const& orders) {
  std::string text;
  for (auto const& key : orders) {
    text += key.direction == order::ASCENDING ? "asc" : "desc";
    text += key.nulls == null_order::BEFORE ? "/nulls-first " : "/nulls-last ";
  }
  return text;
}

class SortedOrderTest : public testing::ops_fixture {
 public:
  /// sorted_order under both stabilities against std::stable_sort with the reference order.
  void check(table_view const& keys, sort_order const& orders) {
    std::vector<std::uint64_t> const expected = reference_sorted_order(keys, orders);
    for (auto stability : {sort_stability::STABLE, sort_stability::UNSTABLE}) {
      SCOPED_TRACE(describe(orders) +
                   (stability == sort_stability::STABLE ? "stable" : "unstable"));
      auto const result = sorted_order(keys, orders, stability, default_stream(), mrs_);
      expect_resources(result->allocated_bytes());
      std::vector<std::uint64_t> const actual = to_vector(result->view());
      ASSERT_EQ(actual.size(), expected.size());
      if (stability == sort_stability::STABLE) {
        ASSERT_EQ(actual, expected);
        continue;
      }
      std::vector<bool> seen(actual.size(), false);
      for (std::size_t position = 0; position < actual.size(); ++position) {
        ASSERT_LT(actual[position], actual.size());
        ASSERT_FALSE(seen[actual[position]]) << "row " << actual[position] << " twice";
        seen[actual[position]] = true;
        ASSERT_EQ(reference_compare(keys, actual[position], keys, expected[position], orders), 0)
          << "position " << position << ": row " << actual[position] << " where row "
          << expected[position] << " belongs";
      }
    }
  }

  /// `check` under every direction and null placement of a single key column.
  void check_every_order(column_view const& key) {
    for (auto const& key_order : every_column_order()) {
      check(table_view{key}, sort_order{key_order});
    }
  }
};

/// INT64 keys of `rows` rows laid out by `shape`.
inline std::vector<std::int64_t> int64_keys(std::string const& shape, std::size_t rows) {
  std::mt19937_64 engine{shape.size() * 31 + rows};
  std::vector<std::int64_t> values(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    auto const index = static_cast<std::int64_t>(row);
    if (shape == "random") {
      values[row] = static_cast<std::int64_t>(engine());
    } else if (shape == "sorted") {
      values[row] = index * 3 - 1000;
    } else if (shape == "sorted-but-last") {
      // In order but for the last row, which belongs first: the in-order check must say no.
      values[row] = row + 1 == rows ? -5000 : index * 3 - 1000;
    } else if (shape == "reverse") {
      values[row] = 1000 - index * 3;
    } else if (shape == "all-equal") {
      values[row] = 42;
    } else if (shape == "few-distinct") {
      values[row] = static_cast<std::int64_t>(engine() % 5) - 2;
    } else {  // "skewed": 90% of the rows on one key
      values[row] = engine() % 10 == 0 ? static_cast<std::int64_t>(engine()) : -7;
    }
  }
  return values;
}

}  // namespace spillway::testing
