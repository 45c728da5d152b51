// Copies and gathers of columns in CUDA device memory (see device_table.hpp).
#include "memory/cuda/cuda_check.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

#include <cstdint>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_scan.cuh>
#include <cuda_runtime.h>
#include <span>
#include <string>
#include <type_traits>
#include <vector>

namespace spillway::detail::cuda {
namespace {

/// Sentinel of an index that is negative or past the source.
constexpr std::uint64_t OUT_OF_BOUNDS = ~std::uint64_t{0};

/// Row bits of a single-source gather's ids: every index is its own id (source 0).
constexpr unsigned SINGLE_SOURCE_ROW_BITS = 63;

__global__ void rebase_offsets(std::int64_t* out,
                               std::int64_t const* in,
                               std::size_t first,
                               std::size_t count) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    out[i] = in[first + i] - in[first];
  }
}

/// Output byte `i` of a mask: bits `[8i, 8i + 8)` from bits `first + 8i ...` of `in`.
__global__ void shift_bits(std::uint8_t* out,
                           std::uint8_t const* in,
                           std::size_t first,
                           std::size_t rows) {
  std::size_t const byte = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (byte * 8 >= rows) {
    return;
  }
  std::uint8_t value = 0;
  for (unsigned bit = 0; bit < 8 && byte * 8 + bit < rows; ++bit) {
    std::size_t const source = first + byte * 8 + bit;
    value |= static_cast<std::uint8_t>(((in[source / 8] >> (source % 8)) & 1U) << bit);
  }
  out[byte] = value;
}

/// out[i] = in[first + i] - in[first] + base for i in [0, count): a piece's offsets placed at a
/// running character position.
__global__ void place_offsets(std::int64_t* out,
                              std::int64_t const* in,
                              std::size_t first,
                              std::size_t count,
                              std::int64_t base) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    out[i] = in[first + i] - in[first] + base;
  }
}

/// Sets the valid bits of `rows` rows (from bit `in_first` of `in`; every row when `in` is null)
/// at bit `out_first` of a zeroed mask, a 32-bit word at a time with atomicOr.
__global__ void place_bits(unsigned* out_words,
                           std::size_t out_first,
                           std::uint8_t const* in,
                           std::size_t in_first,
                           std::size_t rows) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= rows) {
    return;
  }
  std::size_t const source = in_first + i;
  bool const valid         = in == nullptr || ((in[source / 8] >> (source % 8)) & 1U) != 0;
  if (valid) {
    std::size_t const target = out_first + i;
    atomicOr(out_words + target / 32, 1U << (target % 32));
  }
}

/// Where one input's column is, for the gathers from several inputs.
struct source_column {
  void const* values          = nullptr;  ///< values, or characters
  std::int64_t const* offsets = nullptr;
  std::uint8_t const* mask    = nullptr;  ///< null when the input has no mask
  std::size_t offset          = 0;
};

/// The input and the row of source id `id`.
__device__ inline source_column const& source_of(source_column const* sources,
                                                 std::uint64_t id,
                                                 unsigned row_bits,
                                                 std::size_t& row) {
  row = static_cast<std::size_t>(id & ((std::uint64_t{1} << row_bits) - 1));
  return sources[id >> row_bits];
}

template <typename T>
__global__ void gather_sources_values(T* out,
                                      source_column const* sources,
                                      std::uint64_t const* ids,
                                      std::size_t rows,
                                      unsigned row_bits) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < rows) {
    std::uint64_t const id = ids[i];
    if (id == OUT_OF_BOUNDS) {
      out[i] = T{};
      return;
    }
    std::size_t row             = 0;
    source_column const& source = source_of(sources, id, row_bits, row);
    out[i]                      = static_cast<T const*>(source.values)[source.offset + row];
  }
}

