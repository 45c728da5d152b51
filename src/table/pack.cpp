/**
 * @file pack.cpp
 * @brief Packing a table into one contiguous buffer and its metadata, and unpacking it into
 * views; `pack_partitions`' scatter is in pack_partitions.cpp.
 */
#include "table/cuda/device_table.hpp"
#include "table/pack_layout.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace spillway {
namespace {

using detail::column_entry;
using detail::header;
using detail::layout;
using detail::make_entry;
using detail::make_metadata;
using detail::PACK_MAGIC;
using detail::PACK_VERSION;
using detail::PART_ALIGNMENT;
using detail::part_layout;
using detail::set_entry;

/// Writes `input`, laid out as `parts` in `total` bytes, to `destination` (of kind `to`) and its
/// metadata entries to `metadata`.
void fill_packed(table_view const& input,
                 std::vector<part_layout> const& parts,
                 std::size_t total,
                 std::uint8_t* destination,
                 memory_kind to,
                 stream_view stream,
                 std::vector<std::uint8_t>& metadata) {
  // Padding is zeroed so that packed bytes (and their checksums) are deterministic; only the
  // padding, as the data is written once anyway. `written`: the end of what is set so far.
  std::size_t written   = 0;
  auto const zero_up_to = [&](std::size_t end) {
    if (end > written) {
      std::memset(destination + written, 0, end - written);
    }
    written = end;
  };
  for (std::size_t index = 0; index < input.num_columns(); ++index) {
    column_view const& column = input.column(index);
    part_layout const& part   = parts[index];
    std::size_t const rows    = column.size();
    if (column.nullable()) {
      // The whole mask allocation is zeroed: copy_bits leaves the bits past the last row alone.
      zero_up_to(is_fixed_width(column.type()) ? part.data_offset : part.offsets_offset);
      copy_bits(destination + part.mask_offset, 0, column.null_mask(), column.offset(), rows);
    }
    if (!is_fixed_width(column.type())) {
      zero_up_to(part.offsets_offset);
      written = part.offsets_offset + (rows + 1) * sizeof(std::int64_t);
    }
    zero_up_to(part.data_offset);
    written = part.data_offset + part.data_bytes;
    if (is_fixed_width(column.type())) {
      copy_bytes(
        destination + part.data_offset,
        to,
        static_cast<std::uint8_t const*>(column.head()) + column.offset() * size_of(column.type()),
        column.kind(),
        part.data_bytes,
        stream);
    } else {
      auto* offsets           = reinterpret_cast<std::int64_t*>(destination + part.offsets_offset);
      std::int64_t const base = rows == 0 ? 0 : column.offsets()[column.offset()];
      for (std::size_t row = 0; row <= rows; ++row) {
        offsets[row] = rows == 0 ? 0 : column.offsets()[column.offset() + row] - base;
      }
      copy_bytes(destination + part.data_offset,
                 to,
                 column.chars() + base,
                 column.kind(),
                 part.data_bytes,
                 stream);
    }
    set_entry(
      metadata, index, make_entry(column.type(), column.nullable(), column.null_count(), part));
  }
  zero_up_to(total);
}

#if SPILLWAY_HAS_CUDA
/// `fill_packed` where the input or the destination is on a CUDA device: the padding zeroed where
/// the destination lives, each column written by the device copy.
void fill_packed_with_cuda(table_view const& input,
                           std::vector<part_layout> const& parts,
                           std::size_t total,
                           std::uint8_t* destination,
                           memory_kind to,
                           stream_view stream,
                           std::vector<std::uint8_t>& metadata) {
  fill_bytes(destination, to, 0, total, stream);
  for (std::size_t index = 0; index < input.num_columns(); ++index) {
    column_view const& column = input.column(index);
    part_layout const& part   = parts[index];
    detail::cuda::column_target target;
    target.data    = destination + part.data_offset;
    target.offsets = is_fixed_width(column.type())
                       ? nullptr
                       : reinterpret_cast<std::int64_t*>(destination + part.offsets_offset);
    target.mask    = column.nullable() ? destination + part.mask_offset : nullptr;
    detail::cuda::copy_column_to(target, column, stream);
    set_entry(
      metadata, index, make_entry(column.type(), column.nullable(), column.null_count(), part));
  }
}
#endif

[[noreturn]] void corrupt(std::string const& what) {
  throw corruption_error("packed table metadata is corrupt: " + what);
}

header read_header(std::span<std::uint8_t const> metadata) {
  if (metadata.size() < sizeof(header)) {
    corrupt("metadata of " + std::to_string(metadata.size()) + " bytes is shorter than a header");
  }
  header head{};
  std::memcpy(&head, metadata.data(), sizeof(header));
  if (head.magic != PACK_MAGIC) {
    corrupt("bad magic number " + std::to_string(head.magic));
  }
  if (head.version != PACK_VERSION) {
    corrupt("unknown version " + std::to_string(head.version));
  }
  if (metadata.size() != sizeof(header) + head.num_columns * sizeof(column_entry)) {
    corrupt("metadata of " + std::to_string(metadata.size()) + " bytes does not hold " +
            std::to_string(head.num_columns) + " columns");
  }
  return head;
}

}  // namespace

