/**
 * @file device_ops.hpp
 * @brief The ops layer's CUDA entry points, for key columns in CUDA device memory: the sort, the
 * bounds, the order check, the merge, row hashes and hash and range partitioning. Private to the
 * library; the header has no CUDA types. The public operators dispatch here when their tables live
 * on a CUDA device.
 *
 * The sort: least-significant-digit radix sort over the key columns with CUB's onesweep radix sort:
 * from the last key column to the first, each column contributes passes (a string: its length, then
 * its 8-byte chunks from the last to the first; then a 1-bit null pass when it has nulls), and each
 * pass encodes the column's order-preserving image (the CPU's normalized key, right-aligned) for
 * the rows in the current order and sorts (image, row) pairs over only the bits the pass uses.
 * Radix sort is stable, so every pass keeps the order of the ones before it: equal keys end in
 * input order, and the result equals the CPU's stable sort row for row.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace spillway::detail::cuda {

#if SPILLWAY_HAS_CUDA
/**
 * @brief `detail::sorted_order` for keys in CUDA device memory; always stable.
 * @param keys key columns, all on the device, fewer than 2^32 rows
 * @param orders one entry per key column (resolved)
 * @return a UINT64 column on `mrs.output()`; rows, images and CUB's scratch from
 * `mrs.temporary()` (about 24 bytes a row)
 * @throws spillway::invalid_argument for 2^32 rows or more
 */
std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     stream_view stream,
                                     memory_resources mrs);

/**
 * @brief `lower_bound` (`upper` false) or `upper_bound` of `needles` in `haystack`, the haystack
 * on the device, the needles anywhere (copied to the device's scratch when not there): one
 * thread per needle, a binary search with `compare_rows` (row_compare.hpp).
 * @return a UINT64 column on `mrs.output()`
 */
std::unique_ptr<column> bound(table_view const& haystack,
                              table_view const& needles,
                              sort_order const& orders,
                              bool upper,
                              stream_view stream,
                              memory_resources mrs);

/** @brief `is_sorted` of keys on the device: every adjacent pair compared, one flag back. */
bool is_sorted(table_view const& keys, sort_order const& orders, stream_view stream);

/**
 * @brief `detail::merge_order` of inputs on the device by merge path (merge_path.hpp): source ids
 * in input order, then ceil(log2 inputs) rounds that merge runs in pairs, each thread merging 8
 * output elements after a binary search along its diagonal; keys compared with `compare_rows`.
 * @return a UINT64 column on `mrs.output()`; one more of its size from `mrs.temporary()` while
 * the rounds run
 */
std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs);

/**
 * @brief `detail::sorted_sources` on the device: the key tables (not sorted) stacked and radix
 * sorted stably, the stacked rows mapped back to source ids.
 * @return a UINT64 column on `mrs.output()`
 */
std::unique_ptr<column> sorted_sources(std::span<table_view const> keys,
                                       sort_order const& orders,
                                       stream_view stream,
                                       memory_resources mrs);

/**
 * @brief `hash_rows` of keys on the device (row_hash.hpp: the same hashes as the CPU's), reduced
 * modulo `partitions` when it is not 0.
 */
std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed,
                                  std::uint64_t partitions,
                                  stream_view stream,
                                  memory_resources mrs);

/** @brief `hash_partition` on the device: row hashes, then a stable radix sort by partition. */
partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t partitions,
                                 std::uint64_t seed,
                                 stream_view stream,
                                 memory_resources mrs);

/**
 * @brief `range_partition` on the device: the splitters (copied to the device when on the host)
 * checked in order, each row's `upper_bound` among them, then a stable radix sort by partition.
 */
partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders,
                                  stream_view stream,
                                  memory_resources mrs);
#endif

}  // namespace spillway::detail::cuda
