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

/** @return the size of the metadata that `pack` makes for a table of `num_columns` columns */
std::size_t packed_metadata_size(std::size_t num_columns) noexcept;

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

/**
 * @brief One partition of `pack_partitions`: its packed data in `frame` after `data_offset`
 * bytes of zeros that the caller may fill (with a header, say).
 */
struct packed_partition {
  std::size_t num_rows = 0;            ///< rows of the partition
  std::vector<std::uint8_t> metadata;  ///< as `pack` writes it
  buffer frame;                        ///< `data_offset` bytes, then the packed data
};

/**
 * @brief Packs the rows of each partition of `input` in one pass: partition `p` holds the rows
 * `i` with `partition_map[i] == p`, in input order, and its `frame` holds, after `data_offset`
 * bytes of zeros, exactly the bytes (and `metadata` exactly the metadata) that
 * `pack(gather(input, rows of p))` would make. So a column has a mask in every partition when it
 * has nulls in `input`, and in none otherwise.
 *
 * Every frame is allocated from `mrs.output()` before any row is written.
 * @param partition_map UINT8, UINT16, UINT32 or UINT64 ids in `[0, num_partitions)`, without
 * nulls, one per row
 * @param data_offset a multiple of 64: where the packed data starts in each frame
 * @return `num_partitions` partitions, empty ones included
 * @throws spillway::invalid_argument for another map type or size, nulls, an id out of range,
 * zero partitions or a misaligned `data_offset`
 */
std::vector<packed_partition> pack_partitions(table_view const& input,
                                              column_view const& partition_map,
                                              std::size_t num_partitions,
                                              std::size_t data_offset = 0,
                                              stream_view stream      = default_stream(),
                                              memory_resources mrs    = current_resources());

namespace detail {
/** @brief `pack` without defaults: internals always pass their resources. */
packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs);
/**
 * @brief `pack_partitions` without defaults; with `threads` above 1, large inputs are scattered
 * in up to `threads` parts (one per worker pool thread at most) on the worker pool (the frames
 * are still all allocated on the calling thread first).
 */
std::vector<packed_partition> pack_partitions(table_view const& input,
                                              column_view const& partition_map,
                                              std::size_t num_partitions,
                                              std::size_t data_offset,
                                              std::size_t threads,
                                              stream_view stream,
                                              memory_resources mrs);
/**
 * @brief The threads `pack_partitions` scatters with: one. Two measured no faster on the shuffle
 * benchmark, whose ranks already keep both cores busy, and slower on a loaded machine.
 */
inline constexpr std::size_t PACK_PARTITIONS_THREADS = 1;
/**
 * @brief `pack(input)` into one buffer from `mrs.output()` after `data_offset` zero bytes (a
 * multiple of 64), filled in place: no packed copy in between.
 */
packed_partition pack_at(table_view const& input,
                         std::size_t data_offset,
                         stream_view stream,
                         memory_resources mrs);
}  // namespace detail

}  // namespace spillway
