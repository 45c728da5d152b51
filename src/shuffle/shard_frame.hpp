/**
 * @file shard_frame.hpp
 * @brief A shard as one buffer: a 64-byte header, the packed table's metadata and its data, so
 * that one spillable buffer holds it and one message carries it. Private to the shuffle layer.
 *
 * Layout (all integers 64-bit, host order): magic, metadata bytes, rows, data offset, data bytes,
 * then zero padding to 64 bytes; the metadata; zero padding to a multiple of 64; the data.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace spillway::detail {

/** @brief Packs `rows` into one frame from `mrs.output()`, in place (no packed copy first). */
buffer make_shard_frame(table_view const& rows, stream_view stream, memory_resources mrs);

/** @return where the packed data starts in the frame of a table of `num_columns` columns */
std::size_t shard_frame_data_offset(std::size_t num_columns) noexcept;

/**
 * @brief Turns `packed`, packed at `shard_frame_data_offset` of its columns, into a frame by
 * writing the header and metadata in front of its data (no copy of the data): the same bytes as
 * `make_shard_frame` of its rows.
 */
buffer finish_shard_frame(packed_partition&& packed, stream_view stream);

/**
 * @brief Views the table in a frame of `size` bytes at `bytes` (of `kind` memory), without
 * copying the data; `metadata` receives the host copy of the metadata the view was decoded from.
 * @throws spillway::corruption_error when the frame is malformed
 */
table_view view_shard_frame(void const* bytes,
                            std::size_t size,
                            memory_kind kind,
                            stream_view stream,
                            std::vector<std::uint8_t>& metadata);

/**
 * @brief The table in `frame` as a table of its own, without copying: its columns' buffers are
 * slices of the frame, which goes with the last of them.
 * @param rows the view of the frame's table (`view_shard_frame` of `frame`'s bytes)
 * @throws spillway::invalid_argument when a part of `rows` lies outside the frame
 */
std::unique_ptr<table> adopt_shard_frame(buffer&& frame,
                                         table_view const& rows,
                                         stream_view stream);

}  // namespace spillway::detail
