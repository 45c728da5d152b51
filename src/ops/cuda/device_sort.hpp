/**
 * @file device_sort.hpp
 * @brief The ops layer's CUDA sort: `sorted_order` for key columns in CUDA device memory. Private
 * to the library; the header has no CUDA types.
 *
 * Least-significant-digit radix sort over the key columns with CUB's onesweep radix sort: from the
 * last key column to the first, each column contributes passes (a string: its length, then its
 * 8-byte chunks from the last to the first; then a 1-bit null pass when it has nulls), and each
 * pass encodes the column's order-preserving image (the CPU's normalized key, right-aligned) for
 * the rows in the current order and sorts (image, row) pairs over only the bits the pass uses.
 * Radix sort is stable, so every pass keeps the order of the ones before it: equal keys end in
 * input order, and the result equals the CPU's stable sort row for row.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <memory>

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
#endif

}  // namespace spillway::detail::cuda
