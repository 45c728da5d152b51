#include "ops/row_comparator.hpp"

#include <spillway/core/error.hpp>

#include <cmath>
#include <string>
#include <string_view>
#include <type_traits>

namespace spillway::detail {
namespace {

template <typename T>
int compare_fixed(column_view const& lhs,
                  std::size_t lhs_row,
                  column_view const& rhs,
                  std::size_t rhs_row) noexcept {
  T const a = lhs.data<T>()[lhs_row];
  T const b = rhs.data<T>()[rhs_row];
  if constexpr (std::is_floating_point_v<T>) {
    bool const a_nan = std::isnan(a);
    bool const b_nan = std::isnan(b);
    if (a_nan || b_nan) {
      return static_cast<int>(a_nan) - static_cast<int>(b_nan);
    }
  }
  return (a < b) ? -1 : ((b < a) ? 1 : 0);
}

int compare_strings(column_view const& lhs,
                    std::size_t lhs_row,
                    column_view const& rhs,
                    std::size_t rhs_row) noexcept {
  // char_traits<char>::compare orders bytes as unsigned char, like memcmp.
  int const result = lhs.string_at(lhs_row).compare(rhs.string_at(rhs_row));
  return (result > 0) - (result < 0);
}

}  // namespace

sort_order resolve_orders(sort_order const& orders, std::size_t num_keys) {
  if (orders.empty()) {
    return sort_order(num_keys);
  }
  SPILLWAY_EXPECTS(
    orders.size() == num_keys,
    "sort order must have one entry per key column or none: " + std::to_string(orders.size()) +
      " entries for " + std::to_string(num_keys) + " key columns",
    invalid_argument);
  return orders;
}

void expect_same_key_types(table_view const& lhs, table_view const& rhs, char const* what) {
  SPILLWAY_EXPECTS(lhs.num_columns() == rhs.num_columns(),
                   std::string{what} + ": key column counts differ: " +
                     std::to_string(lhs.num_columns()) + " vs " + std::to_string(rhs.num_columns()),
                   invalid_argument);
  for (std::size_t index = 0; index < lhs.num_columns(); ++index) {
    SPILLWAY_EXPECTS(lhs.column(index).type() == rhs.column(index).type(),
                     std::string{what} + ": key column " + std::to_string(index) +
                       " types differ: " + to_string(lhs.column(index).type()) + " vs " +
                       to_string(rhs.column(index).type()),
                     invalid_argument);
  }
}

row_comparator::row_comparator(table_view const& schema, sort_order const& orders) {
  SPILLWAY_EXPECTS_EQ(schema.num_columns(),
                      orders.size(),
                      "row_comparator needs one order per key column",
                      logic_error);
  columns_.reserve(orders.size());
  for (std::size_t index = 0; index < orders.size(); ++index) {
    data_type const type = schema.column(index).type();
    value_compare const compare_values =
      is_fixed_width(type)
        ? visit_fixed_width(type, []<typename T>() -> value_compare { return &compare_fixed<T>; })
        : &compare_strings;
    columns_.push_back(key_column{compare_values,
                                  orders[index].direction == order::DESCENDING,
                                  orders[index].nulls == null_order::BEFORE});
  }
}

int row_comparator::compare(table_view const& lhs,
                            std::size_t lhs_row,
                            table_view const& rhs,
                            std::size_t rhs_row) const noexcept {
  auto const lhs_columns = lhs.columns();
  auto const rhs_columns = rhs.columns();
  for (std::size_t index = 0; index < columns_.size(); ++index) {
    key_column const& key    = columns_[index];
    column_view const& left  = lhs_columns[index];
    column_view const& right = rhs_columns[index];
    bool const left_valid    = left.is_valid(lhs_row);
    bool const right_valid   = right.is_valid(rhs_row);
    if (!left_valid || !right_valid) {
      if (left_valid == right_valid) {
        continue;  // two nulls tie
      }
      // Null placement is positional: it does not flip with the direction.
      bool const left_first = !left_valid ? key.nulls_before : !key.nulls_before;
      return left_first ? -1 : 1;
    }
    int const result = key.compare_values(left, lhs_row, right, rhs_row);
    if (result != 0) {
      return key.descending ? -result : result;
    }
  }
  return 0;
}

}  // namespace spillway::detail
