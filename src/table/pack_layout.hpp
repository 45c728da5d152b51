/**
 * @file pack_layout.hpp
 * @brief Internal: the layout of a packed table (see pack.hpp): its header and column entries,
 * and where each column's parts (mask, offsets, data) go in the data buffer.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/table/data_type.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <vector>

namespace spillway::detail {

inline constexpr std::uint32_t PACK_MAGIC   = 0x4B575053;  // "SPWK"
inline constexpr std::uint16_t PACK_VERSION = 1;
/// Every part of a packed buffer starts at a multiple of this.
inline constexpr std::size_t PART_ALIGNMENT = 64;

/// The head of a packed table's metadata; a `column_entry` per column follows it.
struct header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint32_t num_columns;
  std::uint32_t padding;
  std::uint64_t num_rows;
  std::uint64_t data_size;
};

/// A column's metadata. `precision` and `scale` (decimals only) sit in what was padding, zero in
/// entries of every other type, so tables packed before decimals read the same.
struct column_entry {
  std::uint8_t type;
  std::uint8_t unit;
  std::uint8_t nullable;
  std::uint8_t precision;
  std::int32_t scale;
  std::uint64_t null_count;
  std::uint64_t mask_offset;
  std::uint64_t offsets_offset;
  std::uint64_t data_offset;
  std::uint64_t data_bytes;
};

static_assert(sizeof(header) == 32);
static_assert(sizeof(column_entry) == 48);

/// Where a column's parts lie in the packed data (offsets from its start), and its data bytes.
struct part_layout {
  std::size_t mask_offset    = 0;
  std::size_t offsets_offset = 0;
  std::size_t data_offset    = 0;
  std::size_t data_bytes     = 0;
};

/// Places the parts of a column of `rows` rows (and `chars` characters when it is not fixed
/// width) at `cursor`; returns the cursor after them.
std::size_t place_column(std::size_t cursor,
                         data_type type,
                         bool nullable,
                         std::size_t rows,
                         std::size_t chars,
                         part_layout& part);

/// Places each column's parts; returns the total size. `stream` orders the reads of string
/// offsets that live on a CUDA device.
std::size_t layout(table_view const& input,
                   std::vector<part_layout>* parts,
                   stream_view stream = default_stream());

/// The metadata entry of a column placed at `part`.
column_entry make_entry(data_type type,
                        bool nullable,
                        std::size_t null_count,
                        part_layout const& part);

/// Metadata of `num_columns` columns of `num_rows` rows in `data_size` bytes, entries unset.
std::vector<std::uint8_t> make_metadata(std::size_t num_columns,
                                        std::size_t num_rows,
                                        std::size_t data_size);

/// Writes `entry` as the metadata entry of column `index`.
void set_entry(std::vector<std::uint8_t>& metadata, std::size_t index, column_entry const& entry);

}  // namespace spillway::detail
