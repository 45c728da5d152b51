/**
 * @file external_sort.hpp
 * @brief Out-of-core sort: a stream of batches of any total size comes out sorted while device
 * memory stays within its budget.
 *
 * ## Algorithm (merge strategy)
 * 1. Each pushed batch is sorted on the device and cut into `chunks_per_batch` chunks by rows
 *    (fewer when chunks would be smaller than 1/512 of the merge budget, so that a round loads
 *    at most about 256 of them).
 *    Each chunk goes to the spill store (so it can move to host or disk under pressure); its
 *    minimum key (its first row's keys) is kept outside it, on the host.
 * 2. A round orders the chunks by minimum key and loads the chunks with the smallest minimums
 *    while the merge fits the merge budget (inputs plus merged output); at least one chunk is
 *    always loaded. It computes their merge order and emits every row whose key is <= the
 *    smallest minimum among the chunks not loaded: no unloaded row can precede those rows. The
 *    order is gathered straight into pieces: the emitted rows into pieces of about an output
 *    batch, the rest into chunks that go back to the store (one copy of each merged row).
 * 3. Emitted rows accumulate (spillable) until an output batch of about
 *    `output_batch_bytes` is ready; an output batch never exceeds it by more than
 *    `output_slack`. A stored piece of at least half an output batch that is still on the
 *    device is handed out as it is (no copy); smaller or spilled pieces are copied together.
 *    When everything is emitted, the remainder is flushed.
 * Equal keys are emitted together (the bound is inclusive), so the all-equal case empties the
 * loaded chunks in one round instead of one row per round. Before a round, chunks that overlap
 * no other (the one with the smallest minimum, while its last key is <= the next smallest
 * minimum: presorted input) go to the output as they are stored, unloaded and unmerged.
 * A batch whose keys are already in order (`is_sorted`) is cut into chunks by copies, unsorted.
 *
 * ## Input that fits one sort, and runs of many batches (merge and auto strategies)
 * While the batches pushed so far, one source id per row and a sort's two records per row (or,
 * once those are freed, the sorted copy of the batches) fit the merge budget (keys fixed-width
 * and at most 24 bytes with their null bytes), batches wait in the store unsorted. If
 * `finish()` finds them all still waiting, it sorts their keys at once
 * (`detail::sorted_sources`, stable: ties in push order) and each `next()` gathers the next
 * output batch straight from the batches: one copy of the input, no chunks, no merge, no
 * sample. When the sorted order walks the batches in a few ascending runs (a time series sorted
 * by a key of a few hundred values, then by time: `detail::scatter_pays`), each batch no larger
 * than an output batch may be, and the memory is there (the merge budget and a lease taken
 * without waiting), the batches themselves become the output batches instead: their
 * fixed-width columns without nulls are rows moved in place (each batch read in order and
 * scattered, so a cache line of it is read once, where a gather in output order reads one for
 * each value), the others gathered anew; then the batches are handed out in order, spillable
 * until then. A table of one 8-byte integer key and one value column of at most 8 bytes (no nulls)
 * is sorted with its values carried in the sort's records (`detail::sorted_key_values`): the
 * batches go once sorted, and each output batch is a copy of the next sorted rows, no gather. Past
 * the bound, the waiting batches become one sorted run: their keys sorted at once and their rows
 * gathered straight into chunks (and sampled, in push order), and the next batches wait for the
 * next run. Runs of many batches mean fewer sorted runs for the merge: 300M rows under 512 MiB made
 * 300 runs of one batch, more than a round loads chunks, so that rounds merged and recopied what
 * they could not emit. Batches that are each in order already, or a run whose sort must split under
 * the OOM protocol, are sorted batch by batch.
 *
 * ## Algorithm (sample strategy)
 * 1. As in the merge strategy, each pushed batch is sorted and cut into chunks; each chunk keeps
 *    its first and last keys on the host. Besides, a uniform sample of each batch's keys is kept
 *    on the host (`samples_per_batch` rows for a batch the size of the first one, the same rate
 *    for the others; halved whenever the sample passes `max_samples` rows).
 * 2. `finish()` sorts the sample and picks `k - 1` quantile splitters, `k` chosen so that one
 *    range and its merged output fill `range_fill` of the merge budget. A splitter that covers
 *    at least half a range of the sample (a heavy key) gets a range of its own: rows equal to it
 *    are cut off by both `lower_bound` and `upper_bound`. Every chunk whose first and last keys
 *    fall in one range is moved to that range as it is (no copy); the others are cut by the
 *    splitters (positions from `lower_bound`/`upper_bound` of the splitters in the chunk) into
 *    one piece per range, each stored spillable.
 * 3. Ranges are emitted in order. A range whose pieces do not overlap (a single piece, equal
 *    keys, presorted input) hands its pieces to the output without a merge. Otherwise its
 *    pieces become the chunks of the merge strategy above: one round when they fit the merge
 *    budget, as many rounds as needed when the sample misjudged the range (skew).
 * `sort_strategy::AUTO` samples like the sample strategy and decides at `finish()`: the sample
 * strategy when the input exceeds one merge and the sample shows a heavy key (one that gets a
 * range of its own: at least half a range's share of the sample), the merge strategy otherwise.
 * Either way the chunks of step 1 are the same, so deciding late costs nothing but the sample.
 * docs/BENCHMARKS.md ("Merge vs sample strategy") has the measurements behind the rule.
 *
 * ## Many tasks
 * Tasks sort side by side, each its own batches into its own sorter (same keys, orders and
 * store); each then `seal()`s it (its waiting batches sorted into chunks), and one sorter
 * `absorb()`s the others: their chunks and samples become its own, and its `finish()` and
 * `next()` merge them all, within its merge budget, as if it had sorted every batch itself. Rows
 * of equal keys from different tasks come out in no particular order among themselves.
 *
 * Everything not being computed on lives in the spill store: when an output batch is handed
 * to the caller, every other row of the sort is spillable.
 * @note Not thread-safe: one task drives a sorter (`absorb` reads the other sorter: its task
 * must be done with it).
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/order_check.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/spill/spillable_table.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <vector>

namespace spillway {

/** @brief How an external sort orders its chunks into output; see the file comment. */
enum class sort_strategy : std::uint8_t {
  MERGE,   ///< rounds of k-way merges bounded by the smallest unloaded minimum
  SAMPLE,  ///< sample-based range partitioning, then one merge per range
  AUTO,    ///< chosen at `finish()` from the input size and the sample
};