/// Output byte `byte` of the gathered mask (a source without a mask gives valid rows), and its
/// nulls added to `null_count`.
__global__ void gather_sources_mask(std::uint8_t* out,
                                    source_column const* sources,
                                    std::uint64_t const* ids,
                                    std::size_t rows,
                                    unsigned row_bits,
                                    unsigned long long* null_count) {
  std::size_t const byte = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (byte * 8 >= rows) {
    return;
  }
  std::uint8_t value = 0;
  unsigned nulls     = 0;
  for (unsigned bit = 0; bit < 8 && byte * 8 + bit < rows; ++bit) {
    std::uint64_t const id = ids[byte * 8 + bit];
    bool valid             = id != OUT_OF_BOUNDS;
    if (valid) {
      std::size_t row             = 0;
      source_column const& source = source_of(sources, id, row_bits, row);
      std::size_t const at        = source.offset + row;
      valid = source.mask == nullptr || ((source.mask[at / 8] >> (at % 8)) & 1U) != 0;
    }
    value |= static_cast<std::uint8_t>((valid ? 1U : 0U) << bit);
    nulls += valid ? 0U : 1U;
  }
  out[byte] = value;
  if (nulls > 0) {
    atomicAdd(null_count, static_cast<unsigned long long>(nulls));
  }
}

__global__ void gather_sources_lengths(std::int64_t* lengths,
                                       source_column const* sources,
                                       std::uint64_t const* ids,
                                       std::size_t rows,
                                       unsigned row_bits) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i == 0) {
    lengths[0] = 0;
  }
  if (i < rows) {
    std::uint64_t const id = ids[i];
    if (id == OUT_OF_BOUNDS) {
      lengths[i + 1] = 0;
      return;
    }
    std::size_t row             = 0;
    source_column const& source = source_of(sources, id, row_bits, row);
    lengths[i + 1] = source.offsets[source.offset + row + 1] - source.offsets[source.offset + row];
  }
}

/// One warp per output string.
__global__ void gather_sources_chars(char* out,
                                     std::int64_t const* out_offsets,
                                     source_column const* sources,
                                     std::uint64_t const* ids,
                                     std::size_t rows,
                                     unsigned row_bits) {
  std::size_t const warp = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) / 32;
  unsigned const lane    = threadIdx.x % 32;
  if (warp >= rows || ids[warp] == OUT_OF_BOUNDS) {
    return;
  }
  std::size_t row             = 0;
  source_column const& source = source_of(sources, ids[warp], row_bits, row);
  std::int64_t const begin    = source.offsets[source.offset + row];
  std::int64_t const bytes    = source.offsets[source.offset + row + 1] - begin;
  char const* from            = static_cast<char const*>(source.values) + begin;
  char* to                    = out + out_offsets[warp];
  for (std::int64_t b = lane; b < bytes; b += 32) {
    to[b] = from[b];
  }
}

/// out[i] = in[i] widened, rows[i] = i; `*bad` set when an id is not below `partitions`.
template <typename Id>
__global__ void widen_ids(std::uint64_t* out,
                          Id const* in,
                          std::uint32_t* rows,
                          std::size_t count,
                          std::uint64_t partitions,
                          unsigned* bad) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < count) {
    std::uint64_t const id = in[i];
    out[i]                 = id;
    rows[i]                = static_cast<std::uint32_t>(i);
    if (id >= partitions) {
      atomicOr(bad, 1U);
    }
  }
}

/// offsets[p] = the first position of `sorted_ids` holding p or more, for p in [0, partitions].
__global__ void partition_starts(std::uint64_t* offsets,
                                 std::uint64_t const* sorted_ids,
                                 std::size_t rows,
                                 std::size_t partitions) {
  std::size_t const p = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (p > partitions) {
    return;
  }
  std::size_t low  = 0;
  std::size_t high = rows;
  while (low < high) {
    std::size_t const middle = low + (high - low) / 2;
    if (sorted_ids[middle] < p) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  offsets[p] = low;
}

/// Whether the memory at `pointer` is device memory; host-side copies take the other path.
bool device(void const* pointer) { return is_cuda_device_pointer(pointer); }

void memcpy_sync(void* destination, void const* source, std::size_t bytes, stream_view stream) {
  if (bytes == 0) {
    return;
  }
  check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, native(stream)),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
}

