// The CUDA sort of key columns in device memory (see device_sort.hpp).
#include "memory/cuda/cuda_check.hpp"
#include "ops/cuda/device_ops.hpp"
#include "ops/cuda/radix_passes.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/memory/buffer.hpp>

#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_reduce.cuh>
#include <cuda_runtime.h>
#include <memory>
#include <string>
#include <vector>

namespace spillway::detail::cuda {
namespace {

using row_type = std::uint32_t;

/// Rows and images in device memory, double-buffered for CUB.
struct pass_buffers {
  cub::DoubleBuffer<std::uint64_t> images;
  cub::DoubleBuffer<row_type> rows;
  void* scratch             = nullptr;
  std::size_t scratch_bytes = 0;
};

/// images[i] = what row rows[i] sorts by in `pass`.
__global__ void encode_pass(std::uint64_t* images,
                            row_type const* rows,
                            std::size_t count,
                            radix_pass pass) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    images[i] = pass_image(pass, rows[i]);
  }
}

/// lengths[i] = bytes of string row i (0 for nulls), for the longest one.
__global__ void string_lengths(std::uint64_t* lengths,
                               std::size_t count,
                               std::int64_t const* offsets,
                               bitmask_type const* mask,
                               std::size_t offset) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    lengths[i] = valid_at(mask, offset + i)
                   ? static_cast<std::uint64_t>(offsets[offset + i + 1] - offsets[offset + i])
                   : 0;
  }
}

__global__ void iota(row_type* rows, std::size_t count) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    rows[i] = static_cast<row_type>(i);
  }
}

__global__ void widen(std::uint64_t* out, row_type const* rows, std::size_t count) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    out[i] = rows[i];
  }
}

/// Sorts the current (image, row) pairs stably by bits [0, bits) of the images.
void sort_pass(pass_buffers& buffers, std::size_t count, unsigned bits, stream_view stream) {
  check(cub::DeviceRadixSort::SortPairs(buffers.scratch,
                                        buffers.scratch_bytes,
                                        buffers.images,
                                        buffers.rows,
                                        static_cast<std::int64_t>(count),
                                        0,
                                        static_cast<int>(bits),
                                        native(stream)),
        "cub::DeviceRadixSort::SortPairs");
}

std::uint64_t longest_string(pass_buffers& buffers,
                             column_view const& key,
                             std::size_t count,
                             stream_view stream,
                             resource_ref temporary) {
  std::uint64_t* lengths = buffers.images.Alternate();
  string_lengths<<<grid_for(count), BLOCK, 0, native(stream)>>>(
    lengths, count, key.offsets(), key.has_nulls() ? key.null_mask() : nullptr, key.offset());
  check_launch("string_lengths");
  buffer result{sizeof(std::uint64_t), stream, temporary};
  auto* longest             = static_cast<std::uint64_t*>(result.data());
  std::size_t scratch_bytes = 0;
  check(
    cub::DeviceReduce::Max(
      nullptr, scratch_bytes, lengths, longest, static_cast<std::int64_t>(count), native(stream)),
    "cub::DeviceReduce::Max");
  buffer scratch{scratch_bytes, stream, temporary};
  check(cub::DeviceReduce::Max(scratch.data(),
                               scratch_bytes,
                               lengths,
                               longest,
                               static_cast<std::int64_t>(count),
                               native(stream)),
        "cub::DeviceReduce::Max");
  std::uint64_t value = 0;
  check(cudaMemcpyAsync(&value, longest, sizeof(value), cudaMemcpyDeviceToHost, native(stream)),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return value;
}

std::unique_ptr<column> sorted_order_on_device(table_view const& keys,
                                               sort_order const& orders,
                                               stream_view stream,
                                               memory_resources mrs) {
  std::size_t const count = keys.num_rows();
  SPILLWAY_EXPECTS(
    count < (std::uint64_t{1} << 32),
    "sorted_order on the CUDA device takes fewer than 2^32 rows, not " + std::to_string(count),
    invalid_argument);
  for (std::size_t c = 0; c < keys.num_columns(); ++c) {
    SPILLWAY_EXPECTS(count == 0 || on_device(keys.column(c)),
                     "sorted_order: key column " + std::to_string(c) +
                       " is not in CUDA device memory while others are; a table lives in one "
                       "place",
                     invalid_argument);
  }
  resource_ref const temporary = mrs.temporary();
  if (count == 0) {
    return make_fixed_width_column(
      data_type{type_id::UINT64}, 0, mask_state::UNALLOCATED, stream, mrs.output());
  }
  // The images go before the result is allocated: 24 bytes a row (and CUB's scratch) at most,
  // then 16.
  auto images = std::make_unique<buffer>(2 * count * sizeof(std::uint64_t), stream, temporary);
  buffer rows{2 * count * sizeof(row_type), stream, temporary};
  auto* image_words = static_cast<std::uint64_t*>(images->data());
  auto* row_words   = static_cast<row_type*>(rows.data());
  pass_buffers buffers;
  buffers.images = cub::DoubleBuffer<std::uint64_t>{image_words, image_words + count};
  buffers.rows   = cub::DoubleBuffer<row_type>{row_words, row_words + count};
  iota<<<grid_for(count), BLOCK, 0, native(stream)>>>(buffers.rows.Current(), count);
  check_launch("iota");
  check(cub::DeviceRadixSort::SortPairs(nullptr,
                                        buffers.scratch_bytes,
                                        buffers.images,
                                        buffers.rows,
                                        static_cast<std::int64_t>(count),
                                        0,
                                        64,
                                        native(stream)),
        "cub::DeviceRadixSort::SortPairs");
  auto scratch    = std::make_unique<buffer>(buffers.scratch_bytes, stream, temporary);
  buffers.scratch = scratch->data();
  std::vector<std::uint64_t> longest(keys.num_columns(), 0);
  for (std::size_t c = 0; c < keys.num_columns(); ++c) {
    if (!is_fixed_width(keys.column(c).type())) {
      longest[c] = longest_string(buffers, keys.column(c), count, stream, temporary);
    }
  }
  for (radix_pass const& pass : plan_passes(keys, orders, longest)) {
    encode_pass<<<grid_for(count), BLOCK, 0, native(stream)>>>(
      buffers.images.Current(), buffers.rows.Current(), count, pass);
    check_launch("encode_pass");
    sort_pass(buffers, count, pass.bits, stream);
  }
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");  // any resource may free
  scratch.reset();
  images.reset();
  auto result = make_fixed_width_column(
    data_type{type_id::UINT64}, count, mask_state::UNALLOCATED, stream, mrs.output());
  expect_device_output(*result, "sorted_order");
  widen<<<grid_for(count), BLOCK, 0, native(stream)>>>(
    result->mutable_data<std::uint64_t>(), buffers.rows.Current(), count);
  check_launch("widen");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return result;
}

}  // namespace

std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     stream_view stream,
                                     memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return sorted_order_on_device(keys, orders, stream, device_mrs);
  });
}

}  // namespace spillway::detail::cuda