/** @return "MERGE", "SAMPLE" or "AUTO" */
[[nodiscard]] char const* to_string(sort_strategy strategy) noexcept;

/** @brief How an external sort is configured. */
struct external_sort_options {
  std::vector<std::size_t> key_columns;  ///< columns of each batch that form the key, in order
  sort_order orders;                     ///< per key column; empty: ascending, nulls first
  /// Chunks each sorted batch is cut into. More, smaller chunks let a round load the front of
  /// more sorted batches at once, so fewer rows are merged again or cut back into chunks; past
  /// 64 the per-chunk work costs more than it saves (docs/BENCHMARKS.md, "Chunks per batch").
  std::size_t chunks_per_batch = 64;
  /// Bytes of loaded chunks plus their merged output that one round may hold on the device.
  std::size_t merge_budget_bytes = 64_MiB;
  /// The size output batches aim at. A batch handed out as it is stored (no copy) may hold as
  /// little as half of it; the last batch of the sort any less; a batch sorted in place (see
  /// "Input that fits one sort") as much as its pushed batch held.
  std::size_t output_batch_bytes = 32_MiB;
  /// An output batch may exceed `output_batch_bytes` by at most this fraction.
  double output_slack = 0.25;
  /// The strategy; AUTO decides at `finish()`.
  sort_strategy strategy = sort_strategy::AUTO;
  /// Sample strategy: key rows sampled from a batch the size of the first batch (others at the
  /// same rate).
  std::size_t samples_per_batch = 256;
  /// Sample strategy: the most sampled rows kept; beyond it the sample is halved at random.
  std::size_t max_samples = 65536;
  /// Sample strategy: the fraction of the merge budget one range (its pieces plus their merged
  /// output) aims at; the rest absorbs the sample's error.
  double range_fill = 0.75;
  /// Sample strategy: the seed of the samples.
  std::uint64_t sample_seed = 0x5eed;
  /// Spill priority of chunks (pending output gets one more, so it spills after chunks).
  int chunk_priority = 0;
  /// When set (with `task`), every device step runs under the OOM protocol: a step that gets
  /// retry_oom rolls back (its inputs stay in the store) and runs again; one that must split
  /// sorts half a batch, or merges half as many chunks, or splits a lone chunk.
  oom_coordinator* coordinator = nullptr;
  /// The task that drives the sort; also asked for a lease covering each merge.
  task_context* task = nullptr;
  /// Each output batch is checked against itself and the batch before it (`order_checker`,
  /// plain value comparisons that share no code with the sort's key encoding): a row out of
  /// order is an internal error (`logic_error`) from `next()`, never output.
  bool check_output_order = true;
  /// Test only: the output batch with this number (from 0) is handed out with its rows
  /// reversed (host memory only), so that tests can see what the order check does.
  std::optional<std::size_t> testing_reverse_output_batch;
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
  /// Sorted runs of several batches (waiting batches sorted at once into chunks).
  std::size_t batch_runs = 0;
  /// Payload bytes written into the tables the sort makes and hands on (chunks, merged runs and
  /// output batches) by sort/merge/gather/copy/concatenate on the device. A sort's own scratch
  /// is not counted: its (prefix, row) records, its sorted ids and decoded keys, and the sorted
  /// key and value columns of `detail::sorted_key_values` (whose records carry the values).
  std::size_t bytes_copied = 0;
  /// The strategy that ran (AUTO resolved at `finish()`).
  sort_strategy strategy_used  = sort_strategy::MERGE;
  std::size_t sampled_rows     = 0;  ///< sample strategy: key rows sampled
  std::size_t ranges           = 0;  ///< sample strategy: ranges the input was cut into
  std::size_t ranges_in_rounds = 0;  ///< ranges that exceeded the merge budget (merge rounds)
  std::size_t ranges_unmerged  = 0;  ///< ranges handed to the output without a merge
  /// Chunks handed to the output as stored, without a merge: none of their keys is above the
  /// first key of another chunk (presorted input).
  std::size_t chunks_unmerged = 0;
  /// Output batches that are input batches of one sort with their rows moved in place (a
  /// scatter, when the sorted order walks the input in a few ascending runs).
  std::size_t batches_sorted_in_place = 0;
  /// Seconds spent checking the order of the output (`check_output_order`).
  double order_check_seconds = 0.0;
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
  /**
   * @brief No more input to this sorter, which another will `absorb`: batches waiting for one
   * sort are sorted into chunks (device work, under the OOM protocol of this sorter's task).
   * @throws spillway::logic_error after `finish()`
   */
  void seal();
  /**
   * @brief Takes over the chunks, samples and statistics of `other`, a sealed sorter of the same
   * keys and orders over the same store whose batches have the same columns; `other` is left
   * empty and finished (its `next()` returns null). Host work only.
   * @throws spillway::invalid_argument when the columns or keys differ
   * @throws spillway::logic_error when either is finished or `other` is not sealed
   */
  void absorb(external_sorter& other);
  /**
   * @brief No more input. With the sample strategy, chooses the splitters and cuts the chunks
   * into ranges (device work, under the OOM protocol when configured).
   */
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

