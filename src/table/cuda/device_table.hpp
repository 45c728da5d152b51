/**
 * @file device_table.hpp
 * @brief The table layer's CUDA entry points: where a column lives, and copies and gathers of
 * columns in CUDA device memory. Private to the library; the header has no CUDA types, so CPU
 * sources call it and dispatch on `on_device`.
 *
 * The public operators (`copy`, `gather`, `sorted_order`, ...) keep their signatures: a table
 * whose buffers are memory of a CUDA device goes to these kernels, any other to the CPU code.
 * Emulated device memory is host memory and stays on the CPU path.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spillway::detail::cuda {

/** @return true when `view` has rows and its buffers are memory of a CUDA device */
bool on_device(column_view const& view) noexcept;

/** @return true when any column of `view` is `on_device` */
bool on_device(table_view const& view) noexcept;

/**
 * @return true when `result`'s buffers are memory of a CUDA device, even without rows (a STRING
 * column always has an offset)
 */
bool on_device(column const& result) noexcept;

/**
 * @brief Checks that `result`, just allocated from an operator's output resource for its rows
 * computed on the device, is device memory: kernels cannot write to the host. (An output
 * resource of a host kind is served by `with_device_output`; this catches emulated device
 * memory.)
 * @throws spillway::invalid_argument naming `what` otherwise
 */
void expect_device_output(column const& result, char const* what);

/**
 * @return the unset bits of `mask` in `[begin, end)`, reading them back first when the mask is
 * memory of a CUDA device (only the bytes that cover the range)
 */
std::size_t count_unset_bits_anywhere(bitmask_type const* mask, std::size_t begin, std::size_t end);

/**
 * @brief Runs a device operator whose output resource may give host memory (small results a
 * planner reads on the host, a sample kept on the host): `compute(mrs)` when the output resource
 * is of the DEVICE kind, else `compute` on the temporary resource with its result copied to
 * `mrs.output()`.
 */
template <typename Compute>
auto with_device_output(memory_resources mrs, stream_view stream, Compute&& compute) {
  if (mrs.output().kind() == memory_kind::DEVICE) {
    return compute(mrs);
  }
  SPILLWAY_EXPECTS(mrs.temporary().kind() == memory_kind::DEVICE,
                   "an operator on tables in CUDA device memory needs a device resource for its "
                   "output or its scratch; they are " +
                     std::string{to_string(mrs.output().kind())} + " and " +
                     std::string{to_string(mrs.temporary().kind())},
                   invalid_argument);
  auto const staged = compute(memory_resources{mrs.temporary(), mrs.temporary()});
  return detail::copy(staged->view(), stream, memory_resources{mrs.output(), mrs.output()});
}

/** @return `view.chars_size()` of a STRING column whose offsets may live on a CUDA device */
std::size_t chars_size(column_view const& view, stream_view stream);

#if SPILLWAY_HAS_CUDA
/** @brief Where `copy_column_to` writes a column laid out from row 0. */
struct column_target {
  void* data            = nullptr;  ///< values, or characters
  std::int64_t* offsets = nullptr;  ///< STRING offsets, rebased to 0 (`rows + 1`)
  bitmask_type* mask    = nullptr;  ///< the mask from bit 0; null to leave the mask out
};

/**
 * @brief Copies `input` to `target`, where either side may live on a CUDA device: values and
 * characters by cudaMemcpy, offsets rebased and masks realigned on the device or on the host side
 * of the copy. Bits past the last row in the mask's last byte are cleared.
 */
void copy_column_to(column_target const& target, column_view const& input, stream_view stream);

/**
 * @brief Fills `result` (allocated by `detail::copy` for `input`'s rows and characters, offset
 * 0) from `input`, where either lives on a CUDA device: values and characters by cudaMemcpy,
 * offsets rebased and masks realigned on the device or on the host side of the copy.
 */
void copy_into(column& result, column_view const& input, stream_view stream);

/**
 * @brief `detail::concatenate` of tables on a CUDA device (checked like the CPU's first).
 * @throws spillway::invalid_argument when a non-empty input column is not on the device
 */
std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   std::size_t total_rows,
                                   stream_view stream,
                                   memory_resources mrs);

/**
 * @brief Rows of several tables on a CUDA device gathered into pieces: piece `p` holds the rows
 * `ids[starts[p], starts[p + 1])`, an id being `(input << row_bits) | row`; the ids may live on
 * the host (copied to the device's scratch) or on the device. The multi-source gather of the
 * sort, the merge and the out-of-core sort (`gather_pieces_in_parallel` on the CPU).
 */
std::vector<std::unique_ptr<table>> gather_pieces(std::span<table_view const> inputs,
                                                  std::uint64_t const* ids,
                                                  std::span<std::size_t const> starts,
                                                  unsigned row_bits,
                                                  stream_view stream,
                                                  memory_resources mrs);

/** @brief Rows grouped by partition on the device: `map` lists them, partition by partition. */
struct partitioned_rows {
  buffer rows;                       ///< owns what `map` views
  column_view map;                   ///< UINT32 row indices on the device, grouped by partition
  std::vector<std::size_t> offsets;  ///< partition p is `map` rows [offsets[p], offsets[p + 1])
};

/**
 * @brief Groups the rows of a partition map (UINT8 to UINT64 ids below `partitions`, on the
 * device or the host) by partition, each partition in input order: a stable CUB radix sort of
 * (id, row) by the id's bits. Scratch and the result's rows from `temporary`.
 * @throws spillway::invalid_argument for 2^32 rows or more
 */
partitioned_rows partition_rows(column_view const& partition_map,
                                std::size_t partitions,
                                stream_view stream,
                                resource_ref temporary);

/** @brief `detail::gather` for a source on a CUDA device; the map may live anywhere. */
std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy,
                              stream_view stream,
                              memory_resources mrs);
#endif

}  // namespace spillway::detail::cuda
