#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/concatenate.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;

using strings = std::vector<std::optional<std::string>>;

class Concatenate : public ::testing::Test {
 protected:
  /// A table of an int32 column, a STRING column and a float64 column.
  std::unique_ptr<table> make_table(std::vector<std::int32_t> const& numbers,
                                    std::vector<bool> const& number_validity,
                                    strings const& text,
                                    std::vector<double> const& reals,
                                    std::vector<bool> const& real_validity) {
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column(type_id::INT32, numbers, number_validity, host_));
    columns.push_back(make_string_column(text, host_));
    columns.push_back(make_fixed_column(type_id::FLOAT64, reals, real_validity, host_));
    return std::make_unique<table>(std::move(columns));
  }

  /// Checks that concatenating `inputs` gives `expected`, from the output resource only.
  void expect_concatenation(std::vector<table_view> const& inputs, table_view const& expected) {
    statistics_resource_adaptor stats{device_};
    auto const result = concatenate(inputs, default_stream(), stats);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected, *result);
    EXPECT_EQ(stats.statistics().total_bytes, result->allocated_bytes());
    for (auto const& column : result->view()) {
      EXPECT_EQ(column.kind(), memory_kind::DEVICE);
      EXPECT_EQ(column.offset(), 0U);
      if (!is_fixed_width(column.type())) {
        EXPECT_EQ(column.offsets()[0], 0);
      }
    }
  }

  testing::default_resource_guard guard_;
  host_memory_resource host_;
  emulated_device_memory_resource device_;
};

TEST_F(Concatenate, SlicedEmptyAndNullableInputs) {
  auto const first =
    make_table({1, 2, 3}, {}, {"a", "bb", "ccc"}, {0.5, 1.5, 2.5}, {true, true, true});
  auto const second_source = make_table({10, 11, 12, 13, 14},
                                        {true, false, true, true, true},
                                        {"w", "x", std::nullopt, "yy", "z"},
                                        {-1.0, -2.0, -3.0, -4.0, -5.0},
                                        {});
  table_view const second  = slice(*second_source, 1, 4);
  auto const empty         = make_table({}, {}, {}, {}, {});
  auto const fourth        = make_table({7}, {}, {""}, {9.0}, {false});

  auto const expected = make_table({1, 2, 3, 11, 12, 13, 7},
                                   {true, true, true, false, true, true, true},
                                   {"a", "bb", "ccc", "x", std::nullopt, "yy", ""},
                                   {0.5, 1.5, 2.5, -2.0, -3.0, -4.0, 9.0},
                                   {true, true, true, true, true, true, false});
  expect_concatenation({*first, second, *empty, *fourth, *empty}, *expected);

  auto const result =
    concatenate(std::vector<table_view>{*first, second, *empty, *fourth}, default_stream(), host_);
  table_view const view = *result;
  EXPECT_EQ(view.column(0).null_count(), 1U);
  EXPECT_EQ(view.column(1).null_count(), 1U);
  EXPECT_EQ(view.column(2).null_count(), 1U);
  std::vector<std::int64_t> const offsets(view.column(1).offsets(), view.column(1).offsets() + 8);
  EXPECT_EQ(offsets, (std::vector<std::int64_t>{0, 1, 3, 6, 7, 7, 9, 9}));
}

TEST_F(Concatenate, SlicesOfATableReassembleIt) {
  auto const source     = random_table(all_types(), 200, 41, 0.3, host_);
  table_view const view = *source;
  std::vector<table_view> const pieces{slice(view, 0, 10),
                                       slice(view, 10, 10),
                                       slice(view, 10, 57),
                                       slice(view, 57, 133),
                                       slice(view, 133, 199),
                                       slice(view, 199, 200)};
  expect_concatenation(pieces, view);
  // Reordered pieces give the rows in the new order.
  auto const reordered = concatenate(
    std::vector<table_view>{slice(view, 100, 200), slice(view, 0, 100)}, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(view, 100, 200), slice(*reordered, 0, 100));
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(view, 0, 100), slice(*reordered, 100, 200));
}

TEST_F(Concatenate, ResultHasAMaskIffAnyInputHasNulls) {
  auto const masked_without_nulls =
    make_table({1, 2}, {true, true}, {"a", "b"}, {1.0, 2.0}, {true, true});
  auto const without_mask = make_table({3}, {}, {"c"}, {3.0}, {});
  auto const no_nulls     = concatenate(
    std::vector<table_view>{*masked_without_nulls, *without_mask, *masked_without_nulls},
    default_stream(),
    host_);
  for (auto const& column : no_nulls->view()) {
    EXPECT_FALSE(column.nullable());
    EXPECT_EQ(column.size(), 5U);
  }

  // Nulls only in the string column of the middle input: only that column gets a mask.
  auto const with_null = make_table({4, 5}, {}, {std::nullopt, "e"}, {4.0, 5.0}, {});
  auto const result =
    concatenate(std::vector<table_view>{*without_mask, *with_null, *masked_without_nulls},
                default_stream(),
                host_);
  table_view const view = *result;
  EXPECT_FALSE(view.column(0).nullable());
  EXPECT_TRUE(view.column(1).nullable());
  EXPECT_FALSE(view.column(2).nullable());
  EXPECT_EQ(view.column(1).null_count(), 1U);
  for (std::size_t row = 0; row < 5; ++row) {
    EXPECT_EQ(view.column(1).is_valid(row), row != 1) << row;
  }
  auto const expected = make_table(
    {3, 4, 5, 1, 2}, {}, {"c", std::nullopt, "e", "a", "b"}, {3.0, 4.0, 5.0, 1.0, 2.0}, {});
  SPILLWAY_EXPECT_TABLES_EQUAL(*expected, view);
}