/// Any-kind to any-kind copy of `rows` validity bits starting at bit `first` of `in` into a mask
/// starting at bit 0 of `out`.
void copy_mask(std::uint8_t* out,
               std::uint8_t const* in,
               std::size_t first,
               std::size_t rows,
               stream_view stream) {
  std::size_t const bytes = (rows + 7) / 8;
  if (rows == 0) {
    return;
  }
  // On the device a kernel realigns the bits and clears those past the last row; otherwise a host
  // copy does the same, so that packed bytes do not depend on what lay beyond the rows.
  if (device(in) && device(out)) {
    shift_bits<<<grid_for(bytes), BLOCK, 0, native(stream)>>>(out, in, first, rows);
    check_launch("shift_bits");
    check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
    return;
  }
  std::size_t const covered = (first + rows + 7) / 8 - first / 8;
  std::vector<std::uint8_t> source(covered);
  memcpy_sync(source.data(), in + first / 8, covered, stream);
  std::vector<std::uint8_t> shifted(bytes, 0);
  copy_bits(shifted.data(), 0, source.data(), first % 8, rows);
  memcpy_sync(out, shifted.data(), bytes, stream);
}

/// Converts a gather map of any index type to 64-bit indices, out-of-range ones to the sentinel,
/// and records the first out-of-range row.
template <typename Index>
__global__ void normalize_indices(std::uint64_t* out,
                                  Index const* in,
                                  std::size_t rows,
                                  std::uint64_t source_rows,
                                  unsigned long long* first_bad) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= rows) {
    return;
  }
  Index const value = in[i];
  bool valid        = static_cast<std::uint64_t>(value) < source_rows;
  if constexpr (std::is_signed_v<Index>) {
    valid = valid && value >= Index{0};
  }
  out[i] = valid ? static_cast<std::uint64_t>(value) : OUT_OF_BOUNDS;
  if (!valid) {
    atomicMin(first_bad, static_cast<unsigned long long>(i));
  }
}

template <typename Index>
void launch_normalize(std::uint64_t* out,
                      column_view const& map,
                      std::size_t source_rows,
                      unsigned long long* first_bad,
                      stream_view stream) {
  normalize_indices<Index><<<grid_for(map.size()), BLOCK, 0, native(stream)>>>(
    out, map.data<Index>(), map.size(), source_rows, first_bad);
  check_launch("normalize_indices");
}

/// The map as 64-bit device indices: copied to the device first when it lives on the host.
std::string index_text(column_view const& map, std::size_t row, stream_view stream) {
  std::size_t const width = size_of(map.type());
  std::uint64_t raw       = 0;
  memcpy_sync(
    &raw, static_cast<std::byte const*>(map.head()) + (map.offset() + row) * width, width, stream);
  switch (map.type().id()) {
    case type_id::INT32:
      return std::to_string(static_cast<std::int32_t>(static_cast<std::uint32_t>(raw)));
    case type_id::INT64:
      return std::to_string(static_cast<std::int64_t>(raw));
    case type_id::UINT32:
      return std::to_string(static_cast<std::uint32_t>(raw));
    default:
      return std::to_string(raw);
  }
}

}  // namespace

void copy_column_to(column_target const& target, column_view const& input, stream_view stream) {
  std::size_t const rows = input.size();
  if (is_fixed_width(input.type())) {
    std::size_t const width = size_of(input.type());
    memcpy_sync(target.data,
                static_cast<std::byte const*>(input.head()) + input.offset() * width,
                rows * width,
                stream);
  } else {
    std::int64_t* out = target.offsets;
    if (rows == 0) {
      std::int64_t const zero = 0;
      memcpy_sync(out, &zero, sizeof(zero), stream);
    } else if (device(input.offsets()) && device(out)) {
      rebase_offsets<<<grid_for(rows + 1), BLOCK, 0, native(stream)>>>(
        out, input.offsets(), input.offset(), rows + 1);
      check_launch("rebase_offsets");
      check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
    } else {
      std::vector<std::int64_t> offsets(rows + 1);
      memcpy_sync(offsets.data(),
                  input.offsets() + input.offset(),
                  offsets.size() * sizeof(std::int64_t),
                  stream);
      std::int64_t const base = offsets[0];
      for (auto& offset : offsets) {
        offset -= base;
      }
      memcpy_sync(out, offsets.data(), offsets.size() * sizeof(std::int64_t), stream);
    }
    std::int64_t base = 0;
    if (rows > 0) {
      memcpy_sync(&base, input.offsets() + input.offset(), sizeof(base), stream);
    }
    memcpy_sync(target.data, input.chars() + base, chars_size(input, stream), stream);
  }
  if (input.nullable() && target.mask != nullptr) {
    copy_mask(target.mask, input.null_mask(), input.offset(), rows, stream);
  }
}

