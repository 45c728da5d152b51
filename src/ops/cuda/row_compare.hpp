/**
 * @file row_compare.hpp
 * @brief The key order of `row_comparator` as plain data and one function, for CUDA kernels
 * (bounds, order checks) and for the host tests that check it against `row_comparator`. Private
 * to the ops layer.
 *
 * Values compare by their order-preserving images (radix_passes.hpp): integers and timestamps
 * numerically, floats with -0.0 equal to 0.0 and every NaN equal and above +inf; strings byte by
 * byte as unsigned bytes, a proper prefix first. DESCENDING reverses the value order; nulls tie
 * with each other and go first or last whatever the direction.
 */
#pragma once

#include "ops/cuda/radix_passes.hpp"

#include <spillway/ops/sort_order.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway::detail::cuda {

/** @brief One key column as a kernel reads it. */
struct key_column {
  type_id type                = type_id::INT64;
  void const* values          = nullptr;  ///< values, or a string's characters
  std::int64_t const* offsets = nullptr;
  bitmask_type const* mask    = nullptr;  ///< null when the column has no nulls
  std::size_t offset          = 0;        ///< the view's first row in its buffers
  bool descending             = false;
  bool nulls_before           = true;
};

/** @return the key columns of `keys` under `orders` (resolved, one per column) */
inline std::vector<key_column> key_columns_of(table_view const& keys, sort_order const& orders) {
  std::vector<key_column> columns;
  columns.reserve(keys.num_columns());
  for (std::size_t c = 0; c < keys.num_columns(); ++c) {
    column_view const& view = keys.column(c);
    key_column column;
    column.type         = view.type().id();
    column.values       = view.head();
    column.offsets      = view.offsets();
    column.mask         = view.has_nulls() ? view.null_mask() : nullptr;
    column.offset       = view.offset();
    column.descending   = orders[c].direction == order::DESCENDING;
    column.nulls_before = orders[c].nulls == null_order::BEFORE;
    columns.push_back(column);
  }
  return columns;
}

/**
 * @return the order-preserving image of row `row` of a fixed-width key column; of its 64-bit
 * word `word` (0 the least significant) for a wide decimal
 */
SPILLWAY_HOST_DEVICE inline std::uint64_t key_image(key_column const& column,
                                                    std::size_t row,
                                                    std::uint64_t word = 0) {
  radix_pass pass;
  pass.kind   = pass_kind::VALUE;
  pass.type   = column.type;
  pass.values = column.values;
  pass.offset = column.offset;
  pass.chunk  = word;
  return value_image(pass, row);
}

/**
 * @return negative, zero or positive as row `lhs_row` of `lhs` comes before, ties with or comes
 * after row `rhs_row` of `rhs`; both have `count` columns of the same types, and the order
 * (direction, nulls) is `lhs`'s
 */
SPILLWAY_HOST_DEVICE inline int compare_rows(key_column const* lhs,
                                             std::size_t lhs_row,
                                             key_column const* rhs,
                                             std::size_t rhs_row,
                                             std::size_t count) {
  for (std::size_t c = 0; c < count; ++c) {
    key_column const& left  = lhs[c];
    key_column const& right = rhs[c];
    bool const left_valid   = valid_at(left.mask, left.offset + lhs_row);
    bool const right_valid  = valid_at(right.mask, right.offset + rhs_row);
    if (!left_valid || !right_valid) {
      if (left_valid == right_valid) {
        continue;  // two nulls tie
      }
      bool const left_first = left_valid != left.nulls_before;
      return left_first ? -1 : 1;
    }
    int result = 0;
    if (left.type == type_id::STRING || left.type == type_id::BINARY) {
      std::int64_t const left_begin  = left.offsets[left.offset + lhs_row];
      std::int64_t const left_size   = left.offsets[left.offset + lhs_row + 1] - left_begin;
      std::int64_t const right_begin = right.offsets[right.offset + rhs_row];
      std::int64_t const right_size  = right.offsets[right.offset + rhs_row + 1] - right_begin;
      auto const* a                  = static_cast<unsigned char const*>(left.values) + left_begin;
      auto const* b             = static_cast<unsigned char const*>(right.values) + right_begin;
      std::int64_t const common = left_size < right_size ? left_size : right_size;
      for (std::int64_t i = 0; i < common && result == 0; ++i) {
        result = a[i] < b[i] ? -1 : (a[i] > b[i] ? 1 : 0);
      }
      if (result == 0) {
        result = left_size < right_size ? -1 : (left_size > right_size ? 1 : 0);
      }
    } else if (left.type == type_id::DECIMAL128 || left.type == type_id::DECIMAL256) {
      // Word by word from the most significant, whose image carries the sign.
      for (std::uint64_t word = left.type == type_id::DECIMAL128 ? 2 : 4;
           word-- > 0 && result == 0;) {
        std::uint64_t const a = key_image(left, lhs_row, word);
        std::uint64_t const b = key_image(right, rhs_row, word);
        result                = a < b ? -1 : (a > b ? 1 : 0);
      }
    } else {
      std::uint64_t const a = key_image(left, lhs_row);
      std::uint64_t const b = key_image(right, rhs_row);
      result                = a < b ? -1 : (a > b ? 1 : 0);
    }
    if (result != 0) {
      return left.descending ? -result : result;
    }
  }
  return 0;
}

}  // namespace spillway::detail::cuda
