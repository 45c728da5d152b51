/**
 * @file partition.hpp
 * @brief Rows grouped into partitions by a hash of their keys or by ranges between splitters:
 * the map step of a shuffle.
 *
 * Both kernels are deterministic across ranks, runs and platforms: the same input gives the same
 * partitions everywhere, which is what lets a shuffle recompute a lost shard by rerunning its map
 * task.
 *
 * Row hash (`hash_rows`): for each key column in order, `h = XXH3_64bits_withSeed(bytes, h)`,
 * starting from `h = seed`, where `bytes` is the value in a fixed form:
 * - integers, BOOL8, timestamps and the other temporal types, and decimals (their unscaled
 *   integers): their bytes, little-endian (`size_of(type)` bytes);
 * - floats: `-0.0` hashed as `+0.0`, every NaN as the canonical quiet NaN, then their IEEE bits
 *   as an unsigned integer of the same width, little-endian;
 * - strings: their characters (no terminator, so "" hashes as zero bytes);
 * - nulls: no bytes, with the seed `h ^ null_hash_salt`, so a null differs from "" and from any
 *   value (up to collisions).
 * Equal keys (as `sort_order.hpp` defines equality) therefore hash equally.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

namespace spillway {

/** @brief Mixed into the running hash for a null key value (see the file comment). */
inline constexpr std::uint64_t null_hash_salt = 0x9E3779B97F4A7C15ULL;

/**
 * @brief A table whose rows are grouped by partition, and where each partition starts.
 *
 * Partition `p` is rows `[offsets[p], offsets[p + 1])` of `rows`; inside a partition the rows keep
 * their input order.
 * @note Owns its rows; the views `partition` and `partitions` return live as long as it does.
 */
struct partitioned_table {
  std::unique_ptr<table> rows;       ///< every input row, grouped by partition
  std::vector<std::size_t> offsets;  ///< `num_partitions() + 1` row offsets, from 0 to num_rows

  /** @return the number of partitions */
  [[nodiscard]] std::size_t num_partitions() const noexcept {
    return offsets.empty() ? 0 : offsets.size() - 1;
  }
  /** @return the rows of partition `index` (a view, no copy) @throws invalid_argument */
  [[nodiscard]] table_view partition(std::size_t index) const;
  /** @return a view per partition, in partition order */
  [[nodiscard]] std::vector<table_view> partitions() const;
};

/**
 * @brief The 64-bit hash of each row of `keys` (see the file comment for the exact definition).
 * @param keys the key columns
 * @param seed the starting value of every row's hash
 * @param stream the stream to run on
 * @param mrs the result from `mrs.output()`; nothing is taken from `mrs.temporary()`
 * @return a UINT64 column without nulls, one hash per row
 */
std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed   = 0,
                                  stream_view stream   = default_stream(),
                                  memory_resources mrs = current_resources());

/**
 * @brief Groups the rows of `input` into `num_partitions` partitions by their key hash: row `i`
 * goes to partition `hash_rows(keys)[i] % num_partitions`.
 * @param input the rows
 * @param key_columns indices into `input` of the key columns, most significant first (the order
 * changes the hash)
 * @param num_partitions at least 1
 * @param seed the hash seed (`hash_rows`)
 * @param stream the stream to run on
 * @param mrs the partitioned rows from `mrs.output()`; partition ids and the row map from
 * `mrs.temporary()`
 * @throws spillway::invalid_argument for zero partitions or a key column out of range
 */
partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t num_partitions,
                                 std::uint64_t seed   = 0,
                                 stream_view stream   = default_stream(),
                                 memory_resources mrs = current_resources());

/**
 * @brief Groups the rows of `input` into `splitters.num_rows() + 1` ranges of its keys.
 *
 * Tie rule: a row goes to the number of splitters that are less than *or equal to* it (its
 * `upper_bound` among the splitters). So partition `p` holds the keys in `[s[p-1], s[p])`: a
 * splitter is the first key of its partition, all rows with one key land in one partition, and
 * splitters from `quantile_splitters` reproduce its ranges exactly when keys are distinct.
 * @param input the rows
 * @param key_columns indices into `input` of the key columns, most significant first
 * @param splitters sorted under `orders`, with one column per key of the same type as that key
 * (as `quantile_splitters` of a sorted sample of the keys produces)
 * @param orders one entry per key column, or empty for all ASCENDING, nulls BEFORE
 * @param stream the stream to run on
 * @param mrs the partitioned rows from `mrs.output()`; partition ids and the row map from
 * `mrs.temporary()`
 * @throws spillway::invalid_argument when the splitters do not match the key types, are not
 * sorted, or a key column is out of range
 */
partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders = {},
                                  stream_view stream       = default_stream(),
                                  memory_resources mrs     = current_resources());

/**
 * @brief Groups the rows of `input` by a partition id per row (stable inside each partition).
 * @param partition_map UINT32 or UINT64 ids in `[0, num_partitions)`, without nulls, one per row
 * @param mrs the partitioned rows from `mrs.output()`; the row map from `mrs.temporary()`
 * @throws spillway::invalid_argument for another map type or size, nulls, an id out of range, or
 * zero partitions
 */
partitioned_table partition_by_map(table_view const& input,
                                   column_view const& partition_map,
                                   std::size_t num_partitions,
                                   stream_view stream   = default_stream(),
                                   memory_resources mrs = current_resources());

/**
 * @brief `hash_partition` and then `pack` of each partition, in one pass over the rows: partition
 * `p` of the result holds the bytes `pack(hash_partition(...).partition(p))` makes (see
 * `pack_partitions`, which places them after `data_offset` bytes of each frame), without the
 * grouped copy in between.
 * @param data_offset a multiple of 64: room for the caller before each partition's data
 * @param mrs the frames from `mrs.output()`; the partition ids from `mrs.temporary()`
 * @return `num_partitions` packed partitions, empty ones included
 * @throws spillway::invalid_argument as `hash_partition`
 */
std::vector<packed_partition> hash_partition_and_pack(table_view const& input,
                                                      std::span<std::size_t const> key_columns,
                                                      std::size_t num_partitions,
                                                      std::uint64_t seed      = 0,
                                                      std::size_t data_offset = 0,
                                                      stream_view stream      = default_stream(),
                                                      memory_resources mrs = current_resources());

/**
 * @brief `range_partition` and then `pack` of each partition, in one pass over the rows (as
 * `hash_partition_and_pack`).
 * @throws spillway::invalid_argument as `range_partition`
 */
std::vector<packed_partition> range_partition_and_pack(table_view const& input,
                                                       std::span<std::size_t const> key_columns,
                                                       table_view const& splitters,
                                                       sort_order const& orders = {},
                                                       std::size_t data_offset  = 0,
                                                       stream_view stream       = default_stream(),
                                                       memory_resources mrs = current_resources());

namespace detail {
/** @brief `hash_partition_and_pack` without defaults. */
std::vector<packed_partition> hash_partition_and_pack(table_view const& input,
                                                      std::span<std::size_t const> key_columns,
                                                      std::size_t num_partitions,
                                                      std::uint64_t seed,
                                                      std::size_t data_offset,
                                                      stream_view stream,
                                                      memory_resources mrs);
/** @brief `range_partition_and_pack` without defaults. */
std::vector<packed_partition> range_partition_and_pack(table_view const& input,
                                                       std::span<std::size_t const> key_columns,
                                                       table_view const& splitters,
                                                       sort_order const& orders,
                                                       std::size_t data_offset,
                                                       stream_view stream,
                                                       memory_resources mrs);
/** @brief `hash_rows` without defaults. */
std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed,
                                  stream_view stream,
                                  memory_resources mrs);
/** @brief `hash_partition` without defaults. */
partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t num_partitions,
                                 std::uint64_t seed,
                                 stream_view stream,
                                 memory_resources mrs);
/** @brief `range_partition` without defaults. */
partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders,
                                  stream_view stream,
                                  memory_resources mrs);
/** @brief `partition_by_map` without defaults. */
partitioned_table partition_by_map(table_view const& input,
                                   column_view const& partition_map,
                                   std::size_t num_partitions,
                                   stream_view stream,
                                   memory_resources mrs);
}  // namespace detail

}  // namespace spillway
