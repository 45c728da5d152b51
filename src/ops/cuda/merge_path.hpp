/**
 * @file merge_path.hpp
 * @brief The device merge's logic as plain functions, for its kernel and for the host tests that
 * check it against stable merges on the CPU. Private to the ops layer.
 *
 * Merge path (Odeh, Green, Mwassi, Shmueli and Birk, "Merge Path - Parallel Merging Made Simple",
 * 2012): element `d` of the merge of two sorted runs comes after exactly `i` elements of the first
 * run and `d - i` of the second, and `i` is found by a binary search along that diagonal, so every
 * thread merges a tile of the output on its own, without reading what the others merge.
 *
 * k runs are merged in rounds of pairs: round after round, runs 2p and 2p + 1 become one, until
 * one is left (ceil(log2 k) rounds). Ties go to the first run of a pair, which holds the lower
 * inputs: the result is the stable merge, equal inputs in input order, each in its own order.
 */
#pragma once

#include "ops/cuda/radix_passes.hpp"  // SPILLWAY_HOST_DEVICE

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway::detail::cuda {

/// Output elements one thread of a merge round merges.
inline constexpr std::size_t MERGE_SHARE = 8;

/**
 * @return the last of `runs` runs (run r starts at `starts[r]`, starts ascending) that starts at
 * or before `position`: the run holding it, empty runs that share its start skipped
 */
SPILLWAY_HOST_DEVICE inline std::size_t run_at(std::uint64_t const* starts,
                                               std::size_t runs,
                                               std::uint64_t position) {
  std::size_t low  = 0;
  std::size_t high = runs;
  while (high - low > 1) {
    std::size_t const middle = (low + high) / 2;
    if (starts[middle] <= position) {
      low = middle;
    } else {
      high = middle;
    }
  }
  return low;
}

/**
 * @return how many of the first `diagonal` elements of the stable merge of sorted runs `a` (of
 * `a_size` elements) and `b` (of `b_size`) come from `a`
 * @param a_first `a_first(i, j)` is true when a[i] goes before b[j], ties included
 */
template <typename AFirst>
SPILLWAY_HOST_DEVICE std::size_t merge_path_split(std::size_t diagonal,
                                                  std::size_t a_size,
                                                  std::size_t b_size,
                                                  AFirst const& a_first) {
  std::size_t low  = diagonal > b_size ? diagonal - b_size : 0;
  std::size_t high = diagonal < a_size ? diagonal : a_size;
  while (low < high) {
    std::size_t const middle = low + (high - low) / 2;
    // middle < high <= diagonal and middle >= diagonal - b_size: b[diagonal - 1 - middle] exists.
    if (a_first(middle, diagonal - 1 - middle)) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  return low;
}

/**
 * @brief Element `position` in [begin, end) of the stable merge of `a` and `b`, one after another:
 * `emit(position, from_a, index)` says it is a[index] (`from_a`) or b[index].
 */
template <typename AFirst, typename Emit>
SPILLWAY_HOST_DEVICE void merge_path_tile(std::size_t begin,
                                          std::size_t end,
                                          std::size_t a_size,
                                          std::size_t b_size,
                                          AFirst const& a_first,
                                          Emit const& emit) {
  std::size_t i = merge_path_split(begin, a_size, b_size, a_first);
  std::size_t j = begin - i;
  for (std::size_t position = begin; position < end; ++position) {
    if (j >= b_size || (i < a_size && a_first(i, j))) {
      emit(position, true, i);
      ++i;
    } else {
      emit(position, false, j);
      ++j;
    }
  }
}

/**
 * @brief One thread's share of a merge round: elements [begin, end) of `out`, where consecutive
 * runs of `in` (run r is [bounds[r], bounds[r + 1]), `runs` of them) are merged in pairs, each
 * pair into the same place in `out`; a last run without a partner is copied. A share may span
 * pairs.
 * @param before_or_tie `before_or_tie(x, y)` is true when element x goes before element y or ties
 * with it
 */
template <typename T, typename BeforeOrTie>
SPILLWAY_HOST_DEVICE void merge_round_share(T* out,
                                            T const* in,
                                            std::uint64_t const* bounds,
                                            std::size_t runs,
                                            std::size_t begin,
                                            std::size_t end,
                                            BeforeOrTie const& before_or_tie) {
  std::size_t position = begin;
  while (position < end) {
    std::size_t const pair      = run_at(bounds, runs, position) / 2;
    std::size_t const a_begin   = bounds[2 * pair];
    std::size_t const a_end     = bounds[2 * pair + 1 < runs ? 2 * pair + 1 : runs];
    std::size_t const b_end     = bounds[2 * pair + 2 < runs ? 2 * pair + 2 : runs];
    std::size_t const share_end = end < b_end ? end : b_end;
    T const* const a            = in + a_begin;
    T const* const b            = in + a_end;
    auto const a_first = [&](std::size_t i, std::size_t j) { return before_or_tie(a[i], b[j]); };
    merge_path_tile(position - a_begin,
                    share_end - a_begin,
                    a_end - a_begin,
                    b_end - a_end,
                    a_first,
                    [&](std::size_t at, bool from_a, std::size_t index) {
                      out[a_begin + at] = from_a ? a[index] : b[index];
                    });
    position = share_end;
  }
}

/** @return the run bounds after a merge round over `bounds` (runs + 1 entries): pairs become one */
inline std::vector<std::uint64_t> merged_run_bounds(std::vector<std::uint64_t> const& bounds) {
  std::vector<std::uint64_t> next;
  std::size_t const runs = bounds.size() - 1;
  for (std::size_t run = 0; run < runs; run += 2) {
    next.push_back(bounds[run]);
  }
  next.push_back(bounds.back());
  return next;
}

/** @return the merge rounds that leave one run of `runs` */
inline std::size_t merge_rounds(std::size_t runs) {
  std::size_t rounds = 0;
  for (std::size_t left = runs; left > 1; left = (left + 1) / 2) {
    ++rounds;
  }
  return rounds;
}

}  // namespace spillway::detail::cuda