void copy_into(column& result, column_view const& input, stream_view stream) {
  column_target target;
  target.data = is_fixed_width(input.type()) ? static_cast<void*>(result.mutable_data<std::byte>())
                                             : static_cast<void*>(result.mutable_chars());
  target.offsets = is_fixed_width(input.type()) ? nullptr : result.mutable_offsets();
  target.mask    = input.nullable() ? result.mutable_null_mask() : nullptr;
  copy_column_to(target, input, stream);
  if (input.nullable()) {
    result.set_null_count(input.null_count());
  }
}

namespace {

std::unique_ptr<table> concatenate_on_device(std::span<table_view const> inputs,
                                             std::size_t total_rows,
                                             stream_view stream,
                                             memory_resources mrs) {
  cudaStream_t const native_stream = native(stream);
  std::vector<std::unique_ptr<column>> columns;
  for (std::size_t c = 0; c < inputs.front().num_columns(); ++c) {
    data_type const type = inputs.front().column(c).type();
    bool any_nulls       = false;
    std::size_t chars    = 0;
    for (auto const& input : inputs) {
      column_view const& view = input.column(c);
      SPILLWAY_EXPECTS(view.size() == 0 || on_device(view),
                       "concatenate: column " + std::to_string(c) +
                         " of a table is not in CUDA device memory while others are; tables "
                         "are concatenated where they live",
                       invalid_argument);
      any_nulls = any_nulls || view.has_nulls();
      chars += is_fixed_width(type) ? 0 : chars_size(view, stream);
    }
    mask_state const state = any_nulls ? mask_state::ALL_NULL : mask_state::UNALLOCATED;
    std::unique_ptr<column> result =
      is_fixed_width(type)
        ? make_fixed_width_column(type, total_rows, state, stream, mrs.output())
        : make_strings_column(total_rows, chars, state, stream, mrs.output(), type);
    expect_device_output(*result, "concatenate");
    std::size_t row          = 0;
    std::int64_t char_cursor = 0;
    std::size_t null_count   = 0;
    if (!is_fixed_width(type)) {
      check(cudaMemsetAsync(result->mutable_offsets(), 0, sizeof(std::int64_t), native_stream),
            "cudaMemsetAsync");
    }
    for (auto const& input : inputs) {
      column_view const& view = input.column(c);
      std::size_t const rows  = view.size();
      if (rows == 0) {
        continue;
      }
      if (is_fixed_width(type)) {
        std::size_t const width = size_of(type);
        check(cudaMemcpyAsync(result->mutable_data<std::byte>() + row * width,
                              static_cast<std::byte const*>(view.head()) + view.offset() * width,
                              rows * width,
                              cudaMemcpyDeviceToDevice,
                              native_stream),
              "cudaMemcpyAsync");
      } else {
        std::size_t const piece_chars = chars_size(view, stream);
        std::int64_t base             = 0;
        memcpy_sync(&base, view.offsets() + view.offset(), sizeof(base), stream);
        // Offsets 1..rows of the piece go to rows row+1..row+rows of the result.
        place_offsets<<<grid_for(rows + 1), BLOCK, 0, native_stream>>>(
          result->mutable_offsets() + row, view.offsets(), view.offset(), rows + 1, char_cursor);
        check_launch("place_offsets");
        check(cudaMemcpyAsync(result->mutable_chars() + char_cursor,
                              view.chars() + base,
                              piece_chars,
                              cudaMemcpyDeviceToDevice,
                              native_stream),
              "cudaMemcpyAsync");
        char_cursor += static_cast<std::int64_t>(piece_chars);
      }
      if (any_nulls) {
        place_bits<<<grid_for(rows), BLOCK, 0, native_stream>>>(
          reinterpret_cast<unsigned*>(result->mutable_null_mask()),
          row,
          view.nullable() ? view.null_mask() : nullptr,
          view.offset(),
          rows);
        check_launch("place_bits");
        null_count += view.null_count();
      }
      row += rows;
    }
    result->set_null_count(null_count);
    columns.push_back(std::move(result));
  }
  check(cudaStreamSynchronize(native_stream), "cudaStreamSynchronize");
  return std::make_unique<table>(std::move(columns));
}

/// One piece of a gather from several inputs: every column from `mrs.output()`. An id of
/// OUT_OF_BOUNDS gives a null row; `any_out_of_bounds` says there may be some, so that every
/// column gets a mask.
std::unique_ptr<table> gather_sources_piece(std::span<table_view const> inputs,
                                            std::uint64_t const* ids,
                                            std::size_t rows,
                                            unsigned row_bits,
                                            bool any_out_of_bounds,
                                            stream_view stream,
                                            memory_resources mrs) {
  cudaStream_t const native_stream = native(stream);
  std::vector<std::unique_ptr<column>> columns;
  std::size_t const num_columns = inputs.front().num_columns();
  for (std::size_t c = 0; c < num_columns; ++c) {
    data_type const type = inputs.front().column(c).type();
    bool nullable        = any_out_of_bounds;
    std::vector<source_column> sources(inputs.size());
    for (std::size_t t = 0; t < inputs.size(); ++t) {
      column_view const& view = inputs[t].column(c);
      nullable                = nullable || view.has_nulls();
      sources[t].values       = view.head();
      sources[t].offsets      = view.offsets();
      sources[t].mask         = view.has_nulls() ? view.null_mask() : nullptr;
      sources[t].offset       = view.offset();
    }
    buffer described{sources.size() * sizeof(source_column), stream, mrs.temporary()};
    check(cudaMemcpyAsync(described.data(),
                          sources.data(),
                          sources.size() * sizeof(source_column),
                          cudaMemcpyHostToDevice,
                          native_stream),
          "cudaMemcpyAsync");
    auto const* device_sources = static_cast<source_column const*>(described.data());
    mask_state const state     = nullable ? mask_state::UNINITIALIZED : mask_state::UNALLOCATED;
    std::unique_ptr<column> result;
    if (is_fixed_width(type)) {
      result = make_fixed_width_column(type, rows, state, stream, mrs.output());
      expect_device_output(*result, "gather");
      auto const launch = [&]<typename T>() {
        gather_sources_values<T><<<grid_for(rows), BLOCK, 0, native_stream>>>(
          result->mutable_data<T>(), device_sources, ids, rows, row_bits);
        check_launch("gather_sources_values");
      };
      switch (size_of(type)) {
        case 1:
          launch.template operator()<std::uint8_t>();
          break;
        case 2:
          launch.template operator()<std::uint16_t>();
          break;
        case 4:
          launch.template operator()<std::uint32_t>();
          break;
        case 16:
          launch.template operator()<decimal128_storage>();
          break;
        case 32:
          launch.template operator()<decimal256_storage>();
          break;
        default:
          launch.template operator()<std::uint64_t>();
          break;
      }
    } else {
      buffer offsets{(rows + 1) * sizeof(std::int64_t), stream, mrs.temporary()};
      auto* lengths = static_cast<std::int64_t*>(offsets.data());
      gather_sources_lengths<<<grid_for(rows), BLOCK, 0, native_stream>>>(
        lengths, device_sources, ids, rows, row_bits);
      check_launch("gather_sources_lengths");
      std::size_t scratch_bytes = 0;
      check(cub::DeviceScan::InclusiveSum(
              nullptr, scratch_bytes, lengths + 1, lengths + 1, rows, native_stream),
            "cub::DeviceScan::InclusiveSum");
      buffer scratch{scratch_bytes, stream, mrs.temporary()};
      check(cub::DeviceScan::InclusiveSum(
              scratch.data(), scratch_bytes, lengths + 1, lengths + 1, rows, native_stream),
            "cub::DeviceScan::InclusiveSum");
      std::int64_t chars = 0;
      memcpy_sync(&chars, lengths + rows, sizeof(chars), stream);
      result = make_strings_column(
        rows, static_cast<std::size_t>(chars), state, stream, mrs.output(), type);
      expect_device_output(*result, "gather");
      check(cudaMemcpyAsync(result->mutable_offsets(),
                            lengths,
                            (rows + 1) * sizeof(std::int64_t),
                            cudaMemcpyDeviceToDevice,
                            native_stream),
            "cudaMemcpyAsync");
      if (chars > 0) {
        gather_sources_chars<<<grid_for(rows * 32), BLOCK, 0, native_stream>>>(
          result->mutable_chars(), result->mutable_offsets(), device_sources, ids, rows, row_bits);
        check_launch("gather_sources_chars");
      }
      check(cudaStreamSynchronize(native_stream), "cudaStreamSynchronize");
    }
    if (nullable) {
      buffer counter{sizeof(unsigned long long), stream, mrs.temporary()};
      auto* null_count = static_cast<unsigned long long*>(counter.data());
      check(cudaMemsetAsync(null_count, 0, sizeof(unsigned long long), native_stream),
            "cudaMemsetAsync");
      gather_sources_mask<<<grid_for((rows + 7) / 8), BLOCK, 0, native_stream>>>(
        result->mutable_null_mask(), device_sources, ids, rows, row_bits, null_count);
      check_launch("gather_sources_mask");
      unsigned long long nulls = 0;
      memcpy_sync(&nulls, null_count, sizeof(nulls), stream);
      result->set_null_count(static_cast<std::size_t>(nulls));
    }
    // The descriptions are freed (stream-ordered) after the kernels that read them.
    check(cudaStreamSynchronize(native_stream), "cudaStreamSynchronize");
    columns.push_back(std::move(result));
  }
  return std::make_unique<table>(std::move(columns));
}

std::unique_ptr<table> gather_on_device(table_view const& source,
                                        column_view const& gather_map,
                                        out_of_bounds_policy policy,
                                        stream_view stream,
                                        memory_resources mrs) {
  std::size_t const rows        = gather_map.size();
  std::size_t const source_rows = source.num_rows();
  for (std::size_t c = 0; c < source.num_columns(); ++c) {
    SPILLWAY_EXPECTS(on_device(source.column(c)) || source.num_rows() == 0,
                     "gather: column " + std::to_string(c) +
                       " is not in CUDA device memory while others are; a table lives in one "
                       "place",
                     invalid_argument);
  }
  // The map on the device, whatever its type and wherever it lived.
  buffer map_copy;
  column_view map = gather_map;
  if (rows > 0 && !device(static_cast<std::byte const*>(gather_map.head()))) {
    std::size_t const width = size_of(gather_map.type());
    map_copy =
      buffer{static_cast<std::byte const*>(gather_map.head()) + gather_map.offset() * width,
             gather_map.kind(),
             rows * width,
             stream,
             mrs.temporary()};
    map = column_view{
      gather_map.type(), rows, map_copy.data(), nullptr, 0, 0, nullptr, memory_kind::DEVICE};
  }
  buffer indices_buffer{rows * sizeof(std::uint64_t), stream, mrs.temporary()};
  buffer first_bad_buffer{sizeof(unsigned long long), stream, mrs.temporary()};
  auto* indices   = static_cast<std::uint64_t*>(indices_buffer.data());
  auto* first_bad = static_cast<unsigned long long*>(first_bad_buffer.data());
  check(cudaMemsetAsync(first_bad, 0xFF, sizeof(unsigned long long), native(stream)),
        "cudaMemsetAsync");
  if (rows > 0) {
    switch (map.type().id()) {
      case type_id::INT32:
        launch_normalize<std::int32_t>(indices, map, source_rows, first_bad, stream);
        break;
      case type_id::INT64:
        launch_normalize<std::int64_t>(indices, map, source_rows, first_bad, stream);
        break;
      case type_id::UINT32:
        launch_normalize<std::uint32_t>(indices, map, source_rows, first_bad, stream);
        break;
      default:
        launch_normalize<std::uint64_t>(indices, map, source_rows, first_bad, stream);
        break;
    }
  }
  unsigned long long bad = 0;
  memcpy_sync(&bad, first_bad, sizeof(bad), stream);
  bool const any_out_of_bounds = bad != ~0ULL;
  if (any_out_of_bounds) {
    std::size_t const row = static_cast<std::size_t>(bad);
    SPILLWAY_EXPECTS(policy == out_of_bounds_policy::NULLIFY,
                     "gather map row " + std::to_string(row) + " is out of bounds: index " +
                       index_text(map, row, stream) + ", source rows " +
                       std::to_string(source_rows),
                     invalid_argument);
  }
  // The gather from several sources with one: every index is below 2^63, so its source is 0.
  return gather_sources_piece(std::span<table_view const>{&source, 1},
                              indices,
                              rows,
                              SINGLE_SOURCE_ROW_BITS,
                              any_out_of_bounds,
                              stream,
                              mrs);
}

}  // namespace

