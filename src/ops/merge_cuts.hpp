/**
 * @file merge_cuts.hpp
 * @brief How a k-way merge runs on the worker pool: in two halves merged from both ends, or cut
 * by splitter rows into as many parts as the pool has threads. Private to the ops layer.
 */
#pragma once

#include "ops/row_comparator.hpp"

#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <optional>
#include <span>
#include <vector>

namespace spillway::detail {

/// Below this many output rows a merge runs on one thread; no part of a merge cut for the pool
/// has fewer on average.
inline constexpr std::size_t PARALLEL_MERGE_MIN_ROWS = std::size_t{1} << 15;

/**
 * @brief A merge cut into parts that run side by side on the worker pool: part `part` merges
 * rows `[begin(part, input), end(part, input))` of every input into its own contiguous range of
 * the output, which starts at `output_begin(part)`. The parts cut every input into consecutive
 * slices, so together they take every row once.
 */
class merge_cuts {
 public:
  /// `parts` parts of `keys`: every row in the last one until `set_begin` moves the cuts.
  merge_cuts(std::span<table_view const> keys, std::size_t parts);

  /** @return the parts */
  [[nodiscard]] std::size_t parts() const noexcept { return parts_; }
  /** @return the first row of `input` that part `part` takes */
  [[nodiscard]] std::size_t begin(std::size_t part, std::size_t input) const noexcept {
    return bounds_[part * inputs_ + input];
  }
  /** @return one past the last row of `input` that part `part` takes */
  [[nodiscard]] std::size_t end(std::size_t part, std::size_t input) const noexcept {
    return begin(part + 1, input);
  }
  /** @brief Sets where part `part` (from 1) starts in `input`, and so where the one before ends. */
  void set_begin(std::size_t part, std::size_t input, std::size_t row) noexcept {
    bounds_[part * inputs_ + input] = row;
  }
  /** @return the first output row of part `part` */
  [[nodiscard]] std::size_t output_begin(std::size_t part) const noexcept;
  /** @return whether every input's slices follow one another (none ends before it begins) */
  [[nodiscard]] bool consecutive() const noexcept;

 private:
  std::size_t parts_;
  std::size_t inputs_;
  std::vector<std::size_t> bounds_;  ///< (parts + 1) rows of one bound per input
};

/**
 * @brief Cuts a merge of the `rows` rows of `keys` (each sorted under `comparator`) into `parts`
 * parts of about equal size, in the merge's order: key, then input, then row.
 *
 * The splitters are rows of the inputs: a sample every `gap` rows of every input (each standing
 * for the `gap` rows from it), sorted in the merge's order, and for each cut the first sample
 * that the samples before it stand for `part * rows / parts` rows. Sampling every input, not the
 * largest alone, keeps the parts even when the inputs cover different key ranges (the runs of
 * presorted data), where the largest input's rows would put every cut inside its own range.
 * A cut misses its share by less than `gap` rows per input, and these misses mostly cancel
 * between neighbouring cuts, so the sample count grows with the square root of the inputs. Each
 * splitter then cuts every input exactly, by binary search (in parallel on the pool); sorted
 * splitters give cuts that never move back in sorted inputs, so the parts together are the
 * whole merge, row for row.
 * @param min_rows_per_part bounds the samples: at most 128 per this many rows
 * @return the cuts; one part with every row when an unsorted input made a cut move back
 */
[[nodiscard]] merge_cuts cut_merge(std::span<table_view const> keys,
                                   std::size_t rows,
                                   row_comparator const& comparator,
                                   std::size_t parts,
                                   std::size_t min_rows_per_part = PARALLEL_MERGE_MIN_ROWS);

/** @brief How a merge runs on the pool. */
struct merge_plan {
  /// Two trees, one writing the front half of the output forward and one the back half from the
  /// end, on two threads (on one after the other on a pool of one). Otherwise one tree, or
  /// `cuts` when set.
  bool halves = false;
  /// More than two parts, each a forward tree over its slices (`cut_merge`).
  std::optional<merge_cuts> cuts;
};

/**
 * @brief Plans a merge of the `rows` rows of `keys`: cut for the pool when it has more than two
 * threads and every part gets `min_rows_per_part` rows on average, else in halves from
 * `min_rows_per_part` rows (as on a pool of two threads), else on one tree.
 */
[[nodiscard]] merge_plan plan_merge(std::span<table_view const> keys,
                                    std::size_t rows,
                                    row_comparator const& comparator,
                                    std::size_t min_rows_per_part);

}  // namespace spillway::detail
