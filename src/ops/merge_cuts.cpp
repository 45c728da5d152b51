#include "ops/merge_cuts.hpp"

#include <spillway/core/worker_pool.hpp>
#include <spillway/ops/sort.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace spillway::detail {
namespace {

/// Samples per part, times the square root of the input count, that `cut_merge` picks
/// splitters from (see there).
constexpr std::size_t SPLITTER_SAMPLES_PER_PART = 16;
/// At most this many splitter samples per part's least rows (2^15 rows: one sample per 256): the
/// samples are sorted on the caller, before the parts run, so they stay a small share of the
/// merge's comparisons.
constexpr std::size_t MOST_SAMPLES_PER_MIN_PART = 128;

/// A row as a source id, `(input << SOURCE_ROW_BITS) | row`: source ids order as the merge
/// orders rows with equal keys.
using merge_source = std::uint64_t;

merge_source source_of(std::size_t input, std::size_t row) noexcept {
  return (static_cast<std::uint64_t>(input) << SOURCE_ROW_BITS) | static_cast<std::uint64_t>(row);
}
/// The input of source id `source`.
std::size_t input_of(merge_source source) noexcept {
  return static_cast<std::size_t>(source >> SOURCE_ROW_BITS);
}
/// The row of source id `source`.
std::size_t row_in_input(merge_source source) noexcept {
  return static_cast<std::size_t>(source & ((merge_source{1} << SOURCE_ROW_BITS) - 1));
}

/**
 * The rows of `input` that come before the row `splitter` (a source id) in the merge's order
 * (key, then input, then row), found by binary search: rows whose key is at most the splitter's
 * in an input before the splitter's, below it in an input after it.
 */
std::size_t rows_before(std::span<table_view const> keys,
                        row_comparator const& comparator,
                        std::size_t input,
                        merge_source splitter) {
  std::size_t const splitter_input = input_of(splitter);
  std::size_t const splitter_row   = row_in_input(splitter);
  if (input == splitter_input) {
    return splitter_row;
  }
  bool const ties_before = input < splitter_input;
  std::size_t low        = 0;
  std::size_t high       = keys[input].num_rows();
  while (low < high) {
    std::size_t const middle = low + (high - low) / 2;
    int const order = comparator.compare(keys[input], middle, keys[splitter_input], splitter_row);
    if (order < 0 || (order == 0 && ties_before)) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

}  // namespace

merge_cuts::merge_cuts(std::span<table_view const> keys, std::size_t parts)
  : parts_(parts), inputs_(keys.size()), bounds_((parts + 1) * keys.size(), 0) {
  for (std::size_t input = 0; input < inputs_; ++input) {
    bounds_[parts * inputs_ + input] = keys[input].num_rows();
  }
}

std::size_t merge_cuts::output_begin(std::size_t part) const noexcept {
  std::size_t rows = 0;
  for (std::size_t input = 0; input < inputs_; ++input) {
    rows += begin(part, input);
  }
  return rows;
}

bool merge_cuts::consecutive() const noexcept {
  for (std::size_t part = 0; part < parts_; ++part) {
    for (std::size_t input = 0; input < inputs_; ++input) {
      if (begin(part, input) > end(part, input)) {
        return false;
      }
    }
  }
  return true;
}

merge_cuts cut_merge(std::span<table_view const> keys,
                     std::size_t rows,
                     row_comparator const& comparator,
                     std::size_t parts,
                     std::size_t min_rows_per_part) {
  auto const root =
    static_cast<std::size_t>(std::ceil(std::sqrt(static_cast<double>(keys.size()))));
  std::size_t const wanted = std::max<std::size_t>(
    1,
    std::min(parts * SPLITTER_SAMPLES_PER_PART * root,
             rows / std::max<std::size_t>(1, min_rows_per_part / MOST_SAMPLES_PER_MIN_PART)));
  std::size_t const gap = std::max<std::size_t>(1, rows / wanted);
  std::vector<merge_source> samples;
  samples.reserve(wanted + keys.size());
  for (std::size_t input = 0; input < keys.size(); ++input) {
    for (std::size_t row = 0; row < keys[input].num_rows(); row += gap) {
      samples.push_back(source_of(input, row));
    }
  }
  // Source ids order by input, then row: the merge's order of rows with equal keys.
  std::sort(samples.begin(), samples.end(), [&](merge_source lhs, merge_source rhs) {
    int const order = comparator.compare(
      keys[input_of(lhs)], row_in_input(lhs), keys[input_of(rhs)], row_in_input(rhs));
    return order != 0 ? order < 0 : lhs < rhs;
  });
  std::vector<merge_source> splitters;
  std::size_t covered = 0;  // rows the samples so far stand for
  for (merge_source const sample : samples) {
    while (splitters.size() + 1 < parts && covered >= (splitters.size() + 1) * rows / parts) {
      splitters.push_back(sample);
    }
    covered += std::min(gap, keys[input_of(sample)].num_rows() - row_in_input(sample));
  }
  // Cuts without a splitter (none left) stay at the end of every input: empty parts.
  merge_cuts cuts{keys, parts};
  parallel_for(splitters.size(), [&](std::size_t splitter) {
    for (std::size_t input = 0; input < keys.size(); ++input) {
      cuts.set_begin(
        splitter + 1, input, rows_before(keys, comparator, input, splitters[splitter]));
    }
  });
  if (!cuts.consecutive()) {
    return merge_cuts{keys, 1};
  }
  return cuts;
}

merge_plan plan_merge(std::span<table_view const> keys,
                      std::size_t rows,
                      row_comparator const& comparator,
                      std::size_t min_rows_per_part) {
  std::size_t const parts = parallel_parts(rows, min_rows_per_part);
  if (parts > 2) {
    return merge_plan{false, cut_merge(keys, rows, comparator, parts, min_rows_per_part)};
  }
  return merge_plan{rows >= min_rows_per_part, std::nullopt};
}

}  // namespace spillway::detail
