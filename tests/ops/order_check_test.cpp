#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/order_check.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spillway {
namespace {

class OrderCheckTest : public ::testing::Test {
 protected:
  host_memory_resource host_;

  template <typename T>
  std::unique_ptr<table> one_column(data_type type,
                                    std::vector<T> const& values,
                                    std::vector<bool> const& validity = {}) {
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column(type, values, validity, host_));
    return std::make_unique<table>(std::move(columns));
  }

  std::unique_ptr<table> strings(std::vector<std::optional<std::string>> const& values) {
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_string_column(values, host_));
    return std::make_unique<table>(std::move(columns));
  }

  order_checker checker(sort_order orders = {}) {
    return order_checker{{0}, std::move(orders), host_};
  }
};

TEST_F(OrderCheckTest, FindsTheFirstRowThatSortsBeforeTheOneAheadOfIt) {
  auto check       = checker();
  auto const batch = one_column<std::int32_t>(data_type{type_id::INT32}, {1, 2, 5, 4, 6, 0});
  EXPECT_EQ(check.next(batch->view(), default_stream()), std::optional<std::size_t>{3});
  EXPECT_EQ(check.rows_checked(), 6U);
}

TEST_F(OrderCheckTest, ComparesEachBatchWithTheLastRowOfTheOneBefore) {
  auto check        = checker();
  auto const first  = one_column<std::int64_t>(data_type{type_id::INT64}, {1, 2, 3});
  auto const empty  = one_column<std::int64_t>(data_type{type_id::INT64}, {});
  auto const second = one_column<std::int64_t>(data_type{type_id::INT64}, {3, 7});
  auto const third  = one_column<std::int64_t>(data_type{type_id::INT64}, {6, 8});
  EXPECT_EQ(check.next(first->view(), default_stream()), std::nullopt);
  EXPECT_EQ(check.next(empty->view(), default_stream()), std::nullopt);  // keeps the last row
  EXPECT_EQ(check.next(second->view(), default_stream()), std::nullopt);
  EXPECT_EQ(check.next(third->view(), default_stream()), std::optional<std::size_t>{5});
}

TEST_F(OrderCheckTest, NullsGoWhereTheirOrderSaysWhateverTheDirection) {
  // Descending, nulls last.
  auto last = checker({{order::DESCENDING, null_order::AFTER}});
  auto const in_order =
    one_column<std::int16_t>(data_type{type_id::INT16}, {9, 7, 7, 0, 0}, {1, 1, 1, 0, 0});
  EXPECT_EQ(last.next(in_order->view(), default_stream()), std::nullopt);
  auto const value_after_null = one_column<std::int16_t>(data_type{type_id::INT16}, {0, 3}, {0, 1});
  EXPECT_EQ(last.next(value_after_null->view(), default_stream()), std::optional<std::size_t>{6});
  // Descending, nulls first.
  auto first = checker({{order::DESCENDING, null_order::BEFORE}});
  auto const nulls_first =
    one_column<std::int16_t>(data_type{type_id::INT16}, {0, 0, 9, 3}, {0, 0, 1, 1});
  EXPECT_EQ(first.next(nulls_first->view(), default_stream()), std::nullopt);
  auto const null_after_value = one_column<std::int16_t>(data_type{type_id::INT16}, {2, 0}, {1, 0});
  EXPECT_EQ(first.next(null_after_value->view(), default_stream()), std::optional<std::size_t>{5});
}

TEST_F(OrderCheckTest, FloatsPutNanLastAndTieBothZeros) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  double const nan     = std::nan("");
  auto check           = checker();
  auto const in_order =
    one_column<double>(data_type{type_id::FLOAT64}, {-inf, -1.5, -0.0, 0.0, -0.0, inf, nan, nan});
  EXPECT_EQ(check.next(in_order->view(), default_stream()), std::nullopt);
  auto const number_after_nan = one_column<double>(data_type{type_id::FLOAT64}, {nan, inf});
  EXPECT_EQ(check.next(number_after_nan->view(), default_stream()), std::optional<std::size_t>{9});
  auto descending = checker({{order::DESCENDING, null_order::BEFORE}});
  auto const nan_first =
    one_column<float>(data_type{type_id::FLOAT32}, {std::nanf(""), 2.0F, 0.0F, -0.0F, -2.0F});
  EXPECT_EQ(descending.next(nan_first->view(), default_stream()), std::nullopt);
}

TEST_F(OrderCheckTest, StringsCompareTheirBytesUnsigned) {
  auto check          = checker();
  auto const in_order = strings({"", "a", "ab", "b", "\xff", std::string("\xff\x00", 2)});
  EXPECT_EQ(check.next(in_order->view(), default_stream()), std::nullopt);
  auto const descent = strings({"\xff\x01", "b", "ab"});
  EXPECT_EQ(check.next(descent->view(), default_stream()), std::optional<std::size_t>{7});
}

