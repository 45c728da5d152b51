/**
 * @file shuffle_options.hpp
 * @brief How a shuffle partitions its input, where its control messages live, how it limits a
 * receiver's inbox, what it counts, and the test hook that loses shards on purpose.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/shuffle/shard_directory.hpp>
#include <spillway/table/table_view.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace spillway {

/** @brief How rows are assigned to partitions. */
enum class partition_method : std::uint8_t {
  HASH,   ///< `hash_partition` of the key columns into `num_partitions`
  RANGE,  ///< `range_partition` by `splitters` into `splitters.num_rows() + 1`
};

/** @brief The partitioning a shuffle applies to every map task's input. */
struct partitioning {
  partition_method method = partition_method::HASH;
  std::vector<std::size_t> key_columns;  ///< key columns of the input, most significant first
  std::size_t num_partitions = 1;        ///< HASH: the partition count (at least 1)
  std::uint64_t seed         = 0;        ///< HASH: the hash seed
  /// RANGE: sorted splitter rows of the key columns; must outlive the shuffle. Every rank must
  /// use the same splitters (e.g. agreed with an allgather).
  table_view splitters;
  sort_order orders;  ///< RANGE: the key order, or empty for all ASCENDING, nulls BEFORE

  /** @return the number of partitions this partitioning makes */
  [[nodiscard]] std::size_t partitions() const noexcept {
    return method == partition_method::HASH ? num_partitions : splitters.num_rows() + 1;
  }
};

/** @brief Where a shard can be lost by the test hook. */
enum class shard_loss_point : std::uint8_t {
  AFTER_MAP,      ///< on the producer, right after the map task stored it
  BEFORE_SEND,    ///< on the producer, when it is about to be sent (fetched or pushed)
  AFTER_RECEIVE,  ///< on the owner, right after it arrived and was stored
};

/**
 * @brief Decides whether to drop a shard at a point. Called from the shuffle's threads at once:
 * must be thread-safe. It is asked only about a shard's first copy, never about a recomputed one,
 * so every loss is recovered by one recomputation.
 */
using shard_loss_hook = std::function<bool(shard_loss_point point, shard_key const& key)>;

/**
 * @return a hook that drops each (point, shard) with `probability`, decided by a hash of the
 * point, the shard and `seed`: the same drops in every run and on every thread schedule
 */
[[nodiscard]] shard_loss_hook random_shard_loss(double probability, std::uint64_t seed);

/** @brief How a shuffle is set up. Every rank must pass equal options (except `host`). */
struct shuffle_options {
  /** @param host_resource see `host` */
  explicit shuffle_options(resource_ref host_resource) : host(host_resource) {}

