/**
 * @file sort.hpp
 * @brief The permutation that sorts a table by its key columns, and the sorted table itself.
 *
 * The CPU implementation builds a binary-comparable normalized key prefix per row (see
 * normalized_key.hpp), radix sorts (prefix, row) pairs, and resolves rows whose prefixes are
 * equal but whose keys may differ beyond the prefix with a full row comparison. Inputs of more
 * than 2 MiB of (prefix, row) records are cut into 256-1024 buckets (about 512 KiB each, where
 * 1024 suffice) by the 64 prefix bits from the first one that varies, spread over the range a
 * sample of 1024 rows shows, one part per worker pool thread (`worker_threads()`) counting and
 * scattering its share of the rows (fixed-width keys are encoded again for the scatter rather
 * than written and read back); each part then sorts the buckets of about its share of the rows
 * in cache, by LSD passes or further MSD passes, and writes their rows in order, so no merge
 * follows. Inputs that look all equal, sorted or heavy on one bucket, and smaller ones, are
 * radix sorted in two halves in two parts (from `PARALLEL_SORT_MIN_ROWS` rows) and merged in one
 * part per pool thread, each starting where the merge path crosses its first output row. `sort`
 * gathers the rows in parts on the pool. Stable sorts give the same rows for any pool size.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <utility>
#include <vector>

namespace spillway {

/**
 * @brief Inputs with at least this many rows are sorted in parts on the worker pool (each part
 * of at least half of it).
 */
inline constexpr std::size_t PARALLEL_SORT_MIN_ROWS = std::size_t{1} << 16;

/**
 * @brief The row indices of `keys` in sorted order.
 *
 * Row `i` of the result is the index of the row of `keys` that comes `i`-th in the order given
 * by `orders`. A table without key columns is already sorted: the result is `0, 1, ...`.
 * @param keys the key columns, most significant first; every type is supported
 * @param orders one entry per column of `keys`, or empty for all ASCENDING, nulls BEFORE
 * @param stability STABLE keeps rows with equal keys in input order
 * @param stream the stream to run on
 * @param mrs the result from `mrs.output()`; normalized keys and indices from
 * `mrs.temporary()`, freed before returning
 * @return a UINT64 column of `keys.num_rows()` rows without nulls
 * @throws spillway::invalid_argument when `orders` is neither empty nor one per key column
 * @throws spillway::out_of_memory from either resource
 * @note Uses up to two threads; synchronous on the CPU backend.
 */
std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders = {},
                                     sort_stability stability = sort_stability::UNSTABLE,
                                     stream_view stream       = default_stream(),
                                     memory_resources mrs     = current_resources());

/**
 * @brief The rows of `values` reordered by sorting `keys`: `gather(values, sorted_order(keys))`.
 * @param values the columns to reorder
 * @param keys the key columns; as many rows as `values` (they may be columns of `values`)
 * @param orders one entry per column of `keys`, or empty for all ASCENDING, nulls BEFORE
 * @param stability STABLE keeps rows with equal keys in input order
 * @param stream the stream to run on
 * @param mrs the sorted table from `mrs.output()`; the order and the keys from
 * `mrs.temporary()`, freed before returning
 * @throws spillway::invalid_argument when the row counts differ or `orders` does not match
 * @throws spillway::out_of_memory from either resource
 */
std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders = {},
                            sort_stability stability = sort_stability::UNSTABLE,
                            stream_view stream       = default_stream(),
                            memory_resources mrs     = current_resources());

/**
 * @brief Whether the rows of `keys` are already in the order `orders` gives: no row comes
 * strictly before the row above it. Then `sorted_order` is `0, 1, ...` in either stability.
 *
 * One pass that stops at the first row out of order, so unsorted inputs pay almost nothing. A
 * single fixed-width key column without nulls is compared in blocks without branches.
 * @param keys the key columns, most significant first; every type is supported
 * @param orders one entry per column of `keys`, or empty for all ASCENDING, nulls BEFORE
 * @param stream where keys on a CUDA device are checked (the CPU ignores it)
 * @throws spillway::invalid_argument when `orders` is neither empty nor one per key column
 * @note Allocates nothing on the CPU.
 */
bool is_sorted(table_view const& keys,
               sort_order const& orders = {},
               stream_view stream       = default_stream());

namespace detail {
/**
 * @brief `sorted_order` without defaults: internals always pass their resources.
 * @param check_order false when the caller already found the keys not in order (`is_sorted`),
 * so that they are not scanned twice
 */
std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     sort_stability stability,
                                     stream_view stream,
                                     memory_resources mrs,
                                     bool check_order = true);

/** @brief Bits of a source id (`sorted_sources`) that hold the row; the input is above them. */
inline constexpr unsigned SOURCE_ROW_BITS = 40;

/**
 * @brief The rows of several key tables in one sorted order, as source ids
 * `(input << SOURCE_ROW_BITS) | row`: a stable sort of their concatenation (ties in input order,
 * then row order) without concatenating them. Uses both cores for large inputs.
 * @param keys key tables with the same column types; each under 2^40 rows, fewer than 2^24 tables
 * @param sorted_keys when not null: one entry per key column, set to that key column in sorted
 * order (from `mrs.output()`) when it is an 8-byte integer or timestamp column without nulls
 * that the prefix holds whole in a word of its own (the first key when it is one, a second after
 * such a first key, ...), decoded from the sorted prefixes instead of gathered;
 * the other entries null
 * @return a UINT64 column from `mrs.output()`; scratch (two records of prefix and id per row)
 * comes from `mrs.temporary()`
 * @throws spillway::invalid_argument unless the keys encode into a complete normalized-key prefix
 * (fixed-width columns of at most 24 bytes together with their null bytes), or for mismatched
 * tables
 */
std::unique_ptr<column> sorted_sources(std::span<table_view const> keys,
                                       sort_order const& orders,
                                       stream_view stream,
                                       memory_resources mrs,
                                       std::vector<std::unique_ptr<column>>* sorted_keys = nullptr);

/**
 * @brief Whether `sorted_key_values` sorts these tables: one key column, an 8-byte integer or
 * timestamp without nulls whose prefix gives it back, and one fixed-width value column of at
 * most 8 bytes without nulls, of the same rows, in every table.
 */
bool sorts_key_values(std::span<table_view const> keys,
                      sort_order const& orders,
                      std::span<column_view const> values);

/**
 * @brief The key column and the value column of several tables sorted together by the key,
 * stably (ties in table order, then row order), without concatenating them: each of the sort's
 * records carries its row's value instead of its source, so the values come out in order with
 * the keys (decoded from the sorted prefixes) and no gather follows. Uses both cores for large
 * inputs.
 * @return {sorted keys, sorted values}, from `mrs.output()`; scratch from `mrs.temporary()`
 * @throws spillway::invalid_argument unless `sorts_key_values`
 */
std::pair<std::unique_ptr<column>, std::unique_ptr<column>> sorted_key_values(
  std::span<table_view const> keys,
  sort_order const& orders,
  std::span<column_view const> values,
  stream_view stream,
  memory_resources mrs);

/** @brief `sort` without defaults. */
std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders,
                            sort_stability stability,
                            stream_view stream,
                            memory_resources mrs);
}  // namespace detail

}  // namespace spillway