TEST_F(OrderCheckTest, LaterKeysDecideOnlyWhereTheEarlierOnesTie) {
  // Keys (a ascending, b descending).
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_fixed_column<std::uint8_t>(
    data_type{type_id::UINT8}, {1, 1, 2, 2, 3}, {}, host_));
  columns.push_back(testing::make_fixed_column<std::int64_t>(
    data_type{type_id::INT64}, {5, 3, 9, 10, 1}, {}, host_));
  table const rows{std::move(columns)};
  order_checker check{{0, 1}, {{}, {order::DESCENDING, null_order::BEFORE}}, host_};
  EXPECT_EQ(check.next(rows.view(), default_stream()), std::optional<std::size_t>{3});
}

TEST_F(OrderCheckTest, ManyTiesOfTheFirstKeyOrderedByTheSecond) {
  // 100 000 rows of 3 distinct first keys, ordered by an independent std::sort of the values;
  // then one pair of rows whose first keys tie is swapped.
  std::mt19937_64 engine{7};
  std::vector<std::pair<std::int32_t, std::uint32_t>> values(100000);
  for (auto& [first, second] : values) {
    first  = static_cast<std::int32_t>(engine() % 3);
    second = static_cast<std::uint32_t>(engine());
  }
  std::sort(values.begin(), values.end());
  auto const make = [&] {
    std::vector<std::int32_t> firsts;
    std::vector<std::uint32_t> seconds;
    for (auto const& [first, second] : values) {
      firsts.push_back(first);
      seconds.push_back(second);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column(data_type{type_id::INT32}, firsts, {}, host_));
    columns.push_back(testing::make_fixed_column(data_type{type_id::UINT32}, seconds, {}, host_));
    return std::make_unique<table>(std::move(columns));
  };
  order_checker sorted{{0, 1}, {}, host_};
  EXPECT_EQ(sorted.next(make()->view(), default_stream()), std::nullopt);
  std::size_t row = 50000;
  while (values[row].first != values[row + 1].first ||
         values[row].second == values[row + 1].second) {
    ++row;
  }
  std::swap(values[row], values[row + 1]);
  order_checker swapped{{0, 1}, {}, host_};
  EXPECT_EQ(swapped.next(make()->view(), default_stream()), std::optional<std::size_t>{row + 1});
}

/// Rows of a batch cut into parts on the pool (parts hold at least 64k pairs).
constexpr std::size_t LARGE_BATCH_ROWS = 600000;

/**
 * @return the first row (from 1) whose value sorts before the one ahead of it, ascending (NaN
 * last) or descending (NaN first), or `values.size()`: a plain scan, the test's oracle
 */
template <typename T>
std::size_t first_descent_oracle(std::vector<T> const& values, bool descending) {
  auto const rank = [](T value) {  // NaN above every number
    if constexpr (std::is_floating_point_v<T>) {
      return std::pair{std::isnan(value), std::isnan(value) ? T{0} : value};
    } else {
      return std::pair{false, value};
    }
  };
  for (std::size_t row = 1; row < values.size(); ++row) {
    auto const ahead = rank(values[row - 1]);
    auto const here  = rank(values[row]);
    if (descending ? here > ahead : here < ahead) {
      return row;
    }
  }
  return values.size();
}

TEST_F(OrderCheckTest, LargeBatchesCutIntoPartsFindTheFirstDescentOfAnyPart) {
  // Sorted values with descents put at random rows, one or two at once, so that the first
  // descent falls in any part of the batch (and on the rows where parts meet), with more pool
  // threads than cores; checked against a plain scan.
  std::mt19937_64 engine{11};
  std::vector<std::int64_t> ascending(LARGE_BATCH_ROWS);
  for (auto& value : ascending) {
    value = static_cast<std::int64_t>(engine() % 1000000) - 500000;
  }
  std::sort(ascending.begin(), ascending.end());
  for (std::size_t const threads : testing::POOL_SIZES) {
    testing::worker_threads_guard const pool{threads};
    for (bool const descending : {false, true}) {
      for (int trial = 0; trial < 6; ++trial) {
        auto values = ascending;
        if (descending) {
          std::reverse(values.begin(), values.end());
        }
        // trial 0: in order; 1: a descent where parts of 2 threads meet; later: at random.
        for (int descent = 0; descent < std::min(trial, 2); ++descent) {
          std::size_t const row =
            trial == 1 ? LARGE_BATCH_ROWS / 2 : 1 + engine() % (LARGE_BATCH_ROWS - 1);
          values[row] = values[row - 1] + (descending ? 1 : -1);
        }
        auto const batch    = one_column(data_type{type_id::INT64}, values);
        auto const expected = first_descent_oracle(values, descending);
        auto check =
          checker(descending ? sort_order{{order::DESCENDING, null_order::BEFORE}} : sort_order{});
        auto const found = check.next(batch->view(), default_stream());
        if (expected == values.size()) {
          EXPECT_EQ(found, std::nullopt) << threads << " threads";
        } else {
          EXPECT_EQ(found, std::optional<std::size_t>{expected}) << threads << " threads";
        }
      }
    }
  }
}

