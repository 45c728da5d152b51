/**
 * @file pack.hpp
 * @brief A table as one contiguous buffer plus small metadata, and views back over it.
 *
 * This is what the spill store moves between tiers and what the shuffle sends: one allocation,
 * one copy, one checksum. The metadata is a few dozen bytes per column and lives on the host.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway {

/** @brief A packed table: host metadata plus one data buffer. */
struct packed_columns {
  std::vector<std::uint8_t> metadata;  ///< layout of each column inside `data`
  buffer data;                         ///< every column's mask, offsets and values
};

/**
 * @brief Copies `input` into one buffer from `mrs.output()`; every part is 64-byte aligned,
 * sliced masks are shifted to bit 0 and string offsets rebased to 0.
 * @note Needs no scratch memory.
 */
packed_columns pack(table_view const& input,
                    stream_view stream   = default_stream(),
                    memory_resources mrs = current_resources());

/** @return the size of the data buffer that `pack(input)` makes */
std::size_t packed_size(table_view const& input);

/**
 * @brief Views the table packed in `data` (of `data_kind` memory) as `metadata` describes, without
 * copying.
 * @throws spillway::corruption_error when the metadata is malformed or does not fit `data_size`
 */
table_view unpack(std::span<std::uint8_t const> metadata,
                  void const* data,
                  std::size_t data_size,
                  memory_kind data_kind);

/** @brief Views `packed` without copying. The view lives as long as `packed`. */
table_view unpack(packed_columns const& packed);

/** @return the number of rows recorded in packed `metadata` @throws corruption_error */
std::size_t packed_num_rows(std::span<std::uint8_t const> metadata);

namespace detail {
/** @brief `pack` without defaults: internals always pass their resources. */
packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs);
}  // namespace detail

}  // namespace spillway
