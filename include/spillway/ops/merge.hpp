/**
 * @file merge.hpp
 * @brief A k-way merge of tables that are each sorted by the same keys into one sorted table.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <memory>
#include <span>
#include <vector>

namespace spillway {

/**
 * @brief Merges `inputs`, each sorted by its columns `key_columns` under `orders`, into one
 * sorted table.
 *
 * A loser tree over one cursor per input picks the next row with `ceil(log2(k))` comparisons.
 * It compares one encoded word per row for a single null-free fixed-width key, and otherwise
 * normalized-key prefixes (as the sort does), falling back to the full row comparison only where
 * prefixes tie and do not hold the whole key. A merge of many rows runs on the worker pool: on a
 * pool of more than two threads it is cut by splitter rows into one part per thread (each part
 * at least 2^15 rows), each merging its slice of every input into its own range of the output;
 * otherwise one tree writes the first half of the output from the front and another the second
 * half from the back. The columns are gathered on the pool. The merge is stable: rows with equal
 * keys come in input order (every row of `inputs[0]` before those of `inputs[1]`, ...), and within
 * one input in row order, so merging the sorted pieces of a table equals a stable sort of the
 * whole.
 * @param inputs the sorted tables; same column count and types; any may be empty
 * @param key_columns indices of the key columns in every input, most significant first; none:
 * every row ties, so the merge is the inputs one after the other
 * @param orders one entry per key column, or empty for all ASCENDING, nulls BEFORE
 * @param stream the stream to run on
 * @param mrs the merged table from `mrs.output()`; the merge map from `mrs.temporary()`
 * @return a table with the rows of every input; no columns when `inputs` is empty
 * @throws spillway::invalid_argument when the inputs differ in columns or types, a key column
 * index is out of range, or `orders` does not match `key_columns`
 * @note An input that is not sorted gives a permutation of the rows in an unspecified order.
 * @note Call it as `spillway::merge` when passing a `std::vector`: unqualified, argument-dependent
 * lookup also finds `std::merge`.
 */
std::unique_ptr<table> merge(std::span<table_view const> inputs,
                             std::vector<std::size_t> const& key_columns,
                             sort_order const& orders = {},
                             stream_view stream       = default_stream(),
                             memory_resources mrs     = current_resources());

namespace detail {
/** @brief `merge` without defaults: internals always pass their resources. */
std::unique_ptr<table> merge(std::span<table_view const> inputs,
                             std::vector<std::size_t> const& key_columns,
                             sort_order const& orders,
                             stream_view stream,
                             memory_resources mrs);

/**
 * @brief The merge order of `inputs` (each sorted by `key_columns` under `orders`) without
 * gathering it: one source id per output row, `(input << SOURCE_ROW_BITS) | row` (sort.hpp),
 * rows ordered by key, then input, then row. Gathering the ids in order gives `merge`'s rows;
 * a caller can gather parts of them into separate tables.
 * @return a UINT64 column from `mrs.output()`
 * @throws spillway::invalid_argument as `merge`, or for 2^24 inputs or an input of 2^40 rows
 */
std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs);

/**
 * @brief `merge_order` that runs on the pool from `min_rows_per_part` rows per thread (2^15 in
 * `merge_order`), so that a small merge is cut into as many parts as a large one: the same
 * order for every value. Meant for tests.
 * @throws spillway::invalid_argument as `merge_order`, or when `min_rows_per_part` is 0
 */
std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs,
                                    std::size_t min_rows_per_part);
}  // namespace detail

}  // namespace spillway
