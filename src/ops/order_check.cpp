/**
 * @file order_check.cpp
 * @brief `order_checker`: typed value comparisons of adjacent rows, key column by key column.
 */
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/ops/order_check.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/copy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace spillway {
namespace {

/** @return <0, 0, >0 as value `lhs` comes before, ties with or comes after `rhs`, ascending */
template <typename T>
int compare_values(T lhs, T rhs) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    bool const lhs_nan = std::isnan(lhs);
    bool const rhs_nan = std::isnan(rhs);
    if (lhs_nan || rhs_nan) {
      return static_cast<int>(lhs_nan) - static_cast<int>(rhs_nan);  // NaN after +inf
    }
  }
  return lhs < rhs ? -1 : (rhs < lhs ? 1 : 0);  // -0.0 == +0.0
}

/** @return the comparison of two string values: their bytes, unsigned (char_traits<char>) */
int compare_strings(std::string_view lhs, std::string_view rhs) noexcept {
  int const result = lhs.compare(rhs);
  return result < 0 ? -1 : (result > 0 ? 1 : 0);
}

/**
 * @return how row `lhs_row` of `lhs` compares with row `rhs_row` of `rhs` in one key column,
 * under `ordering` (nulls placed by position, whatever the direction)
 */
int compare_cells(column_view const& lhs,
                  std::size_t lhs_row,
                  column_view const& rhs,
                  std::size_t rhs_row,
                  column_order ordering) {
  bool const lhs_null = lhs.is_null(lhs_row);
  bool const rhs_null = rhs.is_null(rhs_row);
  if (lhs_null || rhs_null) {
    if (lhs_null && rhs_null) {
      return 0;
    }
    int const null_first = lhs_null ? -1 : 1;
    return ordering.nulls == null_order::BEFORE ? null_first : -null_first;
  }
  int const result = !is_fixed_width(lhs.type())
                       ? compare_strings(lhs.string_at(lhs_row), rhs.string_at(rhs_row))
                       : visit_fixed_width(lhs.type(), [&]<typename T>() {
                           return compare_values<T>(lhs.data<T>()[lhs_row], rhs.data<T>()[rhs_row]);
                         });
  return ordering.direction == order::DESCENDING ? -result : result;
}

/** @return how two rows compare over every key column (the columns of `lhs` and `rhs`) */
int compare_rows(table_view const& lhs,
                 std::size_t lhs_row,
                 table_view const& rhs,
                 std::size_t rhs_row,
                 sort_order const& orders) {
  for (std::size_t key = 0; key < lhs.num_columns(); ++key) {
    int const result =
      compare_cells(lhs.column(key), lhs_row, rhs.column(key), rhs_row, orders[key]);
    if (result != 0) {
      return result;
    }
  }
  return 0;
}

/// Pairs of adjacent rows checked per part of a batch, at least: smaller batches stay on the
/// caller. A pair costs about a nanosecond; a part of 64k pairs costs far more than handing it to
/// the pool.
constexpr std::size_t MIN_PAIRS_PER_PART = std::size_t{1} << 16;
/// Pairs compared per block, without a branch per pair, in the check of the last key column.
constexpr std::size_t DESCENT_BLOCK = 1024;

/**
 * @return whether value `lhs`, ahead of `rhs`, sorts after it (ascending), without branches:
 * NaN after every number, -0.0 equal to +0.0 (as `compare_values`)
 */
template <typename T>
bool descends(T lhs, T rhs) noexcept {
  if constexpr (std::is_floating_point_v<T>) {
    bool const lhs_nan = lhs != lhs;  // NOLINT(misc-redundant-expression): true for NaN only
    bool const rhs_nan = rhs != rhs;  // NOLINT(misc-redundant-expression)
    return (lhs_nan & !rhs_nan) | (rhs < lhs);
  } else {
    return rhs < lhs;
  }
}

/**
 * @return the first `row` in [`begin`, `end`) whose value of the last key column (no nulls, fixed
 * width) sorts before the value at `row - 1`, or `rows` when none does: blocks of pairs are
 * compared without a branch per pair, and only a block holding a descent is searched.
 */