std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   std::size_t total_rows,
                                   stream_view stream,
                                   memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return concatenate_on_device(inputs, total_rows, stream, device_mrs);
  });
}

std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy,
                              stream_view stream,
                              memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return gather_on_device(source, gather_map, policy, stream, device_mrs);
  });
}

std::vector<std::unique_ptr<table>> gather_pieces(std::span<table_view const> inputs,
                                                  std::uint64_t const* ids,
                                                  std::span<std::size_t const> starts,
                                                  unsigned row_bits,
                                                  stream_view stream,
                                                  memory_resources mrs) {
  for (std::size_t t = 0; t < inputs.size(); ++t) {
    SPILLWAY_EXPECTS(inputs[t].num_rows() == 0 || on_device(inputs[t]),
                     "gather: input " + std::to_string(t) +
                       " is not in CUDA device memory while others are; tables are gathered "
                       "where they live",
                     invalid_argument);
  }
  std::vector<std::unique_ptr<table>> pieces;
  std::size_t const total = starts.empty() ? 0 : starts.back() - starts.front();
  // The ids on the device: copied there when they live on the host.
  buffer ids_copy;
  std::uint64_t const* device_ids = ids;  // ids[starts[p]] is device_ids[starts[p] - first]
  std::size_t first               = 0;
  if (total > 0 && !device(ids + starts.front())) {
    ids_copy   = buffer{ids + starts.front(),
                      memory_kind::HOST,
                      total * sizeof(std::uint64_t),
                      stream,
                      mrs.temporary()};
    device_ids = static_cast<std::uint64_t const*>(ids_copy.data());
    first      = starts.front();
  }
  for (std::size_t p = 0; p + 1 < starts.size(); ++p) {
    std::size_t const rows = starts[p + 1] - starts[p];
    pieces.push_back(with_device_output(mrs, stream, [&](memory_resources device_mrs) {
      return gather_sources_piece(
        inputs, device_ids + (starts[p] - first), rows, row_bits, false, stream, device_mrs);
    }));
  }
  return pieces;
}