  /// The next output batch, before the order check of `next()`.
  [[nodiscard]] std::unique_ptr<table> next_batch();
  /// Checks `batch` (see `check_output_order`).
  /// @throws spillway::logic_error at a row out of order
  void check_order(table_view const& batch);

  struct round_result;
  /// Chunks a sorted batch of `bytes` and `rows` is cut into: `chunks_per_batch`, fewer when
  /// the merge budget is so large that smaller chunks would only deepen the merge, more when
  /// fewer than eight chunks would fit one merge round.
  [[nodiscard]] std::size_t chunks_for(std::size_t bytes, std::size_t rows) const noexcept;
  chunk make_chunk(std::unique_ptr<table> rows);
  void add_chunk(std::unique_ptr<table> rows);
  void sample_batch(table_view const& batch);
  /// Halves the sample (uniformly) while it holds more than `max_samples` rows.
  void bound_sample();
  void partition_into_ranges();
  void cut_chunks(std::deque<chunk> pending,
                  table_view const& lower,
                  table_view const& upper,
                  std::vector<bool> const& heavy);
  void start_range(std::vector<chunk> pieces);
  bool in_key_order(std::vector<chunk>& pieces);
  void emit_stored(chunk piece);
  /// What is known of a batch's order before it is sorted into chunks.
  enum class batch_order : std::uint8_t { UNKNOWN, IN_ORDER };
  /// What `sort_run` did with the batches of a run.
  enum class run_outcome : std::uint8_t {
    SORTED,      ///< sorted at once into chunks
    IN_ORDER,    ///< not sorted: each batch is in order already
    NOT_SORTED,  ///< not sorted: the sort did not fit
  };
  /// Cuts `batch` into sorted chunks: by copies when it is in order (known, or found by
  /// `is_sorted`), else by one sort and one gather.
  void sort_into_chunks(table_view const& batch,
                        std::vector<std::unique_ptr<table>>& out,
                        batch_order order);
  /// Sorts a stored batch into chunks under the OOM protocol (splitting it when asked); samples
  /// it first when `sample` is set.
  void sort_batch(spillable_table batch,
                  std::size_t bytes,
                  bool sample,
                  batch_order order = batch_order::UNKNOWN);
  /// Device bytes one sort of every deferred row plus `rows` more rows of `bytes` would hold.
  [[nodiscard]] std::size_t one_sort_bytes(std::size_t bytes, std::size_t rows) const noexcept;
  /// Whether `batch` may wait unsorted with the deferred batches for one sort of all of them.
  [[nodiscard]] bool may_defer(table_view const& batch, std::size_t bytes) const;
  /// Stores `batch` unsorted with the deferred batches.
  void defer(std::unique_ptr<table> batch, std::size_t bytes);
  /// Sorts (and samples) the deferred batches into chunks: as one run (`sort_run`), or batch by
  /// batch when that fails or they are each already in order.
  void flush_deferred();
  /**
   * Sorts `batches` (of `sizes` bytes; `bytes`, `rows` in all) as one run: their keys at once
   * (`detail::sorted_sources`), their rows gathered straight into chunks of the size each batch
   * would have been cut into alone; a key and one value column are sorted together instead
   * (`detail::sorted_key_values`) and cut into the chunks by copies.
   */
  run_outcome sort_run(std::vector<spillable_table> const& batches,
                       std::vector<std::size_t> const& sizes,
                       std::size_t bytes,
                       std::size_t rows);
  /// Sorts every deferred row at once (`finish()`); false when it does not fit or was split.
  bool sort_deferred();
  /// The next output batch gathered from the deferred batches in sorted order, or null.
  std::unique_ptr<table> take_sorted();
  /// Gathers every output batch of one sort at once into `sorted_pieces_` when its plain columns
  /// are better scattered (`detail::scatter_pays`) and the memory is there; false otherwise.
  bool gather_whole_output();
  /**
   * Hands the leading chunks that overlap no other chunk to the output as stored (`order`: the
   * chunks by minimum key).
   * @return whether it handed any
   */
  bool emit_leading_chunks(std::size_t const* order);
  void merge_round();
  /// Orders every chunk by minimum key into `by_minimum_` (ties in `chunks_` order).
  void order_chunks();
  /**
   * Puts `moved` (indices of chunks whose minimum changed, or that are new; in no order) back
   * into `by_minimum_` where they belong, the others keeping their order: a round changes the
   * few chunks it loaded and adds a few, of tens of thousands when the input is large.
   */
  void reorder_chunks(std::vector<std::size_t> moved);
  /// Drops the chunks at `indices` from `chunks_` and `by_minimum_`, the others keeping their
  /// order.
  void remove_chunks(std::vector<std::size_t> indices);
  /// `bound`: the keys of the smallest minimum of the chunks not loaded (none: all are loaded).
  round_result merge_attempt(std::vector<std::size_t> const& loaded,
                             std::optional<table_view> const& bound);
  /// Runs `attempt` under the OOM protocol; returns false when the protocol asks to split.
  template <typename Attempt>
  bool run_protected(Attempt&& attempt);
  /// Adds the first `output_rows` rows of `rows` to the pending output.
  void emit(std::unique_ptr<table> rows, std::size_t output_rows);
  std::unique_ptr<table> take_pending();

