#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/pack.hpp>

#include <cstring>
#include <string>

namespace spillway {
namespace {

constexpr std::uint32_t PACK_MAGIC   = 0x4B575053;  // "SPWK"
constexpr std::uint16_t PACK_VERSION = 1;
/// Every part of a packed buffer starts at a multiple of this.
constexpr std::size_t PART_ALIGNMENT = 64;

struct header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint32_t num_columns;
  std::uint32_t padding;
  std::uint64_t num_rows;
  std::uint64_t data_size;
};

struct column_entry {
  std::uint8_t type;
  std::uint8_t unit;
  std::uint8_t nullable;
  std::uint8_t padding[5];
  std::uint64_t null_count;
  std::uint64_t mask_offset;
  std::uint64_t offsets_offset;
  std::uint64_t data_offset;
  std::uint64_t data_bytes;
};

static_assert(sizeof(header) == 32);
static_assert(sizeof(column_entry) == 48);

struct part_layout {
  std::size_t mask_offset    = 0;
  std::size_t offsets_offset = 0;
  std::size_t data_offset    = 0;
  std::size_t data_bytes     = 0;
};

/// Places each column's parts; returns the total size.
std::size_t layout(table_view const& input, std::vector<part_layout>* parts) {
  std::size_t cursor = 0;
  for (auto const& column : input) {
    part_layout part;
    std::size_t const rows = column.size();
    if (column.nullable()) {
      part.mask_offset = cursor;
      cursor           = align_up(cursor + bitmask_allocation_size(rows), PART_ALIGNMENT);
    }
    if (!is_fixed_width(column.type())) {
      part.offsets_offset = cursor;
      cursor              = align_up(cursor + (rows + 1) * sizeof(std::int64_t), PART_ALIGNMENT);
      part.data_bytes     = column.chars_size();
    } else {
      part.data_bytes = rows * size_of(column.type());
    }
    part.data_offset = cursor;
    cursor           = align_up(cursor + part.data_bytes, PART_ALIGNMENT);
    if (parts != nullptr) {
      parts->push_back(part);
    }
  }
  return cursor;
}

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

namespace detail {

packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs) {
  std::vector<part_layout> parts;
  parts.reserve(input.num_columns());
  std::size_t const total = layout(input, &parts);

  packed_columns out;
  out.data             = buffer{total, stream, mrs.output()};
  auto* destination    = static_cast<std::uint8_t*>(out.data.data());
  memory_kind const to = out.data.kind();
  // Padding is zeroed so that packed bytes (and their checksums) are deterministic.
  if (total > 0) {
    std::memset(destination, 0, total);
  }

  out.metadata.resize(sizeof(header) + input.num_columns() * sizeof(column_entry));
  header const head{PACK_MAGIC,
                    PACK_VERSION,
                    0,
                    static_cast<std::uint32_t>(input.num_columns()),
                    0,
                    input.num_rows(),
                    total};
  std::memcpy(out.metadata.data(), &head, sizeof(header));

  for (std::size_t index = 0; index < input.num_columns(); ++index) {
    column_view const& column = input.column(index);
    part_layout const& part   = parts[index];
    std::size_t const rows    = column.size();
    if (column.nullable()) {
      copy_bits(destination + part.mask_offset, 0, column.null_mask(), column.offset(), rows);
    }
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
    column_entry entry{};
    entry.type           = static_cast<std::uint8_t>(column.type().id());
    entry.unit           = static_cast<std::uint8_t>(column.type().unit());
    entry.nullable       = column.nullable() ? 1 : 0;
    entry.null_count     = column.null_count();
    entry.mask_offset    = part.mask_offset;
    entry.offsets_offset = part.offsets_offset;
    entry.data_offset    = part.data_offset;
    entry.data_bytes     = part.data_bytes;
    std::memcpy(
      out.metadata.data() + sizeof(header) + index * sizeof(column_entry), &entry, sizeof(entry));
  }
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
    data_type const type{static_cast<type_id>(entry.type), static_cast<time_unit>(entry.unit)};
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
      if (offsets[0] != 0 || static_cast<std::uint64_t>(offsets[rows]) != entry.data_bytes) {
        corrupt("string offsets of column " + std::to_string(index) +
                " do not span its characters");
      }
      // Ascending offsets from 0 to data_bytes keep every row inside the characters.
      for (std::size_t row = 0; row < rows; ++row) {
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