TEST_F(OrderCheckTest, LargeFloatBatchesFindADescentIntoOrOutOfNan) {
  double const nan = std::nan("");
  testing::worker_threads_guard const pool{8};
  std::vector<double> values(LARGE_BATCH_ROWS);
  for (std::size_t row = 0; row < values.size(); ++row) {
    values[row] =
      row < LARGE_BATCH_ROWS - 1000 ? static_cast<double>(row / 3) - 100.0 : nan;  // 0 at 300
  }
  values[300] = -0.0;  // -0.0 ties +0.0: no descent between them, either way
  values[302] = -0.0;
  EXPECT_EQ(
    checker().next(one_column(data_type{type_id::FLOAT64}, values)->view(), default_stream()),
    std::nullopt);
  auto number_after_nan                   = values;
  number_after_nan[LARGE_BATCH_ROWS - 10] = 1.0;
  std::size_t const expected_number_after = first_descent_oracle(number_after_nan, false);
  EXPECT_EQ(expected_number_after, LARGE_BATCH_ROWS - 10);
  EXPECT_EQ(checker().next(one_column(data_type{type_id::FLOAT64}, number_after_nan)->view(),
                           default_stream()),
            std::optional<std::size_t>{expected_number_after});
  auto nan_early        = values;
  nan_early[300000]     = nan;
  std::size_t const row = first_descent_oracle(nan_early, false);
  EXPECT_EQ(row, 300001U);
  EXPECT_EQ(
    checker().next(one_column(data_type{type_id::FLOAT64}, nan_early)->view(), default_stream()),
    std::optional<std::size_t>{row});
}

TEST_F(OrderCheckTest, LargeBatchesOfTwoKeysWithTiesAcrossParts) {
  // A first key of few values (its ties span the parts' boundaries) and a nullable second key,
  // with one pair swapped inside a run of ties; every pool size finds the same row.
  std::mt19937_64 engine{5};
  std::vector<std::pair<std::int32_t, std::int64_t>> values(LARGE_BATCH_ROWS);
  for (auto& [first, second] : values) {
    first  = static_cast<std::int32_t>(engine() % 4);
    second = static_cast<std::int64_t>(engine() % 100000);
  }
  std::sort(values.begin(), values.end());
  std::size_t swapped = 450000;
  while (values[swapped].first != values[swapped + 1].first ||
         values[swapped].second == values[swapped + 1].second) {
    ++swapped;
  }
  for (bool const swap : {false, true}) {
    auto rows = values;
    if (swap) {
      std::swap(rows[swapped], rows[swapped + 1]);
    }
    std::vector<std::int32_t> firsts;
    std::vector<std::int64_t> seconds;
    std::vector<bool> valid;
    for (std::size_t row = 0; row < rows.size(); ++row) {
      firsts.push_back(rows[row].first);
      seconds.push_back(rows[row].second);
      // Nulls first: only a run's first row of each first key may be null, in order.
      valid.push_back(row == 0 || rows[row - 1].first == rows[row].first);
    }
    for (std::size_t const threads : testing::POOL_SIZES) {
      testing::worker_threads_guard const pool{threads};
      std::vector<std::unique_ptr<column>> columns;
      columns.push_back(testing::make_fixed_column(data_type{type_id::INT32}, firsts, {}, host_));
      columns.push_back(
        testing::make_fixed_column(data_type{type_id::INT64}, seconds, valid, host_));
      table const batch{std::move(columns)};
      order_checker check{{0, 1}, {}, host_};
      auto const found = check.next(batch.view(), default_stream());
      if (swap) {
        EXPECT_EQ(found, std::optional<std::size_t>{swapped + 1}) << threads << " threads";
      } else {
        EXPECT_EQ(found, std::nullopt) << threads << " threads";
      }
    }
  }
}

TEST_F(OrderCheckTest, RefusesAKeyWhoseTypeChangesBetweenBatches) {
  auto check        = checker();
  auto const first  = one_column<std::int32_t>(data_type{type_id::INT32}, {1});
  auto const second = one_column<std::int64_t>(data_type{type_id::INT64}, {2});
  EXPECT_EQ(check.next(first->view(), default_stream()), std::nullopt);
  EXPECT_THROW((void)check.next(second->view(), default_stream()), invalid_argument);
  order_checker wrong_column{{3}, {}, host_};
  EXPECT_THROW((void)wrong_column.next(first->view(), default_stream()), invalid_argument);
  EXPECT_THROW((order_checker{{0, 1}, {{}}, host_}), invalid_argument);
}

}  // namespace
}  // namespace spillway
