/**
 * @file sample.hpp
 * @brief Uniform random row samples and the splitter rows that cut a sorted table into k
 * nearly equal ranges: the first step of a range partition or a distributed sort.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace spillway {

/**
 * @brief `min(num_samples, input.num_rows())` distinct rows of `input` chosen uniformly at
 * random (every subset of that size is equally likely), in input order.
 * @param input the table to sample
 * @param num_samples how many rows to pick
 * @param seed the random seed; equal seeds give equal samples
 * @param stream the stream to run on
 * @param mrs the sample from `mrs.output()`; the row map from `mrs.temporary()`
 * @note Selection sampling (Knuth's algorithm S): one pass over the row count, deterministic
 * across platforms for a given seed (`std::mt19937_64` and integer arithmetic only).
 */
std::unique_ptr<table> sample(table_view const& input,
                              std::size_t num_samples,
                              std::uint64_t seed,
                              stream_view stream   = default_stream(),
                              memory_resources mrs = current_resources());

/**
 * @brief The `k - 1` rows of `sorted` that cut it into `k` ranges of nearly equal size.
 *
 * Splitter `i` (for `i` in `1 .. k-1`) is row `i * n / k` of `sorted` (`n` rows), so range `i`
 * holds rows `[(i * n) / k, ((i + 1) * n) / k)`: sizes differ by at most one row. Range
 * partitioning by `lower_bound` of the splitters reproduces these ranges when keys are distinct;
 * with repeated keys, equal keys stay in one range.
 * @param sorted rows sorted by the partitioning keys (typically a sorted sample's key columns)
 * @param k the number of ranges, at least 1
 * @param stream the stream to run on
 * @param mrs the splitters from `mrs.output()`; the row map from `mrs.temporary()`
 * @return a table with the columns of `sorted` and `k - 1` rows, or no rows when `sorted` is
 * empty
 * @throws spillway::invalid_argument when `k` is 0
 */
std::unique_ptr<table> quantile_splitters(table_view const& sorted,
                                          std::size_t k,
                                          stream_view stream   = default_stream(),
                                          memory_resources mrs = current_resources());

namespace detail {
/** @brief `sample` without defaults. */
std::unique_ptr<table> sample(table_view const& input,
                              std::size_t num_samples,
                              std::uint64_t seed,
                              stream_view stream,
                              memory_resources mrs);
/** @brief `quantile_splitters` without defaults. */
std::unique_ptr<table> quantile_splitters(table_view const& sorted,
                                          std::size_t k,
                                          stream_view stream,
                                          memory_resources mrs);
}  // namespace detail

}  // namespace spillway
