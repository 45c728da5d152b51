/**
 * @file shard_directory.hpp
 * @brief Who owns each partition, and where the shards of a partition are and how big they are.
 *
 * A shard is the rows one map task produced for one partition, packed into one buffer. Map tasks
 * are numbered per rank in the order they were added; the *global map order* is by rank, then by
 * that number, and is the order of a partition's shards when it is read. Each rank publishes one
 * vector of shard sizes per map task (one allgather for all its maps), so every rank answers
 * "where are the shards of partition p" locally, with no further messages.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway {

/**
 * @brief The rank that owns (reduces) `partition` among `num_ranks` ranks: `partition % num_ranks`.
 * @note Round robin keeps neighbouring ranges of a range partition on different ranks only when
 * there are more partitions than ranks; a distributed sort uses one partition per rank, where
 * partition r belongs to rank r.
 */
[[nodiscard]] constexpr int partition_owner(std::size_t partition, int num_ranks) noexcept {
  return static_cast<int>(partition % static_cast<std::size_t>(num_ranks));
}

/** @brief Names one shard of one shuffle. */
struct shard_key {
  int rank              = 0;  ///< the rank whose map task produced it
  std::size_t map       = 0;  ///< the map task's number on that rank
  std::size_t partition = 0;  ///< the partition its rows belong to
  friend bool operator==(shard_key const&, shard_key const&) = default;
};

/** @brief One shard's place and size, as the directory knows it. */
struct shard_location {
  shard_key key;
  std::size_t rows  = 0;  ///< rows in the shard
  std::size_t bytes = 0;  ///< bytes of the packed shard
};

/**
 * @brief The sizes of every shard of a shuffle, gathered from every rank.
 * @note Immutable after construction; safe to read from several threads.
 */
class shard_directory {
 public:
  /** @brief An empty directory (no ranks). */
  shard_directory() = default;
  /**
   * @brief Decodes what each rank published (`encode` of its maps' sizes), indexed by rank.
   * @throws spillway::corruption_error when an entry is malformed or has another partition count
   */
  shard_directory(std::vector<std::vector<std::byte>> const& published, std::size_t num_partitions);

  /**
   * @brief The bytes a rank publishes: its maps' shard sizes, `sizes[map][partition]` as (rows,
   * bytes).
   */
  [[nodiscard]] static std::vector<std::byte> encode(
    std::span<std::vector<std::pair<std::size_t, std::size_t>> const> sizes);

  /** @return the number of ranks */
  [[nodiscard]] int num_ranks() const noexcept { return static_cast<int>(maps_.size()); }
  /** @return the number of partitions */
  [[nodiscard]] std::size_t num_partitions() const noexcept { return num_partitions_; }
  /** @return the number of map tasks rank `rank` ran */
  [[nodiscard]] std::size_t num_maps(int rank) const;
  /** @return the number of map tasks of every rank */
  [[nodiscard]] std::size_t total_maps() const noexcept;
  /** @return the non-empty shards of `partition`, in global map order */
  [[nodiscard]] std::vector<shard_location> shards_of(std::size_t partition) const;
  /** @return the rows of `partition` over all shards */
  [[nodiscard]] std::size_t partition_rows(std::size_t partition) const;
  /** @return the packed bytes of `partition` over all shards */
  [[nodiscard]] std::size_t partition_bytes(std::size_t partition) const;
  /** @return one shard's location (rows and bytes 0 when it is empty) @throws invalid_argument */
  [[nodiscard]] shard_location locate(shard_key const& key) const;

 private:
  std::size_t num_partitions_ = 0;
  /// `maps_[rank][map][partition]` = (rows, bytes)
  std::vector<std::vector<std::vector<std::pair<std::size_t, std::size_t>>>> maps_;
};

}  // namespace spillway