partitioned_rows partition_rows(column_view const& partition_map,
                                std::size_t partitions,
                                stream_view stream,
                                resource_ref temporary) {
  std::size_t const rows = partition_map.size();
  SPILLWAY_EXPECTS(
    rows < (std::uint64_t{1} << 32),
    "partitioning on the CUDA device takes fewer than 2^32 rows, not " + std::to_string(rows),
    invalid_argument);
  partitioned_rows result;
  result.offsets.assign(partitions + 1, 0);
  if (rows == 0) {
    return result;
  }
  cudaStream_t const native_stream = native(stream);
  // The ids on the device, whatever their width and wherever they were.
  std::size_t const width = size_of(partition_map.type());
  buffer map_copy;
  void const* ids_in =
    static_cast<std::byte const*>(partition_map.head()) + partition_map.offset() * width;
  if (!device(ids_in)) {
    map_copy = buffer{ids_in, memory_kind::HOST, rows * width, stream, temporary};
    ids_in   = map_copy.data();
  }
  buffer ids{2 * rows * sizeof(std::uint64_t), stream, temporary};
  buffer flag{sizeof(unsigned), stream, temporary};
  auto* bad = static_cast<unsigned*>(flag.data());
  check(cudaMemsetAsync(bad, 0, sizeof(unsigned), native_stream), "cudaMemsetAsync");
  result.rows      = buffer{2 * rows * sizeof(std::uint32_t), stream, temporary};
  auto* keys_in    = static_cast<std::uint64_t*>(ids.data());
  auto* rows_in    = static_cast<std::uint32_t*>(result.rows.data());
  auto const widen = [&]<typename Id>() {
    widen_ids<Id><<<grid_for(rows), BLOCK, 0, native_stream>>>(
      keys_in, static_cast<Id const*>(ids_in), rows_in, rows, partitions, bad);
    check_launch("widen_ids");
  };
  switch (partition_map.type().id()) {
    case type_id::UINT8:
      widen.template operator()<std::uint8_t>();
      break;
    case type_id::UINT16:
      widen.template operator()<std::uint16_t>();
      break;
    case type_id::UINT32:
      widen.template operator()<std::uint32_t>();
      break;
    default:
      widen.template operator()<std::uint64_t>();
      break;
  }
  unsigned out_of_range = 0;
  memcpy_sync(&out_of_range, bad, sizeof(out_of_range), stream);
  SPILLWAY_EXPECTS(
    out_of_range == 0,
    "partition map holds an id not below " + std::to_string(partitions) + " partitions",
    invalid_argument);
  // A stable radix sort of (id, row) by the id's bits groups the rows in input order.
  cub::DoubleBuffer<std::uint64_t> keys{keys_in, keys_in + rows};
  cub::DoubleBuffer<std::uint32_t> values{rows_in, rows_in + rows};
  int bits = 1;
  while (bits < 64 && ((partitions - 1) >> bits) != 0) {
    ++bits;
  }
  std::size_t scratch_bytes = 0;
  check(cub::DeviceRadixSort::SortPairs(nullptr,
                                        scratch_bytes,
                                        keys,
                                        values,
                                        static_cast<std::int64_t>(rows),
                                        0,
                                        bits,
                                        native_stream),
        "cub::DeviceRadixSort::SortPairs");
  {
    buffer scratch{scratch_bytes, stream, temporary};
    check(cub::DeviceRadixSort::SortPairs(scratch.data(),
                                          scratch_bytes,
                                          keys,
                                          values,
                                          static_cast<std::int64_t>(rows),
                                          0,
                                          bits,
                                          native_stream),
          "cub::DeviceRadixSort::SortPairs");
    check(cudaStreamSynchronize(native_stream), "cudaStreamSynchronize");
  }
  buffer starts{(partitions + 1) * sizeof(std::uint64_t), stream, temporary};
  partition_starts<<<grid_for(partitions + 1), BLOCK, 0, native_stream>>>(
    static_cast<std::uint64_t*>(starts.data()), keys.Current(), rows, partitions);
  check_launch("partition_starts");
  std::vector<std::uint64_t> offsets(partitions + 1);
  memcpy_sync(offsets.data(), starts.data(), offsets.size() * sizeof(std::uint64_t), stream);
  result.offsets.assign(offsets.begin(), offsets.end());
  result.map = column_view{data_type{type_id::UINT32},
                           rows,
                           values.Current(),
                           nullptr,
                           0,
                           0,
                           nullptr,
                           memory_kind::DEVICE};
  return result;
}

}  // namespace spillway::detail::cuda
