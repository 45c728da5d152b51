#include "testing/table_generators.hpp"

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
