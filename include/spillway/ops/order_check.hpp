/**
 * @file order_check.hpp
 * @brief Checks that rows arriving in batches are in key order, within each batch and across
 * the boundaries between batches, by plain value comparisons that share no code with the sort's
 * key encoding, radix passes or row comparator: what the out-of-core sort checks of its own
 * output as it hands it out, and what `spillway verify` checks of a dataset.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <vector>

namespace spillway {

/**
 * @brief Follows a stream of batches and finds the first row that sorts before the row ahead of
 * it.
 *
 * The order is that of the sort: per key, values ascending or descending, nulls first or last
 * whatever the direction (`null_order::BEFORE` puts them first); floating-point NaN after every
 * number (+inf included) in ascending order, -0.0 equal to +0.0; strings by their bytes, unsigned.
 * Each key column is compared with a loop typed for its values (the last key, without nulls,
 * in blocks of pairs without a branch per pair), and a large batch is cut into parts checked on
 * the worker pool, so a check costs a fraction of the sort it follows.
 *
 * Batches in host memory are compared there. A batch in CUDA device memory is checked with
 * `is_sorted` on the device, and its first and last rows are copied to `host` for the boundaries.
 *
 * @note Not thread-safe: one checker per stream of batches. It keeps a copy of the last row of
 * the last non-empty batch, in `host`.
 */
class order_checker {
 public:
  /**
   * @param key_columns the key columns' indices in each batch, most significant first
   * @param orders one per key column, or empty for all ascending with nulls first
   * @param host where the boundary rows are kept
   * @throws invalid_argument when `orders` is neither empty nor one per key column
   */
  order_checker(std::vector<std::size_t> key_columns, sort_order orders, resource_ref host);

  /**
   * @brief Checks `batch`, the next batch of the stream, against itself and the batch before.
   * @return the stream's row number (counting every row of every batch checked, from 0) of the
   * first row that sorts before the row ahead of it, or nothing when `batch` is in order; the
   * rows checked so far then include all of `batch`
   * @throws invalid_argument when a key column is out of range or its type differs from the
   * earlier batches'
   */
  [[nodiscard]] std::optional<std::size_t> next(table_view const& batch, stream_view stream);

  /** @return the rows of every batch checked so far */
  [[nodiscard]] std::size_t rows_checked() const noexcept { return rows_; }

 private:
  std::vector<std::size_t> key_columns_;
  sort_order orders_;
  resource_ref host_;
  std::size_t rows_ = 0;
  std::unique_ptr<table> last_row_;  ///< the key columns of the last row checked
};

}  // namespace spillway