TEST_F(Concatenate, MasksAtUnalignedRowPositions) {
  // Inputs of 3, 13 and 7 rows put each mask at a different bit position of the result.
  std::vector<table_view> inputs;
  std::vector<std::unique_ptr<table>> owners;
  std::vector<bool> expected_validity;
  std::vector<std::int32_t> expected_values;
  std::int32_t next = 0;
  for (std::size_t const rows : {3U, 13U, 7U}) {
    std::vector<std::int32_t> values;
    std::vector<bool> validity;
    for (std::size_t row = 0; row < rows; ++row) {
      values.push_back(next);
      validity.push_back(next % 4 != 1);
      ++next;
    }
    expected_values.insert(expected_values.end(), values.begin(), values.end());
    expected_validity.insert(expected_validity.end(), validity.begin(), validity.end());
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column(type_id::INT32, values, validity, host_));
    owners.push_back(std::make_unique<table>(std::move(columns)));
    inputs.push_back(*owners.back());
  }
  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(
    make_fixed_column(type_id::INT32, expected_values, expected_validity, host_));
  table const expected{std::move(expected_columns)};
  expect_concatenation(inputs, expected);
}

TEST_F(Concatenate, MismatchedColumnCountsThrow) {
  auto const three = make_table({1}, {}, {"a"}, {1.0}, {});
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int32_t>(type_id::INT32, {1}, {}, host_));
  table const one{std::move(columns)};
  statistics_resource_adaptor stats{host_};
  EXPECT_THROW((void)concatenate(std::vector<table_view>{*three, one}, default_stream(), stats),
               invalid_argument);
  EXPECT_THROW(
    (void)concatenate(std::vector<table_view>{*three, table_view{}}, default_stream(), stats),
    invalid_argument);
  EXPECT_EQ(stats.statistics().total_count, 0U);
}

TEST_F(Concatenate, MismatchedTypesThrowNamingTheColumn) {
  auto const first = make_table({1}, {}, {"a"}, {1.0}, {});
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int32_t>(type_id::INT32, {2}, {}, host_));
  columns.push_back(make_fixed_column<std::int32_t>(type_id::INT32, {3}, {}, host_));
  columns.push_back(make_fixed_column<double>(type_id::FLOAT64, {4.0}, {}, host_));
  table const second{std::move(columns)};
  statistics_resource_adaptor stats{host_};
  try {
    (void)concatenate(std::vector<table_view>{*first, second}, default_stream(), stats);
    FAIL() << "expected invalid_argument";
  } catch (invalid_argument const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("column 1"), std::string::npos) << what;
    EXPECT_NE(what.find("int32"), std::string::npos) << what;
    EXPECT_NE(what.find("string"), std::string::npos) << what;
  }
  EXPECT_EQ(stats.statistics().total_count, 0U);
}

TEST_F(Concatenate, TimestampUnitsMustMatch) {
  auto const seconds =
    random_table({data_type{type_id::TIMESTAMP, time_unit::SECOND}}, 4, 42, 0.0, host_);
  auto const millis =
    random_table({data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}}, 4, 43, 0.0, host_);
  EXPECT_THROW(
    (void)concatenate(std::vector<table_view>{*seconds, *millis}, default_stream(), host_),
    invalid_argument);
  auto const same =
    concatenate(std::vector<table_view>{*seconds, *seconds}, default_stream(), host_);
  EXPECT_EQ(same->view().column(0).type(), (data_type{type_id::TIMESTAMP, time_unit::SECOND}));
  EXPECT_EQ(same->num_rows(), 8U);
}

TEST_F(Concatenate, NothingGivesAnEmptyTable) {
  statistics_resource_adaptor stats{host_};
  auto const result = concatenate(std::span<table_view const>{}, default_stream(), stats);
  EXPECT_EQ(result->num_columns(), 0U);
  EXPECT_EQ(result->num_rows(), 0U);
  EXPECT_EQ(stats.statistics().total_count, 0U);
}

TEST_F(Concatenate, OnlyEmptyInputs) {
  auto const empty = random_table(all_types(), 0, 44, 0.3, host_);
  auto const result =
    concatenate(std::vector<table_view>{*empty, *empty, *empty}, default_stream(), device_);
  EXPECT_EQ(result->num_rows(), 0U);
  ASSERT_EQ(result->num_columns(), all_types().size());
  for (auto const& column : result->view()) {
    EXPECT_FALSE(column.nullable());
    if (!is_fixed_width(column.type())) {
      EXPECT_EQ(column.offsets()[0], 0);
    }
  }
  auto const zero_columns =
    concatenate(std::vector<table_view>{table_view{}, table_view{}}, default_stream(), host_);
  EXPECT_EQ(zero_columns->num_columns(), 0U);
}

TEST_F(Concatenate, StringsWithEmptyValuesAndNulls) {
  auto const left   = make_string_column({"", std::nullopt, "abc"}, host_);
  auto const right  = make_string_column({"", "", "de", std::nullopt}, host_);
  auto const result = concatenate(
    std::vector<table_view>{table_view{left->view()}, table_view{slice(right->view(), 1, 4)}},
    default_stream(),
    host_);
  auto const expected =
    make_string_column({"", std::nullopt, "abc", "", "de", std::nullopt}, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(table_view{expected->view()}, *result);
  EXPECT_EQ(result->view().column(0).chars_size(), 5U);
}

}  // namespace
}  // namespace spillway
