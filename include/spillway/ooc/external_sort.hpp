/**
 * @file external_sort.hpp
 * @brief Out-of-core sort: a stream of batches of any total size comes out sorted while device
 * memory stays within its budget.
 *
 * ## Algorithm (merge strategy)
 * 1. Each pushed batch is sorted on the device and cut into `chunks_per_batch` chunks by rows.
 *    Each chunk goes to the spill store (so it can move to host or disk under pressure); its
 *    minimum key (its first row's keys) is kept outside it, on the host.
 * 2. A round orders the chunks by minimum key and loads the chunks with the smallest minimums
 *    while the merge fits the merge budget (inputs plus merged output); at least one chunk is
 *    always loaded. It merges them and emits every row whose key is <= the smallest minimum
 *    among the chunks not loaded: no unloaded row can precede those rows. The rest of the merged
 *    rows is cut into chunks again and goes back to the store.
 * 3. Emitted rows accumulate (spillable) until an output batch of about
 *    `output_batch_bytes` is ready; an output batch never exceeds it by more than
 *    `output_slack`. When everything is emitted, the remainder is flushed.
 * Equal keys are emitted together (the bound is inclusive), so the all-equal case empties the
 * loaded chunks in one round instead of one row per round.
 *
 * Everything not being computed on lives in the spill store: when an output batch is handed
 * to the caller, every other row of the sort is spillable.
 * @note Not thread-safe: one task drives a sorter.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace spillway {

/** @brief How an external sort is configured. */
struct external_sort_options {
  std::vector<std::size_t> key_columns;  ///< columns of each batch that form the key, in order
  sort_order orders;                     ///< per key column; empty: ascending, nulls first
  /// Chunks each sorted batch is cut into.
  std::size_t chunks_per_batch = 8;
  /// Bytes of loaded chunks plus their merged output that one round may hold on the device.
  std::size_t merge_budget_bytes = 64_MiB;
  /// The size output batches aim at.
  std::size_t output_batch_bytes = 32_MiB;
  /// An output batch may exceed `output_batch_bytes` by at most this fraction.
  double output_slack = 0.25;
  /// Spill priority of chunks (pending output gets one more, so it spills after chunks).
  int chunk_priority = 0;
  /// When set (with `task`), every device step runs under the OOM protocol: a step that gets
  /// retry_oom rolls back (its inputs stay in the store) and runs again; one that must split
  /// sorts half a batch, or merges half as many chunks, or splits a lone chunk.
  oom_coordinator* coordinator = nullptr;
  /// The task that drives the sort; also asked for a lease covering each merge.
  task_context* task = nullptr;
};

/** @brief What a sort did, to judge payload movement. */
struct external_sort_statistics {
  std::size_t input_rows     = 0;
  std::size_t input_bytes    = 0;
  std::size_t output_rows    = 0;
  std::size_t output_batches = 0;
  std::size_t rounds         = 0;  ///< merge rounds
  std::size_t retries        = 0;  ///< steps rolled back and run again
  std::size_t splits         = 0;  ///< steps that split their input
  std::size_t chunks_created = 0;
  /// Payload bytes written by sort/merge/gather/copy/concatenate on the device.
  std::size_t bytes_copied = 0;
  /// bytes_copied / input_bytes (0 for an empty input).
  [[nodiscard]] double copies_per_input_byte() const noexcept {
    return input_bytes == 0 ? 0.0
                            : static_cast<double>(bytes_copied) / static_cast<double>(input_bytes);
  }
};

/**
 * @brief Sorts a stream of batches; see the file comment.
 *
 * Usage: `push()` every batch, `finish()`, then `next()` until it returns null.
 */
class external_sorter {
 public:
  /**
   * @param store where chunks and pending output live; must outlive the sorter
   * @param options keys, sizes and budgets
   * @param stream the stream device work is ordered on
   * @param mrs device resources: merges and chunks use `mrs.temporary()` (the device resource
   *        the store unspills into), output batches come from `mrs.output()`
   * @param host where the small per-chunk minimum keys live
   * @throws spillway::invalid_argument for no key columns or zero sizes
   */
  external_sorter(spill_store& store,
                  external_sort_options options,
                  stream_view stream,
                  memory_resources mrs,
                  resource_ref host);
  ~external_sorter();
  external_sorter(external_sorter const&)            = delete;
  external_sorter& operator=(external_sorter const&) = delete;
  external_sorter(external_sorter&&)                 = delete;
  external_sorter& operator=(external_sorter&&)      = delete;

  /**
   * @brief Sorts `batch` and stores its chunks.
   * @throws spillway::invalid_argument when a key column is missing or the schema differs from
   *         earlier batches
   * @throws spillway::logic_error after `finish()`
   */
  void push(std::unique_ptr<table> batch);
  /** @brief No more input. */
  void finish();
  /**
   * @return the next sorted output batch (on the device), or null when all rows were returned
   * @throws spillway::logic_error before `finish()`
   */
  [[nodiscard]] std::unique_ptr<table> next();

  [[nodiscard]] external_sort_statistics const& statistics() const noexcept { return stats_; }

 private:
  struct chunk;
  struct pending_piece;

  struct round_result;
  void add_chunk(std::unique_ptr<table> rows);
  void sort_into_chunks(table_view const& batch, std::vector<std::unique_ptr<table>>& out);
  void merge_round();
  round_result merge_attempt(std::vector<std::size_t> const& loaded,
                             std::optional<std::size_t> bound_row,
                             table_view const& minimums);
  /// Runs `attempt` under the OOM protocol; returns false when the protocol asks to split.
  template <typename Attempt>
  bool run_protected(Attempt&& attempt);
  void emit(std::unique_ptr<table> rows);
  std::unique_ptr<table> take_pending();

  spill_store& store_;
  external_sort_options options_;
  stream_view stream_;
  memory_resources mrs_;
  resource_ref host_;
  std::vector<chunk> chunks_;
  std::deque<pending_piece> pending_;
  std::size_t pending_bytes_      = 0;
  std::size_t target_chunk_bytes_ = 0;
  bool finished_                  = false;
  std::size_t num_columns_        = 0;
  std::vector<data_type> schema_;
  external_sort_statistics stats_;
};

}  // namespace spillway
