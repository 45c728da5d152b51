/**
 * @file shuffler.hpp
 * @brief What the pull and push shuffles share: map tasks in, a partition's batches out, shards
 * in the spill store, lost shards recomputed from their map task's input.
 *
 * Life of a shuffle, on every rank of the communicator:
 * 1. `add_map(input)` any number of times (zero is fine): runs the map task, partitions its rows
 *    and stores one packed shard per non-empty partition, spillable, in this rank's spill store.
 *    The shuffle keeps `input` (the lineage) to rerun the map task if a shard is lost.
 * 2. `finish_maps()` (collective): every rank publishes its shard sizes (one allgather); each
 *    rank's `directory()` then knows every shard.
 * 3. Read the partitions this rank owns (`owned_partitions()`, `partition_owner`):
 *    `for_each_batch(p, ...)` gives its shards one at a time (`take_each_batch` as tables of
 *    their own), `read_partition(p)` one table.
 *    Rows come in global map order (rank, then map number), and inside a map in input order.
 *    A rank that runs its map tasks on several threads fixes their numbers in its read order
 *    first (`reserve_map`, then `add_reserved_map` from any thread).
 * 4. `close()` (collective): waits until every rank has read, then stops the service threads.
 *
 * Each rank runs a service thread that answers shard requests on the shuffle's request tag; a
 * request for a shard the rank no longer has (released after it was sent, dropped, or whose spill
 * data is corrupt) reruns only that map task from its lineage and answers with the rebuilt shard,
 * identical because partitioning is deterministic. The stop message is sent by the rank to itself.
 *
 * Memory: shards are built with `mrs.output()` (which must be the spill store's device resource,
 * or a resource of the same kind) and registered with the store at once; received shards are
 * allocated from `mrs.output()` when they arrive and registered at once, except that a pull
 * reader's shards asked for ahead wait outside the store, up to `read_ahead_budget` bytes, until it
 * next takes a shard; scratch comes from `mrs.temporary()`; control messages from
 * `shuffle_options::host`.
 *
 * Out of device memory: the failure callback of the device resource spills what it can first.
 * When an allocation still fails, the step that made it (a map task, a recomputation, pinning a
 * shard to send or read it) is rolled back and run again alone: the rank's other device steps
 * finish first, shards in flight are handed over, and every unpinned buffer of the store is
 * spilled; while spilling frees something (receives are not steps and may fill the device
 * meanwhile), up to 8 times. A shard whose receive found no room is lost to that receive; its
 * reader makes room the same way and asks its producer again. Only a step that does not fit the
 * device beside what cannot spill (pinned shards, a reader's shards asked for ahead) fails, with
 * `out_of_memory`.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/shuffle/communicator.hpp>
#include <spillway/shuffle/shard_directory.hpp>
#include <spillway/shuffle/shuffle_options.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace spillway {

namespace detail {
class shuffle_engine;
}

/** @brief How shards travel from their producer to their partition's owner. */
enum class shuffle_mode : std::uint8_t {
  PULL,  ///< kept by the producer until the owner fetches them (scatter on demand)
  PUSH,  ///< sent to the owner as soon as they exist, with credit-based backpressure
};

/**
 * @brief A map task's input: called by `add_map` (again there when an out-of-memory rolls the
 * map's attempt back), and later only to recompute a lost shard. Must return the same rows every
 * time, and may be called from the shuffle's service thread.
 */
using map_input = std::function<std::unique_ptr<table>(stream_view stream, memory_resources mrs)>;

/**
 * @brief The rows of a map task lent rather than copied: a view, and what keeps its memory alive
 * and in place until the shuffle drops this (a pinned `spillable_table`, say).
 */
struct map_rows {
  table_view rows;                         ///< the map task's rows
  std::shared_ptr<void const> keep_alive;  ///< held while `rows` is read; may be null
};

/**
 * @brief A map task's input that lends its rows (`map_rows`) instead of returning a copy: the
 * map partitions them straight from where they are. Called as `map_input` is (once, and again
 * to recompute); the shuffle holds the result only while it partitions, on the calling thread.
 */
using map_view_input = std::function<map_rows(stream_view stream, memory_resources mrs)>;

/**
 * @brief One rank's part of a shuffle. Use `pull_shuffler` or `push_shuffler`.
 * @note `add_map`, `for_each_batch` and `read_partition` may be called from several threads of a
 * rank (reads of one shuffle are serialized); `finish_maps` and `close` are collectives, called
 * once by one thread per rank. The communicator and the spill store must outlive the shuffler.
 */
class shuffler {
 public:
  /**
   * @param mode pull or push
   * @param comm this rank's endpoint; the shuffle uses only its own tags (`shuffle_options`)
   * @param store where this rank's shards live
   * @param options equal on every rank
   * @param stream the stream copies and kernels are ordered on
   * @param mrs shards and results from `output`, scratch from `temporary`
   * @throws spillway::invalid_argument for invalid options (no partitions, a shuffle id out of
   * range, unsorted splitters are found by the first map task)
   */
  shuffler(shuffle_mode mode,
           communicator& comm,
           spill_store& store,
           shuffle_options options,
           stream_view stream,
           memory_resources mrs);
  /** @brief Stops the service threads (without waiting for other ranks when `close` was not
   * called). */
  ~shuffler();
  shuffler(shuffler const&)            = delete;
  shuffler& operator=(shuffler const&) = delete;
  shuffler(shuffler&&)                 = delete;
  shuffler& operator=(shuffler&&)      = delete;

