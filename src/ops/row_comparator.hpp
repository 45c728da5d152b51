/**
 * @file row_comparator.hpp
 * @brief Full three-way comparison of key rows, possibly of two different tables with the same
 * key types; the reference order that normalized keys reproduce. Private to the ops layer.
 */
#pragma once

#include <spillway/ops/sort_order.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <vector>

namespace spillway::detail {

/**
 * @return `orders`, or `num_keys` default entries when it is empty
 * @throws spillway::invalid_argument when `orders` is neither empty nor `num_keys` long
 */
sort_order resolve_orders(sort_order const& orders, std::size_t num_keys);

/**
 * @brief Checks that `lhs` and `rhs` have the same number of columns of the same types.
 * @param what names the operation in the error message
 * @throws spillway::invalid_argument otherwise
 */
void expect_same_key_types(table_view const& lhs, table_view const& rhs, char const* what);

/**
 * @brief Orders rows of key tables whose columns have the types of `schema`, under `orders`.
 * @note Immutable after construction; safe to use from several threads.
 */
class row_comparator {
 public:
  /**
   * @param schema any table with the key types (only the types are used)
   * @param orders resolved orders, one per column of `schema`
   */
  row_comparator(table_view const& schema, sort_order const& orders);

  /**
   * @return negative, zero or positive as row `lhs_row` of `lhs` comes before, ties with or
   * comes after row `rhs_row` of `rhs`
   */
  [[nodiscard]] int compare(table_view const& lhs,
                            std::size_t lhs_row,
                            table_view const& rhs,
                            std::size_t rhs_row) const noexcept;

 private:
  using value_compare = int (*)(column_view const&,
                                std::size_t,
                                column_view const&,
                                std::size_t) noexcept;
  struct key_column {
    value_compare compare_values;
    bool descending;
    bool nulls_before;
  };
  std::vector<key_column> columns_;
};

}  // namespace spillway::detail
