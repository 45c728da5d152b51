/**
 * @file distributed_sort.hpp
 * @brief A sort across ranks: sample, agree on splitters with one allgather, range-shuffle, then
 * sort what each rank received out of core. Rank r's output holds the r-th range of keys, so the
 * ranks' outputs, taken in rank order, are one sorted sequence.
 *
 * 1. Sample pass: each rank reads its input once and samples up to `samples_per_batch` key rows of
 *    every batch, each weighted by the rows it stands for (batch rows / sampled rows).
 * 2. Splitters: the weighted samples of every rank (at most `max_samples` rows in all, kept in
 *    host memory: they are metadata) are packed and exchanged with one allgather;
 *    every rank sorts the same sample (stably, in rank order) and picks the same `size() - 1`
 *    splitters at equal steps of cumulative weight. Equal keys share a partition (the range
 *    partition's tie rule), so a heavy key lands on one rank, whole.
 * 3. Shuffle pass: each rank reads its input again and adds every batch as a map task of a RANGE
 *    shuffle (pull or push) with `size()` partitions; partition r belongs to rank r.
 * 4. Local sort: each rank feeds the shards of its partition into an `external_sorter` on its
 *    spill store and hands the sorted batches to its sink, in order.
 *
 * Memory: everything goes through the given resources and the rank's spill store, as the
 * shuffle and the external sort document; the input is read twice rather than held.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/shuffle/communicator.hpp>
#include <spillway/shuffle/shuffle_options.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/table.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

namespace spillway {

/**
 * @brief A rank's input: each call hands every batch, in order, to `consume`. Called twice (the
 * sample pass and the shuffle pass); both calls must give the same rows.
 */
using batch_source =
  std::function<void(std::function<void(std::unique_ptr<table> batch)> const& consume)>;

/**
 * @brief A rank's input held in memory and lent, not copied: `count` batches, and `batch(i)`
 * lends batch i (a view and what keeps it alive and in place: a pinned `spillable_table`, say).
 * The sample pass reads each batch where it is, and each non-empty batch is a map task that
 * partitions it there; `batch(i)` is asked again to recompute a lost shard, so it must give
 * the same rows at every call, from any thread, until `distributed_sort` returns.
 */
struct lent_batches {
  std::size_t count = 0;                             ///< batches of this rank (may be none)
  std::function<map_rows(std::size_t index)> batch;  ///< lends batch `index` (< `count`)
};

/** @brief Receives a rank's sorted batches, in order; the view lives only during the call. */
using batch_sink = std::function<void(table_view const& batch)>;

/** @brief How a distributed sort runs; equal on every rank. */
struct distributed_sort_options {
  std::vector<std::size_t> key_columns;  ///< columns of each batch that form the key, in order
  sort_order orders;                     ///< per key column; empty: ascending, nulls first
  shuffle_mode mode             = shuffle_mode::PUSH;  ///< how the range shuffle moves shards
  std::size_t samples_per_batch = 1024;                ///< key rows sampled from every input batch
  /// The most sample rows of all ranks together (each rank keeps `max_samples / size()`, with
  /// weights scaled so they still add up to its rows); they are sorted in host memory.
  std::size_t max_samples   = 65536;
  std::uint64_t sample_seed = 0x5eed;  ///< the seed of the samples
  std::uint32_t shuffle_id  = 2;       ///< the shuffle's tags (see `shuffle_options`)
  /// See `shuffle_options::inbox_budget` (PUSH), which also bounds a PULL reader's read-ahead
  std::size_t inbox_budget = 64_MiB;
  /// Drops shards of the range shuffle on purpose (tests; see `shuffle_options`); empty: none.
  /// Each lost shard is recomputed from its map task's input.
  shard_loss_hook testing_shard_loss;
  /// The local out-of-core sort; its `key_columns` and `orders` are set from the fields above.
  /// With `sort.check_output_order` (the default) each rank checks its own output, and after
  /// the last batch the ranks also check, with one allgather, that each rank's first row does not
  /// sort before the last row of the ranks before it: a violation is a `logic_error` on every
  /// rank.
  external_sort_options sort;
  /// Test only: the ranks compare their boundary rows in reverse rank order, so that tests can
  /// see the check across ranks fail.
  bool testing_reverse_rank_order = false;
};

/** @brief What one rank's part of a distributed sort did. */
struct distributed_sort_statistics {
  std::size_t input_rows     = 0;            ///< rows this rank read (one pass)
  std::size_t input_batches  = 0;            ///< batches this rank read (one pass)
  std::size_t sampled_rows   = 0;            ///< sample rows of all ranks together
  std::size_t output_rows    = 0;            ///< rows this rank handed to its sink
  std::size_t output_batches = 0;            ///< batches this rank handed to its sink
  shuffle_statistics shuffle;                ///< this rank's shuffle counters
  external_sort_statistics sort;             ///< this rank's local sort
  std::chrono::nanoseconds sample_time{0};   ///< sample pass and splitter agreement
  std::chrono::nanoseconds shuffle_time{0};  ///< shuffle pass (maps until every rank finished)
  std::chrono::nanoseconds sort_time{0};     ///< reading the partition, sorting, emitting
};

/**
 * @brief Runs this rank's part of a distributed sort (a collective: every rank calls it).
 * @param comm the group; the sort uses its collectives and the tags of `options.shuffle_id`
 * @param store this rank's spill store (shards and sorted chunks live there)
 * @param input this rank's batches (may be none)
 * @param output receives this rank's sorted batches: the `comm.rank()`-th range of keys
 * @param stream the stream to run on
 * @param mrs batches and shards from `output` (the store's device resource), scratch from
 * `temporary`
 * @param host host memory for the sample exchange, control messages and the sorter's keys
 * @throws invalid_argument for no key columns, a key column out of range, or no samples asked for
 * (`samples_per_batch` or `max_samples` 0); what the shuffle, the
 * sort, `input` or `output` throw
 */
distributed_sort_statistics distributed_sort(communicator& comm,
                                             spill_store& store,
                                             batch_source const& input,
                                             batch_sink const& output,
                                             distributed_sort_options const& options,
                                             stream_view stream,
                                             memory_resources mrs,
                                             resource_ref host);

/**
 * @brief `distributed_sort` of batches held in memory: as above, but no batch is copied (the
 * other form keeps a copy of each batch in the store as its map task's lineage); the same
 * rows give the same output.
 * @throws invalid_argument as above, and for `input.count > 0` without `input.batch`
 */
distributed_sort_statistics distributed_sort(communicator& comm,
                                             spill_store& store,
                                             lent_batches const& input,
                                             batch_sink const& output,
                                             distributed_sort_options const& options,
                                             stream_view stream,
                                             memory_resources mrs,
                                             resource_ref host);

}  // namespace spillway