std::size_t packed_size(table_view const& input) { return layout(input, nullptr); }

std::size_t packed_metadata_size(std::size_t num_columns) noexcept {
  return sizeof(header) + num_columns * sizeof(column_entry);
}

namespace detail {

packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs) {
  std::vector<part_layout> parts;
  parts.reserve(input.num_columns());
  std::size_t const total = layout(input, &parts, stream);

  packed_columns out;
  out.data     = buffer{total, stream, mrs.output()};
  out.metadata = make_metadata(input.num_columns(), input.num_rows(), total);
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input) || is_cuda_device_pointer(out.data.data())) {
    fill_packed_with_cuda(input,
                          parts,
                          total,
                          static_cast<std::uint8_t*>(out.data.data()),
                          out.data.kind(),
                          stream,
                          out.metadata);
    return out;
  }
#endif
  fill_packed(input,
              parts,
              total,
              static_cast<std::uint8_t*>(out.data.data()),
              out.data.kind(),
              stream,
              out.metadata);
  return out;
}

packed_partition pack_at(table_view const& input,
                         std::size_t data_offset,
                         stream_view stream,
                         memory_resources mrs) {
  SPILLWAY_EXPECTS(data_offset % PART_ALIGNMENT == 0,
                   "pack: the data offset " + std::to_string(data_offset) +
                     " is not a multiple of " + std::to_string(PART_ALIGNMENT),
                   invalid_argument);
  std::vector<part_layout> parts;
  parts.reserve(input.num_columns());
  std::size_t const total = layout(input, &parts, stream);

  packed_partition out;
  out.num_rows = input.num_rows();
  out.frame    = buffer{data_offset + total, stream, mrs.output()};
  out.metadata = make_metadata(input.num_columns(), input.num_rows(), total);
  auto* frame  = static_cast<std::uint8_t*>(out.frame.data());
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input) || is_cuda_device_pointer(frame)) {
    fill_bytes(frame, out.frame.kind(), 0, data_offset, stream);
    fill_packed_with_cuda(
      input, parts, total, frame + data_offset, out.frame.kind(), stream, out.metadata);
    return out;
  }
#endif
  if (data_offset > 0) {
    std::memset(frame, 0, data_offset);
  }
  fill_packed(input,
              parts,
              total,
              frame == nullptr ? nullptr : frame + data_offset,
              out.frame.kind(),
              stream,
              out.metadata);
  return out;
}

}  // namespace detail

packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs) {
  return detail::pack(input, stream, mrs);
}

std::size_t packed_num_rows(std::span<std::uint8_t const> metadata) {
  return read_header(metadata).num_rows;
}

