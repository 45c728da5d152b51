/**
 * @file expect_tables_equal.hpp
 * @brief Value equality of columns and tables (types, nulls, values; not layout), reported as a
 * gtest failure naming the first differing row.
 */
#pragma once

#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#include <string>

namespace spillway::testing {

/** @return "" when equal, else a description of the first difference */
std::string describe_column_difference(column_view const& expected, column_view const& actual);

/** @return "" when equal, else a description of the first difference */
std::string describe_table_difference(table_view const& expected, table_view const& actual);

/** @return the value of row `row` of `view` as text ("null" for nulls) */
std::string row_to_string(column_view const& view, std::size_t row);

}  // namespace spillway::testing

#define SPILLWAY_EXPECT_COLUMNS_EQUAL(expected, actual) \
  EXPECT_EQ(::spillway::testing::describe_column_difference((expected), (actual)), "")

#define SPILLWAY_EXPECT_TABLES_EQUAL(expected, actual) \
  EXPECT_EQ(::spillway::testing::describe_table_difference((expected), (actual)), "")