  /**
   * @brief Runs a map task: `input` once now, partitioned into spillable shards (PUSH: queued
   * for sending; this call does not wait for sends).
   * @return the map task's number on this rank
   * @throws what `input` or the partitioning throws; logic_error after `finish_maps`;
   * invalid_argument when `input` has other column types than this rank's first map input
   */
  std::size_t add_map(map_input input);
  /**
   * @brief `add_map(input)` of a map task named by `identity` (unique in the shuffle, the same in
   * every run, e.g. input file, size, modification time and batch number): with
   * `shuffle_options::checkpoint_directory` set, its shards are read from a checkpoint written by
   * an earlier run when there is one (without calling `input`), and written to one otherwise.
   */
  std::size_t add_map(map_input input, std::string const& identity);
  /**
   * @brief `add_map` of a copy of `batch`, kept spillable in the store as the map's lineage.
   */
  std::size_t add_map(table_view const& batch);
  /** @brief `add_map(input)` of a map task that lends its rows: no copy of them is made. */
  std::size_t add_map(map_view_input input);
  /** @brief `add_map(input, identity)` of a map task that lends its rows. */
  std::size_t add_map(map_view_input input, std::string const& identity);

  /**
   * @brief Holds the next map number of this rank for a map task added later with
   * `add_reserved_map`. Rows come in map-number order, so a rank that reads its input on one
   * thread, reserving a number per batch as it reads, and runs the map tasks on several threads
   * keeps its output in read order. Every number reserved must be added before `finish_maps`.
   * @throws logic_error after `finish_maps`
   */
  std::size_t reserve_map();
  /**
   * @brief `add_map(input, identity)` as map number `reserved` (from `reserve_map`); may run on
   * any thread, in any order of the numbers.
   * @throws logic_error when `reserved` was not reserved or was added already; what `add_map`
   * throws (the number then stays reserved: the shuffle cannot finish its maps)
   */
  std::size_t add_reserved_map(std::size_t reserved,
                               map_input input,
                               std::string const& identity = {});

  /**
   * @brief Collective: waits until this rank's pushes are acknowledged (PUSH), then publishes
   * every rank's shard sizes.
   * @throws communication_error; the first error of the sender thread (PUSH);
   * invalid_argument when ranks ran map inputs with different column types
   */
  void finish_maps();

  /** @return every shard's place and size (after `finish_maps`) */
  [[nodiscard]] shard_directory const& directory() const;
  /** @return the partitions `partition_owner` gives this rank, ascending */
  [[nodiscard]] std::vector<std::size_t> owned_partitions() const;

  /**
   * @brief Calls `consume` with each non-empty shard of `partition` in global map order, pinned
   * on the device only during the call. Lost or corrupt shards are fetched again or recomputed.
   * @note Each partition should be read once, by its owner: a shard is released by its holder
   * once read, so reading again recomputes it.
   * @throws invalid_argument for a partition out of range or, PUSH, not owned by this rank;
   * logic_error before `finish_maps`; io_error when a shard cannot be had after
   * `max_fetch_attempts`
   */
  void for_each_batch(std::size_t partition,
                      std::function<void(table_view const& batch)> const& consume);
  /**
   * @brief Hands each non-empty shard of `partition` to `consume` as a table of its own, in the
   * order of `for_each_batch`: the shard's memory itself when it is on the device, not pinned,
   * when its turn comes (no copy: the columns are slices of it, from the resource the shard was
   * stored or received in, no longer counted by the spill store), else a copy from
   * `mrs.output()`. For a reader that keeps the rows, such as a sort.
   * @see for_each_batch for the order and errors
   */
  void take_each_batch(std::size_t partition,
                       std::function<void(std::unique_ptr<table> batch)> const& consume);
  /**
   * @brief The rows of `partition` as one table from `mrs.output()` (its shards are fetched into
   * the spill store first, so they can spill while the others arrive). An empty partition is an
   * empty table with the columns of the map inputs (of any rank's, known after `finish_maps`),
   * or with no columns when no rank ran a map task.
   * @see for_each_batch for the order and errors
   */
  [[nodiscard]] std::unique_ptr<table> read_partition(std::size_t partition);

  /** @brief Collective: waits for every rank to finish reading, then stops the service threads. */
  void close();

  /** @return this rank's counters so far */
  [[nodiscard]] shuffle_statistics statistics() const;
  /** @return the number of partitions */
  [[nodiscard]] std::size_t num_partitions() const noexcept;
  /** @return pull or push */
  [[nodiscard]] shuffle_mode mode() const noexcept;

 private:
  std::unique_ptr<detail::shuffle_engine> impl_;
};

}  // namespace spillway