table_view unpack(std::span<std::uint8_t const> metadata,
                  void const* data,
                  std::size_t data_size,
                  memory_kind data_kind) {
  header const head = read_header(metadata);
  if (head.data_size != data_size) {
    corrupt("metadata describes " + std::to_string(head.data_size) + " data bytes, buffer has " +
            std::to_string(data_size));
  }
  // Every column takes at least one byte per row (strings eight), so a row count above the data
  // size is corrupt; bounding it here also keeps the size arithmetic below from overflowing.
  if (head.num_columns > 0 && head.num_rows > data_size) {
    corrupt(std::to_string(head.num_rows) + " rows cannot fit in " + std::to_string(data_size) +
            " data bytes");
  }
  auto const* base = static_cast<std::uint8_t const*>(data);
  std::vector<column_view> columns;
  columns.reserve(head.num_columns);
  std::size_t const rows = head.num_rows;
  auto const check_range =
    [&](std::uint64_t offset, std::uint64_t bytes, char const* part, std::size_t index) {
      if (offset > data_size || bytes > data_size - offset) {
        corrupt(std::string{part} + " of column " + std::to_string(index) + " at offset " +
                std::to_string(offset) + " (+" + std::to_string(bytes) + " bytes) exceeds " +
                std::to_string(data_size) + " data bytes");
      }
      // pack() starts every part on a boundary; a view elsewhere would read misaligned values.
      if (offset % PART_ALIGNMENT != 0) {
        corrupt(std::string{part} + " of column " + std::to_string(index) + " at offset " +
                std::to_string(offset) + " is not " + std::to_string(PART_ALIGNMENT) +
                "-byte aligned");
      }
    };
  for (std::size_t index = 0; index < head.num_columns; ++index) {
    column_entry entry{};
    std::memcpy(
      &entry, metadata.data() + sizeof(header) + index * sizeof(column_entry), sizeof(entry));
    if (entry.type >= TYPE_ID_COUNT || entry.unit > 3) {
      corrupt("column " + std::to_string(index) + " has unknown type " +
              std::to_string(entry.type));
    }
    data_type const type =
      is_decimal(static_cast<type_id>(entry.type))
        ? data_type{static_cast<type_id>(entry.type), entry.precision, entry.scale}
        : data_type{static_cast<type_id>(entry.type), static_cast<time_unit>(entry.unit)};
    if (is_decimal(type.id()) && !is_valid_decimal(type)) {
      corrupt("column " + std::to_string(index) + " is " + to_string(type) +
              ", whose precision its type does not hold");
    }
    if (entry.null_count > rows || (entry.null_count > 0 && entry.nullable == 0)) {
      corrupt("column " + std::to_string(index) + " has null count " +
              std::to_string(entry.null_count) + " for " + std::to_string(rows) + " rows");
    }
    bitmask_type const* mask = nullptr;
    if (entry.nullable != 0) {
      check_range(entry.mask_offset, (rows + 7) / 8, "mask", index);
      mask = base + entry.mask_offset;
    }
    std::int64_t const* offsets = nullptr;
    if (is_fixed_width(type)) {
      if (entry.data_bytes != rows * size_of(type)) {
        corrupt("column " + std::to_string(index) + " has " + std::to_string(entry.data_bytes) +
                " data bytes for " + std::to_string(rows) + " rows of " + to_string(type));
      }
    } else {
      check_range(entry.offsets_offset, (rows + 1) * sizeof(std::int64_t), "offsets", index);
      offsets = reinterpret_cast<std::int64_t const*>(base + entry.offsets_offset);
      // Offsets on a CUDA device: only the first and the last are read back and checked.
      bool const on_cuda   = data_kind == memory_kind::DEVICE && is_cuda_device_pointer(offsets);
      std::int64_t ends[2] = {0, 0};
      if (on_cuda) {
        copy_bytes(&ends[0], memory_kind::HOST, offsets, data_kind, sizeof(std::int64_t), {});
        copy_bytes(
          &ends[1], memory_kind::HOST, offsets + rows, data_kind, sizeof(std::int64_t), {});
      } else {
        ends[0] = offsets[0];
        ends[1] = offsets[rows];
      }
      if (ends[0] != 0 || static_cast<std::uint64_t>(ends[1]) != entry.data_bytes) {
        corrupt("string offsets of column " + std::to_string(index) +
                " do not span its characters");
      }
      // Ascending offsets from 0 to data_bytes keep every row inside the characters.
      for (std::size_t row = 0; !on_cuda && row < rows; ++row) {
        if (offsets[row] > offsets[row + 1]) {
          corrupt("string offsets of column " + std::to_string(index) + " descend at row " +
                  std::to_string(row) + ": " + std::to_string(offsets[row]) + " then " +
                  std::to_string(offsets[row + 1]));
        }
      }
    }
    check_range(entry.data_offset, entry.data_bytes, "data", index);
    columns.emplace_back(
      type, rows, base + entry.data_offset, mask, entry.null_count, 0, offsets, data_kind);
  }
  return table_view{std::move(columns)};
}

table_view unpack(packed_columns const& packed) {
  return unpack(packed.metadata, packed.data.data(), packed.data.size(), packed.data.kind());
}

}  // namespace spillway