  spill_store& store_;
  external_sort_options options_;
  stream_view stream_;
  memory_resources mrs_;
  resource_ref host_;
  std::vector<chunk> chunks_;
  /// Indices of `chunks_` by minimum key, ties in `chunks_` order: what `order_chunks` makes,
  /// kept up to date by the rounds; rebuilt when it does not cover `chunks_`.
  std::vector<std::size_t> by_minimum_;
  bool by_minimum_valid_ = false;
  /// Unsorted batches kept while the whole input may fit one sort (see `may_defer`).
  std::vector<spillable_table> deferred_;
  std::vector<std::size_t> deferred_sizes_;  ///< estimated bytes of each deferred batch
  std::size_t deferred_bytes_ = 0;
  std::size_t deferred_rows_  = 0;
  std::size_t runs_flushed_   = 0;  ///< times waiting batches were sorted into chunks
  std::vector<bool> key_nulls_;     ///< per key column: whether a deferred batch has nulls in it
  /// After one sort of the deferred batches: every row's source id in order (one UINT64 column,
  /// then the key columns decoded from the sorted prefixes, those of `decoded_keys_`), or, when
  /// `sorted_whole_`, the rows themselves (`detail::sorted_key_values`: a key and one value
  /// column).
  spillable_table sorted_sources_;
  /// The columns (of the schema) after the ids in `sorted_sources_`, in order.
  std::vector<std::size_t> decoded_keys_;
  bool sorted_whole_        = false;
  std::size_t sorted_rows_  = 0;
  std::size_t sorted_taken_ = 0;  ///< rows of `sorted_sources_` handed out
  /// Output batches of one sort gathered at once (`gather_whole_output`), handed out in order.
  std::deque<spillable_table> sorted_pieces_;
  std::vector<std::vector<chunk>> ranges_;  ///< sample strategy: pieces of each range
  std::size_t next_range_ = 0;
  std::vector<std::unique_ptr<table>> samples_;  ///< sampled key rows, on the host
  std::size_t sample_rows_     = 0;
  double sample_rate_          = 0.0;  ///< sampled rows per input row; set by the first batch
  double sample_credit_        = 0.0;  ///< fractional rows owed to the sample
  std::uint64_t samples_taken_ = 0;
  std::deque<pending_piece> pending_;
  std::size_t pending_bytes_      = 0;
  std::size_t target_chunk_bytes_ = 0;  ///< the size of chunks cut from merged remainders
  bool finished_                  = false;
  bool sealed_                    = false;  ///< `seal()`ed: no more batches
  std::size_t num_columns_        = 0;
  std::vector<data_type> schema_;
  external_sort_statistics stats_;
  std::unique_ptr<order_checker> order_check_;  ///< when `check_output_order`
  std::size_t batches_out_ = 0;                 ///< output batches handed out
};

}  // namespace spillway