  /// Where small control messages (fetch requests, push headers, credits) are received: host
  /// memory, freed as soon as each is read.
  resource_ref host;
  partitioning partitions;  ///< what goes where
  /// Tells concurrent shuffles on one communicator apart: this shuffle uses the 8 tags from
  /// `shuffle_id * 8`, so `shuffle_id` must be below `max_message_tag / 8` and no other user of
  /// the communicator may use those tags.
  std::uint32_t shuffle_id = 1;
  int shard_priority       = 0;  ///< spill priority of shards (lower spills first)
  /**
   * @brief PUSH: bytes a receiver accepts from all senders before acknowledging them.
   *
   * Each sender may have `inbox_budget / size()` bytes (at least one shard) sent to one receiver
   * and not yet acknowledged; the receiver acknowledges a shard (a credit message with its size)
   * once it holds it in its spill store, where it can spill to host and disk. A sender out of
   * credit for a receiver waits for credits; the map tasks do not wait for sends.
   */
  std::size_t inbox_budget = 64_MiB;
  /**
   * @brief PULL: bytes of shards a reader asks for before it reads them.
   *
   * A reader asks for the next remote shards of a partition ahead, up to 8 requests and this many
   * bytes, and no more than `inbox_budget` (at least the next shard: 0 asks for one at a time), so
   * that their round trips overlap its reading. A shard that has arrived waits in device memory
   * outside the spill store (it cannot spill) until the reader next takes a shard, then goes into
   * the store.
   */
  std::size_t read_ahead_budget = 8_MiB;
  /// How often a reader asks for a shard that keeps arriving lost or corrupt before giving up.
  std::size_t max_fetch_attempts = 4;
  shard_loss_hook testing_shard_loss;  ///< drops shards on purpose (tests); empty: none
  /// Optional. Gets SHARD_STORED, SHARD_SENT, SHARD_RECEIVED and SHARD_RECOMPUTED (bytes: the
  /// packed shard; value: its partition) from every thread of the shuffle; must outlive it.
  event_sink* events = nullptr;
  /**
   * @brief Optional: where map outputs are persisted, so that a rerun after a failure resumes.
   *
   * Each map task added with an identity (`shuffler::add_map(input, identity)`) writes its shards
   * to one file here once it has run (under a temporary name, fsynced, then renamed: a file with
   * its final name is complete). A later shuffle with the same directory, the same partitioning
   * and the same identity reads the shards back, checksums verified, instead of running the map
   * task: its input is not read unless a shard is lost later. A damaged, partial or foreign file
   * is ignored (with a warning) and the map task runs. Maps added without an identity are never
   * persisted. The directory is the caller's to remove once the job has succeeded.
   */
  std::string checkpoint_directory;
};

/** @brief What a shuffle did on one rank. */
struct shuffle_statistics {
  std::size_t map_tasks         = 0;  ///< map tasks run (first runs, not recomputations)
  std::size_t resumed_maps      = 0;  ///< map tasks whose shards were read from a checkpoint
  std::size_t checkpoint_errors = 0;  ///< map tasks that could not be checkpointed (warned)
  std::size_t shards_written    = 0;  ///< non-empty shards the map tasks produced
  std::size_t bytes_written     = 0;  ///< their packed bytes
  std::size_t shards_read       = 0;  ///< shards read by this rank's readers
  std::size_t rows_read         = 0;  ///< their rows
  std::size_t bytes_read        = 0;  ///< their packed bytes
  /// Shards `take_each_batch` handed over in the memory they were stored or received in (no copy)
  std::size_t shards_taken_in_place = 0;
  std::size_t messages_sent         = 0;  ///< point-to-point messages sent (all kinds)
  std::size_t messages_received     = 0;  ///< point-to-point messages received (all kinds)
  std::size_t bytes_sent            = 0;  ///< bytes of those messages
  std::size_t bytes_received        = 0;  ///< bytes of those messages
  std::size_t lost_shards        = 0;  ///< shards found dropped, released, corrupt or not received
  std::size_t recomputed_maps    = 0;  ///< map tasks rerun (by this rank) to rebuild lost shards
  std::size_t fetch_retries      = 0;  ///< shard requests repeated after a loss on the way
  std::size_t backpressure_waits = 0;  ///< PUSH: times a sender waited for credits
  /// Device steps (map task, recomputation, pinning a shard) and receives that ran out of device
  /// memory and were run again alone, after every other buffer of the store was spilled
  std::size_t oom_retries = 0;
  /// `oom_retries` of map tasks and recomputations by the id of the task that ran them (0: none)
  std::map<std::uint64_t, std::size_t> oom_retries_by_task;
  /// PUSH: the most bytes this rank ever had sent to one receiver and not yet acknowledged
  /// (at most `inbox_budget / size()`, or one shard when a shard is larger)
  std::size_t peak_unacknowledged_bytes = 0;
  /// PULL: the most shard requests this rank's reader had in flight at once, the next shard's
  /// included (at most 8, within `read_ahead_budget` and `inbox_budget` bytes or the next shard
  /// alone)
  std::size_t peak_fetches_ahead = 0;
  std::chrono::nanoseconds map_time{0};   ///< time in map tasks (partitioning and packing)
  std::chrono::nanoseconds read_time{0};  ///< time reading partitions
};

}  // namespace spillway