template <typename T>
std::size_t first_descent_of_values(
  T const* values, bool descending, std::size_t begin, std::size_t end, std::size_t rows) {
  for (std::size_t block = begin; block < end; block += DESCENT_BLOCK) {
    std::size_t const block_end = std::min(end, block + DESCENT_BLOCK);
    bool any                    = false;
    if (descending) {
      for (std::size_t row = block; row < block_end; ++row) {
        any |= descends(values[row], values[row - 1]);
      }
    } else {
      for (std::size_t row = block; row < block_end; ++row) {
        any |= descends(values[row - 1], values[row]);
      }
    }
    if (any) {
      for (std::size_t row = block; row < block_end; ++row) {
        if (descending ? descends(values[row], values[row - 1])
                       : descends(values[row - 1], values[row])) {
          return row;
        }
      }
    }
  }
  return rows;
}

/**
 * @brief Compares the adjacent rows (row - 1, row) of one key column for every `row` in
 * `pairs`, or for every `row` in [`begin`, `end`) when `pairs` is null, keeping in `ties` those
 * that tie there (to be decided by the next key) when `keep_ties` (the last key has no next: its
 * ties are in order).
 * @return the first `row` whose row sorts before the row ahead of it, or `rows` when none does
 */
template <typename T>
std::size_t compare_pairs(column_view const& column,
                          column_order ordering,
                          std::vector<std::uint32_t> const* pairs,
                          std::size_t begin,
                          std::size_t end,
                          std::size_t rows,
                          bool keep_ties,
                          std::vector<std::uint32_t>& ties) {
  bool const descending = ordering.direction == order::DESCENDING;
  bool const nullable   = column.has_nulls();
  T const* values       = nullptr;
  if constexpr (!std::is_same_v<T, std::string_view>) {
    values = column.data<T>();
    if (pairs == nullptr && !keep_ties && !nullable) {
      return first_descent_of_values(values, descending, begin, end, rows);
    }
  }
  std::size_t const count = pairs == nullptr ? end - begin : pairs->size();
  for (std::size_t at = 0; at < count; ++at) {
    std::size_t const row = pairs == nullptr ? begin + at : (*pairs)[at];
    int result            = 0;
    if (nullable && (column.is_null(row - 1) || column.is_null(row))) {
      result = compare_cells(column, row - 1, column, row, ordering);
    } else {
      if constexpr (std::is_same_v<T, std::string_view>) {
        result = compare_strings(column.string_at(row - 1), column.string_at(row));
      } else {
        result = compare_values<T>(values[row - 1], values[row]);
      }
      result = descending ? -result : result;
    }
    if (result > 0) {
      return row;  // rows are visited in increasing order: the first for this key
    }
    if (result == 0 && keep_ties) {
      ties.push_back(static_cast<std::uint32_t>(row));
    }
  }
  return rows;
}

/**
 * @return the first row in [`begin`, `end`) (from 1) of `keys` that sorts before the row ahead
 * of it, or `keys.num_rows()` when every row there is in order
 */
std::size_t first_descent_in(table_view const& keys,
                             sort_order const& orders,
                             std::size_t begin,
                             std::size_t end) {
  std::size_t const rows = keys.num_rows();
  // Key by key: the first key compares every adjacent pair; each further key only the pairs
  // the keys before it tied. A pair out of order at a key is out of order (the keys before it
  // tied); the first such pair over all keys is the answer.
  std::size_t first = rows;
  std::vector<std::uint32_t> pairs;
  std::vector<std::uint32_t> ties;
  for (std::size_t key = 0; key < keys.num_columns(); ++key) {
    column_view const& column                    = keys.column(key);
    std::vector<std::uint32_t> const* candidates = key == 0 ? nullptr : &pairs;
    bool const keep_ties                         = key + 1 < keys.num_columns();
    ties.clear();
    std::size_t const found =
      !is_fixed_width(column.type())
        ? compare_pairs<std::string_view>(
            column, orders[key], candidates, begin, end, rows, keep_ties, ties)
        : visit_fixed_width(column.type(), [&]<typename T>() {
            return compare_pairs<T>(
              column, orders[key], candidates, begin, end, rows, keep_ties, ties);
          });
    first = std::min(first, found);
    // Ties after the first descent cannot change the answer.
    while (!ties.empty() && ties.back() >= first) {
      ties.pop_back();
    }
    if (ties.empty()) {
      break;
    }
    std::swap(pairs, ties);
  }
  return first;
}

