#include "testing/expect_tables_equal.hpp"

#include <cmath>
#include <cstring>
#include <sstream>

namespace spillway::testing {

std::string row_to_string(column_view const& view, std::size_t row) {
  if (view.is_null(row)) {
    return "null";
  }
  if (view.type().id() == type_id::STRING) {
    return "\"" + std::string{view.string_at(row)} + "\"";
  }
  if (view.type().id() == type_id::BINARY) {
    std::ostringstream out;
    out << "0x" << std::hex;
    for (char const byte : view.string_at(row)) {
      out << (static_cast<unsigned char>(byte) >> 4U) << (static_cast<unsigned char>(byte) & 15U);
    }
    return out.str();
  }
  if (is_decimal(view.type().id())) {
    return decimal_to_string(
      view.type(),
      static_cast<std::byte const*>(view.head()) + (view.offset() + row) * size_of(view.type()));
  }
  return visit_fixed_width(view.type(), [&]<typename T>() {
    std::ostringstream out;
    if constexpr (is_wide_decimal_v<T>) {
      // (decimals are written above)
    } else if constexpr (sizeof(T) == 1) {
      out << static_cast<int>(view.data<T>()[row]);
    } else {
      out << view.data<T>()[row];
    }
    return out.str();
  });
}

std::string describe_column_difference(column_view const& expected, column_view const& actual) {
  if (!(expected.type() == actual.type())) {
    return "type " + to_string(actual.type()) + ", expected " + to_string(expected.type());
  }
  if (expected.size() != actual.size()) {
    return std::to_string(actual.size()) + " rows, expected " + std::to_string(expected.size());
  }
  if (expected.null_count() != actual.null_count()) {
    return "null count " + std::to_string(actual.null_count()) + ", expected " +
           std::to_string(expected.null_count());
  }
  for (std::size_t row = 0; row < expected.size(); ++row) {
    bool const expected_valid = expected.is_valid(row);
    bool equal                = expected_valid == actual.is_valid(row);
    if (equal && expected_valid) {
      if (!is_fixed_width(expected.type())) {
        equal = expected.string_at(row) == actual.string_at(row);
      } else {
        std::size_t const width = size_of(expected.type());
        equal =
          std::memcmp(
            static_cast<std::byte const*>(expected.head()) + (expected.offset() + row) * width,
            static_cast<std::byte const*>(actual.head()) + (actual.offset() + row) * width,
            width) == 0;
      }
    }
    if (!equal) {
      return "row " + std::to_string(row) + " is " + row_to_string(actual, row) + ", expected " +
             row_to_string(expected, row);
    }
  }
  return "";
}

std::string describe_table_difference(table_view const& expected, table_view const& actual) {
  if (expected.num_columns() != actual.num_columns()) {
    return std::to_string(actual.num_columns()) + " columns, expected " +
           std::to_string(expected.num_columns());
  }
  if (expected.num_rows() != actual.num_rows()) {
    return std::to_string(actual.num_rows()) + " rows, expected " +
           std::to_string(expected.num_rows());
  }
  for (std::size_t index = 0; index < expected.num_columns(); ++index) {
    std::string const difference =
      describe_column_difference(expected.column(index), actual.column(index));
    if (!difference.empty()) {
      return "column " + std::to_string(index) + ": " + difference;
    }
  }
  return "";
}

}  // namespace spillway::testing
