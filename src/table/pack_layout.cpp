/**
 * @file pack_layout.cpp
 * @brief Where the parts of a packed table's columns go, and its metadata entries.
 */
#include "table/cuda/device_table.hpp"
#include "table/pack_layout.hpp"

#include <spillway/core/units.hpp>
#include <spillway/table/null_mask.hpp>

#include <cstring>

namespace spillway::detail {

/// Places the parts of a column of `rows` rows (and `chars` characters when it is not fixed
/// width) at `cursor`; returns the cursor after them.
std::size_t place_column(std::size_t cursor,
                         data_type type,
                         bool nullable,
                         std::size_t rows,
                         std::size_t chars,
                         part_layout& part) {
  if (nullable) {
    part.mask_offset = cursor;
    cursor           = align_up(cursor + bitmask_allocation_size(rows), PART_ALIGNMENT);
  }
  if (!is_fixed_width(type)) {
    part.offsets_offset = cursor;
    cursor              = align_up(cursor + (rows + 1) * sizeof(std::int64_t), PART_ALIGNMENT);
    part.data_bytes     = chars;
  } else {
    part.data_bytes = rows * size_of(type);
  }
  part.data_offset = cursor;
  return align_up(cursor + part.data_bytes, PART_ALIGNMENT);
}

/// Places each column's parts; returns the total size. `stream` orders the reads of string
/// offsets that live on a CUDA device.
std::size_t layout(table_view const& input, std::vector<part_layout>* parts, stream_view stream) {
  std::size_t cursor = 0;
  for (auto const& column : input) {
    part_layout part;
    std::size_t const chars = detail::cuda::on_device(column)
                                ? detail::cuda::chars_size(column, stream)
                                : column.chars_size();
    cursor = place_column(cursor, column.type(), column.nullable(), column.size(), chars, part);
    if (parts != nullptr) {
      parts->push_back(part);
    }
  }
  return cursor;
}

/// The metadata entry of a column placed at `part`.
column_entry make_entry(data_type type,
                        bool nullable,
                        std::size_t null_count,
                        part_layout const& part) {
  column_entry entry{};
  entry.type = static_cast<std::uint8_t>(type.id());
  entry.unit = static_cast<std::uint8_t>(type.unit());
  if (is_decimal(type.id())) {
    entry.precision = static_cast<std::uint8_t>(type.precision());
    entry.scale     = type.scale();
  }
  entry.nullable       = nullable ? 1 : 0;
  entry.null_count     = null_count;
  entry.mask_offset    = part.mask_offset;
  entry.offsets_offset = part.offsets_offset;
  entry.data_offset    = part.data_offset;
  entry.data_bytes     = part.data_bytes;
  return entry;
}

/// Metadata of `num_columns` columns of `num_rows` rows in `data_size` bytes, entries unset.
std::vector<std::uint8_t> make_metadata(std::size_t num_columns,
                                        std::size_t num_rows,
                                        std::size_t data_size) {
  std::vector<std::uint8_t> metadata(sizeof(header) + num_columns * sizeof(column_entry));
  header const head{
    PACK_MAGIC, PACK_VERSION, 0, static_cast<std::uint32_t>(num_columns), 0, num_rows, data_size};
  std::memcpy(metadata.data(), &head, sizeof(header));
  return metadata;
}

void set_entry(std::vector<std::uint8_t>& metadata, std::size_t index, column_entry const& entry) {
  std::memcpy(
    metadata.data() + sizeof(header) + index * sizeof(column_entry), &entry, sizeof(entry));
}

}  // namespace spillway::detail