/**
 * @return the first row of `keys` (from 1) that sorts before the row ahead of it, or
 * `keys.num_rows()` when every row is in order. The pairs of adjacent rows are cut into parts
 * checked on the worker pool (each part's first pair reads the last row of the part before); the
 * answer is the smallest part's answer.
 */
std::size_t first_descent(table_view const& keys, sort_order const& orders) {
  std::size_t const rows = keys.num_rows();
  if (rows < 2) {
    return rows;
  }
  SPILLWAY_EXPECTS_LE(rows,
                      std::size_t{UINT32_MAX},
                      "order check: a batch has too many rows to check",
                      invalid_argument);
  std::size_t const pairs = rows - 1;
  std::size_t const parts = parallel_parts(pairs, MIN_PAIRS_PER_PART);
  if (parts == 1) {
    return first_descent_in(keys, orders, 1, rows);
  }
  std::vector<std::size_t> firsts(parts, rows);
  parallel_for(parts, [&](std::size_t part) {
    std::size_t const begin = 1 + part * pairs / parts;
    std::size_t const end   = 1 + (part + 1) * pairs / parts;
    firsts[part]            = first_descent_in(keys, orders, begin, end);
  });
  return *std::min_element(firsts.begin(), firsts.end());
}

}  // namespace

order_checker::order_checker(std::vector<std::size_t> key_columns,
                             sort_order orders,
                             resource_ref host)
  : key_columns_(std::move(key_columns)), orders_(std::move(orders)), host_(host) {
  if (orders_.empty()) {
    orders_.resize(key_columns_.size());
  }
  SPILLWAY_EXPECTS_EQ(
    orders_.size(), key_columns_.size(), "order check: one order per key column", invalid_argument);
}

std::optional<std::size_t> order_checker::next(table_view const& batch, stream_view stream) {
  std::size_t const rows = batch.num_rows();
  if (rows == 0) {
    return std::nullopt;
  }
  for (std::size_t const key : key_columns_) {
    SPILLWAY_EXPECTS_LT(
      key, batch.num_columns(), "order check: key column out of range", invalid_argument);
  }
  table_view const keys = batch.select(key_columns_);
  if (last_row_ != nullptr) {
    for (std::size_t key = 0; key < keys.num_columns(); ++key) {
      SPILLWAY_EXPECTS(keys.column(key).type() == last_row_->view().column(key).type(),
                       "order check: key " + std::to_string(key) + " is " +
                         to_string(keys.column(key).type()) + " in this batch but " +
                         to_string(last_row_->view().column(key).type()) + " before",
                       invalid_argument);
    }
  }
  std::size_t const first_row = rows_;
  rows_ += rows;
  bool const on_device = detail::cuda::on_device(keys);
  // The boundary: the batch's first row against the last row before it.
  if (last_row_ != nullptr) {
    auto const head        = on_device ? detail::copy(slice(keys, 0, 1), stream, host_) : nullptr;
    table_view const first = head != nullptr ? head->view() : keys;
    if (compare_rows(last_row_->view(), 0, first, 0, orders_) > 0) {
      last_row_ = detail::copy(slice(keys, rows - 1, rows), stream, host_);
      return first_row;
    }
  }
  last_row_ = detail::copy(slice(keys, rows - 1, rows), stream, host_);
  if (on_device) {
    // On the device the batch is in order or not; the row is found on the host.
    if (is_sorted(keys, orders_, stream)) {
      return std::nullopt;
    }
    auto const host_keys  = detail::copy(keys, stream, host_);
    std::size_t const row = first_descent(host_keys->view(), orders_);
    if (row == rows) {
      return std::nullopt;  // the values, compared on the host, are in order
    }
    return first_row + row;
  }
  std::size_t const row = first_descent(keys, orders_);
  if (row == rows) {
    return std::nullopt;
  }
  return first_row + row;
}

}  // namespace spillway
