#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <deque>
#include <optional>
#include <span>
#include <string>
#include <tuple>

namespace spillway {

char const* to_string(sort_strategy strategy) noexcept {
  switch (strategy) {
    case sort_strategy::MERGE:
      return "MERGE";
    case sort_strategy::SAMPLE:
      return "SAMPLE";
    case sort_strategy::AUTO:
      return "AUTO";
  }
  return "UNKNOWN";
}

/// A stored piece of pending output this full (of `output_batch_bytes`) is handed out alone,
/// without a copy, rather than topped up with the next piece's rows.
constexpr double UNCOPIED_BATCH_MIN_FILL = 0.5;

/// Chunks are not cut smaller than what lets one merge round load this many of them.
constexpr std::size_t MAX_MERGE_WAYS = 256;
/// Nor larger than what lets one round load this many: a round emits the merged rows below the
/// smallest first key not loaded, so with two chunks of half the budget each whose keys
/// interleave, a round emits a few rows and cuts the rest back (hundreds of rounds per range).
constexpr std::size_t MIN_MERGE_WAYS = 8;

struct external_sorter::chunk {
  spillable_table handle;
  std::unique_ptr<table> min_key;  ///< the first row's keys, on the host
  std::unique_ptr<table> max_key;  ///< the last row's keys, on the host (null after a split)
  std::size_t rows  = 0;           ///< stored rows
  std::size_t bytes = 0;           ///< stored bytes
  /// Rows before it are merged and emitted: a round emits a prefix of each chunk it loads, and
  /// the rest stays where it is stored instead of being copied into new chunks.
  std::size_t offset = 0;
};

struct external_sorter::pending_piece {
  spillable_table handle;
  std::size_t rows   = 0;
  std::size_t offset = 0;      ///< rows already handed out
  std::size_t bytes  = 0;      ///< bytes of the rows not yet handed out
  bool output_memory = false;  ///< allocated from the output resource (may be handed out as is)
};

external_sorter::external_sorter(spill_store& store,
                                 external_sort_options options,
                                 stream_view stream,
                                 memory_resources mrs,
                                 resource_ref host)
  : store_(store), options_(std::move(options)), stream_(stream), mrs_(mrs), host_(host) {
  SPILLWAY_EXPECTS(
    !options_.key_columns.empty(), "external sort needs key columns", invalid_argument);
  SPILLWAY_EXPECTS(options_.chunks_per_batch > 0 && options_.merge_budget_bytes > 0 &&
                     options_.output_batch_bytes > 0 && options_.output_slack >= 0.0,
                   "external sort sizes must be positive: chunks_per_batch " +
                     std::to_string(options_.chunks_per_batch) + ", merge_budget_bytes " +
                     std::to_string(options_.merge_budget_bytes) + ", output_batch_bytes " +
                     std::to_string(options_.output_batch_bytes),
                   invalid_argument);
  SPILLWAY_EXPECTS(options_.samples_per_batch > 0 && options_.max_samples > 1 &&
                     options_.range_fill > 0.0 && options_.range_fill <= 1.0,
                   "external sort sample settings: samples_per_batch " +
                     std::to_string(options_.samples_per_batch) + ", max_samples " +
                     std::to_string(options_.max_samples) + ", range_fill " +
                     std::to_string(options_.range_fill),
                   invalid_argument);
  stats_.strategy_used =
    options_.strategy == sort_strategy::SAMPLE ? sort_strategy::SAMPLE : sort_strategy::MERGE;
  if (!options_.orders.empty()) {
    SPILLWAY_EXPECTS_EQ(options_.orders.size(),
                        options_.key_columns.size(),
                        "external sort: one order per key column",
                        invalid_argument);
  }
}

external_sorter::~external_sorter() = default;

struct external_sorter::round_result {
  /// Rows <= the bound, in order, gathered into pieces of about an output batch each.
  std::vector<std::unique_ptr<table>> emitted;
  std::vector<std::unique_ptr<table>> remainder;  ///< the rest, when merged: new chunks
  /// Per loaded chunk: its rows emitted or merged into `remainder` (a prefix of its live rows).
  std::vector<std::size_t> consumed;
  /// Per loaded chunk: the keys of its first row not emitted (null when all were emitted).
  std::vector<std::unique_ptr<table>> next_min_keys;
  std::size_t copied_bytes = 0;
};

template <typename Attempt>
bool external_sorter::run_protected(Attempt&& attempt) {
  if (options_.coordinator == nullptr || options_.task == nullptr) {
    attempt();
    return true;
  }
  while (true) {
    try {
      retry_block_marker const marker;
      task_context::thread_binding const binding{*options_.task};
      attempt();
      options_.coordinator->attempt_succeeded(options_.task->id());
      return true;
    } catch (retry_oom const&) {
      // Rolled back: whatever the attempt allocated is freed, its inputs are in the store.
      ++stats_.retries;
      if (options_.coordinator->wait_after_rollback(options_.task->id()) == resume_action::SPLIT) {
        ++stats_.splits;
        return false;
      }
    } catch (split_and_retry_oom const&) {
      ++stats_.splits;
      return false;
    }
  }
}

void external_sorter::push(std::unique_ptr<table> batch) {
  SPILLWAY_EXPECTS(!finished_, "external_sorter::push after finish()", logic_error);
  SPILLWAY_EXPECTS(batch != nullptr, "external_sorter::push of a null batch", invalid_argument);
  table_view const view = batch->view();
  if (schema_.empty() && stats_.input_rows == 0 && num_columns_ == 0) {
    num_columns_ = view.num_columns();
    for (auto const& column : view) {
      schema_.push_back(column.type());
    }
    key_nulls_.assign(options_.key_columns.size(), false);
  }
  SPILLWAY_EXPECTS_EQ(view.num_columns(),
                      num_columns_,
                      "external sort: batch has a different column count than the first batch",
                      invalid_argument);
  for (std::size_t index = 0; index < num_columns_; ++index) {
    SPILLWAY_EXPECTS(view.column(index).type() == schema_[index],
                     "external sort: column " + std::to_string(index) + " is " +
                       to_string(view.column(index).type()) + " in this batch but " +
                       to_string(schema_[index]) + " in the first",
                     invalid_argument);
  }
  for (std::size_t const key : options_.key_columns) {
    SPILLWAY_EXPECTS_LT(
      key, num_columns_, "external sort: key column out of range", invalid_argument);
  }
  std::size_t const rows = view.num_rows();
  if (rows == 0) {
    return;
  }
  std::size_t const bytes = estimate_size(view);
  stats_.input_rows += rows;
  stats_.input_bytes += bytes;
  target_chunk_bytes_ = std::max(target_chunk_bytes_, bytes / chunks_for(bytes, rows));
  if (may_defer(view, bytes)) {
    // Unsorted while the waiting batches fit one sort: if the whole input does, it is sorted at
    // once at finish() and gathered straight into output batches (no chunks, no merge, no
    // sample); otherwise the waiting batches become one sorted run (flush_deferred).
    defer(std::move(batch), bytes);
    return;
  }
  if (!deferred_.empty()) {
    // The waiting batches make one sorted run; this batch may start the next.
    flush_deferred();
    if (may_defer(view, bytes)) {
      defer(std::move(batch), bytes);
      return;
    }
  }
  if (options_.strategy != sort_strategy::MERGE) {
    sample_batch(view);
  }
  // The batch waits in the store (it may spill) while pieces of it are sorted.
  sort_batch(store_.make_spillable(std::move(batch), options_.chunk_priority), bytes, false);
}

void external_sorter::defer(std::unique_ptr<table> batch, std::size_t bytes) {
  table_view const view = batch->view();
  for (std::size_t index = 0; index < options_.key_columns.size(); ++index) {
    key_nulls_[index] = key_nulls_[index] || view.column(options_.key_columns[index]).has_nulls();
  }
  deferred_bytes_ += bytes;
  deferred_rows_ += view.num_rows();
  deferred_sizes_.push_back(bytes);
  deferred_.push_back(store_.make_spillable(std::move(batch), options_.chunk_priority));
}

std::size_t external_sorter::one_sort_bytes(std::size_t bytes, std::size_t rows) const noexcept {
  // The prefix: each key's value bytes, plus a null byte where a batch had nulls.
  std::size_t prefix = 0;
  for (std::size_t index = 0; index < options_.key_columns.size(); ++index) {
    prefix += size_of(schema_[options_.key_columns[index]]) + (key_nulls_[index] ? 1 : 0);
  }
  std::size_t const record =
    sizeof(std::uint64_t) * (1 + (std::min<std::size_t>(prefix, 24) + 7) / 8);
  // The batches, the sorted source ids, and then the sort's records and scratch or, once they
  // are freed, the run's chunks (as many bytes as the batches).
  std::size_t const all_rows  = deferred_rows_ + rows;
  std::size_t const all_bytes = deferred_bytes_ + bytes;
  // The ids and the key column decoded from the sorted prefixes.
  return all_bytes + all_rows * 2 * sizeof(std::uint64_t) +
         std::max(all_rows * 2 * record, all_bytes);
}

bool external_sorter::may_defer(table_view const& batch, std::size_t bytes) const {
  // Batches on a CUDA device are sorted as they come: the one-sort path sizes its output
  // batches by reading string lengths on the host.
  if (options_.strategy == sort_strategy::SAMPLE || detail::cuda::on_device(batch)) {
    return false;
  }
  std::size_t prefix = 0;
  for (std::size_t const key : options_.key_columns) {
    data_type const type = schema_[key];
    if (!is_fixed_width(type)) {
      return false;  // strings: their prefix is not the whole key
    }
    prefix += size_of(type) + 1;
  }
  // With a null byte per key the prefix must still hold every key whole.
  return prefix <= 24 && one_sort_bytes(bytes, batch.num_rows()) <= options_.merge_budget_bytes;
}

namespace {

/// A column of the schema and its values in the sorted order, decoded from the sort's prefixes.
using sorted_column = std::pair<std::size_t, column_view>;

/**
 * The rows `ids[starts[p], starts[p + 1])` of `inputs` as piece `p`: the columns of `sorted`
 * (each with its values in the order of `ids`) are copies of those rows of theirs, every other
 * column is gathered.
 */
std::vector<std::unique_ptr<table>> gather_with_sorted_keys(std::span<table_view const> inputs,
                                                            std::uint64_t const* ids,
                                                            std::span<std::size_t const> starts,
                                                            std::span<sorted_column const> sorted,
                                                            stream_view stream,
                                                            memory_resources mrs) {
  if (sorted.empty()) {
    return detail::gather_pieces_in_parallel(
      inputs, ids, starts, detail::SOURCE_ROW_BITS, stream, mrs);
  }
  std::size_t const num_columns = inputs.front().num_columns();
  std::vector<column_view const*> decoded(num_columns, nullptr);
  for (auto const& [index, values] : sorted) {
    decoded[index] = &values;
  }
  std::vector<std::size_t> others;
  for (std::size_t index = 0; index < num_columns; ++index) {
    if (decoded[index] == nullptr) {
      others.push_back(index);
    }
  }
  std::vector<table_view> rest;
  for (auto const& input : inputs) {
    rest.push_back(input.select(others));
  }
  auto gathered = others.empty() ? std::vector<std::unique_ptr<table>>{}
                                 : detail::gather_pieces_in_parallel(
                                     rest, ids, starts, detail::SOURCE_ROW_BITS, stream, mrs);
  std::vector<std::unique_ptr<table>> pieces;
  for (std::size_t piece = 0; piece + 1 < starts.size(); ++piece) {
    std::vector<std::unique_ptr<column>> columns;
    auto others_of_piece =
      others.empty() ? std::vector<std::unique_ptr<column>>{} : gathered[piece]->release();
    std::size_t next_other = 0;
    for (std::size_t index = 0; index < num_columns; ++index) {
      if (decoded[index] != nullptr) {
        columns.push_back(
          detail::copy(slice(*decoded[index], starts[piece], starts[piece + 1]), stream, mrs));
      } else {
        columns.push_back(std::move(others_of_piece[next_other++]));
      }
    }
    pieces.push_back(std::make_unique<table>(std::move(columns)));
  }
  return pieces;
}

/**
 * @return how many of the rows `ids[0, left)` of `inputs` (of types `schema`) make an output
 * batch of at most `limit` bytes, as `estimate_size` counts them (masks rounded up to a byte a
 * row); at least one
 */
std::size_t rows_within(std::span<table_view const> inputs,
                        std::vector<data_type> const& schema,
                        std::uint64_t const* ids,
                        std::size_t left,
                        std::size_t limit) {
  constexpr std::uint64_t row_mask = (std::uint64_t{1} << detail::SOURCE_ROW_BITS) - 1;
  auto const column_of = [&](std::uint64_t id, std::size_t index) -> column_view const& {
    return inputs[static_cast<std::size_t>(id >> detail::SOURCE_ROW_BITS)].column(index);
  };
  std::size_t fixed_bytes = 0;
  std::size_t overhead    = 0;
  std::vector<std::size_t> string_columns;
  for (std::size_t index = 0; index < schema.size(); ++index) {
    bool nullable = false;
    for (auto const& input : inputs) {
      nullable = nullable || input.column(index).has_nulls();
    }
    fixed_bytes += nullable ? std::size_t{1} : std::size_t{0};
    if (is_fixed_width(schema[index])) {
      fixed_bytes += size_of(schema[index]);
    } else {
      string_columns.push_back(index);
      fixed_bytes += sizeof(std::int64_t);
      overhead += sizeof(std::int64_t);
    }
  }
  if (string_columns.empty()) {
    std::size_t const rows =
      limit > overhead ? (limit - overhead) / std::max<std::size_t>(fixed_bytes, 1) : 0;
    return std::clamp<std::size_t>(rows, 1, left);
  }
  std::size_t rows  = 0;
  std::size_t total = overhead;
  for (; rows < left; ++rows) {
    // The ids jump across every input: the offsets of later rows are fetched ahead, as the
    // gather does (this loop was 9% of an in-memory distributed sort's CPU).
    if (rows + detail::GATHER_PREFETCH_ROWS < left) {
      std::uint64_t const ahead = ids[rows + detail::GATHER_PREFETCH_ROWS];
      for (std::size_t const index : string_columns) {
        column_view const& column = column_of(ahead, index);
        __builtin_prefetch(column.offsets() + column.offset() + (ahead & row_mask));
      }
    }
    std::size_t row_bytes = fixed_bytes;
    for (std::size_t const index : string_columns) {
      row_bytes += column_of(ids[rows], index).string_at(ids[rows] & row_mask).size();
    }
    if (rows > 0 && total + row_bytes > limit) {
      break;
    }
    total += row_bytes;
  }
  return std::max<std::size_t>(rows, 1);
}

/**
 * Where `sorted_sources` hands back the key columns it decodes from its sorted prefixes, or null.
 * One key is decoded (the output's key column is then copied, not moved or gathered); several are
 * not: each decoded column is memory a first run must fault in while the sort's merge writes it,
 * which cost more than moving the columns saved (the in-memory distributed sort by two INT64
 * keys, first runs 2.9-3.0 s -> 4.2-5.3 s, later ones 2.27-2.32 -> 2.15-2.19 s;
 * docs/BENCHMARKS.md, "More runs scattered, shards taken as stored").
 */
std::vector<std::unique_ptr<column>>* decoded_keys_target(
  std::vector<std::size_t> const& key_columns, std::vector<std::unique_ptr<column>>& decoded) {
  return key_columns.size() == 1 ? &decoded : nullptr;
}

/**
 * The value column `sorted_key_values` would carry with the key: the one column besides the one
 * key column (whether it qualifies, `detail::sorts_key_values` says).
 */
std::optional<std::size_t> carried_column(std::size_t num_columns,
                                          std::vector<std::size_t> const& key_columns) {
  if (num_columns != 2 || key_columns.size() != 1) {
    return std::nullopt;
  }
  return key_columns.front() == 0 ? 1 : 0;
}

/**
 * Rows `[starts[p], starts[p + 1])` of the sorted `keys` and `values` as piece `p`, a table with
 * the key column at `key` and the value column at the other place.
 */
std::vector<std::unique_ptr<table>> key_value_pieces(column_view const& keys,
                                                     column_view const& values,
                                                     std::size_t key,
                                                     std::span<std::size_t const> starts,
                                                     stream_view stream,
                                                     memory_resources mrs) {
  std::vector<std::unique_ptr<table>> pieces;
  for (std::size_t piece = 0; piece + 1 < starts.size(); ++piece) {
    std::vector<std::unique_ptr<column>> columns(2);
    columns[key]     = detail::copy(slice(keys, starts[piece], starts[piece + 1]), stream, mrs);
    columns[1 - key] = detail::copy(slice(values, starts[piece], starts[piece + 1]), stream, mrs);
    pieces.push_back(std::make_unique<table>(std::move(columns)));
  }
  return pieces;
}

}  // namespace

void external_sorter::flush_deferred() {
  // In push order, so the sample is the one the batches would have given when pushed.
  auto deferred    = std::move(deferred_);
  auto const sizes = std::move(deferred_sizes_);
  deferred_.clear();
  deferred_sizes_.clear();
  std::size_t const bytes = deferred_bytes_;
  std::size_t const rows  = deferred_rows_;
  deferred_bytes_         = 0;
  deferred_rows_          = 0;
  ++runs_flushed_;
  run_outcome const outcome =
    deferred.size() > 1 ? sort_run(deferred, sizes, bytes, rows) : run_outcome::NOT_SORTED;
  if (outcome == run_outcome::SORTED) {
    return;
  }
  for (std::size_t index = 0; index < deferred.size(); ++index) {
    sort_batch(std::move(deferred[index]),
               sizes[index],
               options_.strategy != sort_strategy::MERGE,
               outcome == run_outcome::IN_ORDER ? batch_order::IN_ORDER : batch_order::UNKNOWN);
  }
}

external_sorter::run_outcome external_sorter::sort_run(std::vector<spillable_table> const& batches,
                                                       std::vector<std::size_t> const& sizes,
                                                       std::size_t bytes,
                                                       std::size_t rows) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  std::optional<memory_lease> lease;
  std::vector<std::unique_ptr<table>> chunks;
  bool presorted  = false;
  bool const done = run_protected([&] {
    chunks.clear();
    if (options_.task != nullptr) {
      std::size_t const need = one_sort_bytes(bytes, rows);
      std::size_t const base = options_.task->base_lease();
      if (need > base && !lease) {
        lease.emplace(options_.task->request_lease(need - base));
      }
    }
    std::vector<pinned_table> pins;
    std::vector<table_view> inputs;
    std::vector<table_view> keys;
    pins.reserve(batches.size());
    presorted = true;
    for (auto const& batch : batches) {
      pins.push_back(batch.acquire());
      inputs.push_back(pins.back().view());
      keys.push_back(inputs.back().select(options_.key_columns));
      presorted = presorted && is_sorted(keys.back(), options_.orders, stream_);
    }
    if (presorted) {
      return;  // each batch is cut by copies into chunks that need no merge: see sort_batch
    }
    // Chunks of the size each batch would have been cut into alone.
    std::size_t pieces = 0;
    for (std::size_t index = 0; index < batches.size(); ++index) {
      pieces += chunks_for(sizes[index], inputs[index].num_rows());
    }
    pieces = std::clamp<std::size_t>(pieces, 1, rows);
    std::vector<std::size_t> starts(pieces + 1);
    for (std::size_t piece = 0; piece <= pieces; ++piece) {
      starts[piece] = piece * rows / pieces;
    }
    if (auto const carried = carried_column(num_columns_, options_.key_columns)) {
      std::vector<column_view> values;
      for (auto const& input : inputs) {
        values.push_back(input.column(*carried));
      }
      if (detail::sorts_key_values(keys, options_.orders, values)) {
        auto const [sorted_keys, sorted_values] =
          detail::sorted_key_values(keys, options_.orders, values, stream_, scratch);
        chunks = key_value_pieces(sorted_keys->view(),
                                  sorted_values->view(),
                                  options_.key_columns.front(),
                                  starts,
                                  stream_,
                                  scratch);
        return;
      }
    }
    std::vector<std::unique_ptr<column>> sorted_keys;  // decoded from the sort's prefixes
    auto const order =
      detail::sorted_sources(keys,
                             options_.orders,
                             stream_,
                             scratch,
                             decoded_keys_target(options_.key_columns, sorted_keys));
    std::vector<sorted_column> decoded;
    for (std::size_t key = 0; key < sorted_keys.size(); ++key) {
      if (sorted_keys[key] != nullptr) {
        decoded.emplace_back(options_.key_columns[key], sorted_keys[key]->view());
      }
    }
    chunks = gather_with_sorted_keys(
      inputs, order->view().data<std::uint64_t>(), starts, decoded, stream_, scratch);
  });
  lease.reset();
  if (!done) {
    return run_outcome::NOT_SORTED;  // batch by batch instead
  }
  if (presorted) {
    return run_outcome::IN_ORDER;
  }
  if (options_.strategy != sort_strategy::MERGE) {
    for (auto const& batch : batches) {
      pinned_table const pinned = batch.acquire();
      sample_batch(pinned.view());
    }
  }
  for (auto& chunk_rows : chunks) {
    stats_.bytes_copied += estimate_size(chunk_rows->view());
    add_chunk(std::move(chunk_rows));
  }
  ++stats_.batch_runs;
  return run_outcome::SORTED;
}

void external_sorter::sort_batch(spillable_table batch,
                                 std::size_t bytes,
                                 bool sample,
                                 batch_order order) {
  std::deque<spillable_table> pieces;
  pieces.push_back(std::move(batch));
  while (!pieces.empty()) {
    spillable_table piece = std::move(pieces.front());
    pieces.pop_front();
    std::vector<std::unique_ptr<table>> chunks;
    bool const done = run_protected([&] {
      chunks.clear();
      pinned_table const pinned = piece.acquire();
      if (sample) {
        sample_batch(pinned.view());  // host memory only; not redone on a retry
        sample = false;
      }
      sort_into_chunks(pinned.view(), chunks, order);
    });
    if (done) {
      for (auto& chunk_rows : chunks) {
        add_chunk(std::move(chunk_rows));
      }
      continue;
    }
    SPILLWAY_EXPECTS(piece.rows() > 1,
                     "external sort: a batch of one row does not fit the device even alone",
                     out_of_memory);
    auto [first, second] = piece.split_at(piece.rows() / 2);
    pieces.push_front(std::move(second));
    pieces.push_front(std::move(first));
  }
  stats_.bytes_copied += bytes;
}

bool external_sorter::sort_deferred() {
  std::size_t const need = one_sort_bytes(0, 0);
  if (need > options_.merge_budget_bytes) {
    return false;
  }
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  std::optional<memory_lease> lease;
  std::unique_ptr<column> sources;
  std::unique_ptr<column> sorted_key;                // sorted_key_values: the key
  std::unique_ptr<column> sorted_values;             // carried with the key (sorted_key_values)
  std::vector<std::unique_ptr<column>> sorted_keys;  // decoded from the sort's prefixes
  bool fits       = true;
  bool const done = run_protected([&] {
    // What a rolled-back attempt allocated goes before the next one.
    sources.reset();
    sorted_key.reset();
    sorted_values.reset();
    sorted_keys.clear();
    if (options_.task != nullptr) {
      std::size_t const base = options_.task->base_lease();
      if (need > base && !lease) {
        lease.emplace(options_.task->request_lease(need - base));
      }
    }
    std::vector<pinned_table> pins;
    std::vector<table_view> keys;
    pins.reserve(deferred_.size());
    keys.reserve(deferred_.size());
    for (auto const& batch : deferred_) {
      pins.push_back(batch.acquire());
      keys.push_back(pins.back().view().select(options_.key_columns));
    }
    if (!detail::plan_normalized_keys(
           keys, detail::resolve_orders(options_.orders, keys.front().num_columns()))
           .complete) {
      fits = false;
      return;
    }
    if (auto const carried = carried_column(num_columns_, options_.key_columns)) {
      std::vector<column_view> values;
      for (auto const& pin : pins) {
        values.push_back(pin.view().column(*carried));
      }
      if (detail::sorts_key_values(keys, options_.orders, values)) {
        // A key and one value: sorted together, the sorted rows are the output.
        std::tie(sorted_key, sorted_values) =
          detail::sorted_key_values(keys, options_.orders, values, stream_, scratch);
        return;
      }
    }
    sources = detail::sorted_sources(keys,
                                     options_.orders,
                                     stream_,
                                     scratch,
                                     decoded_keys_target(options_.key_columns, sorted_keys));
  });
  lease.reset();
  if (!done || !fits) {
    return false;
  }
  sorted_taken_ = 0;
  std::vector<std::unique_ptr<column>> columns;
  sorted_whole_ = sorted_values != nullptr;
  if (sorted_whole_) {
    sorted_rows_          = sorted_key->size();
    std::size_t const key = options_.key_columns.front();
    columns.resize(2);
    columns[key]     = std::move(sorted_key);
    columns[1 - key] = std::move(sorted_values);
    // The batches are no longer needed: their rows are all in the sorted columns.
    auto sorted = std::make_unique<table>(std::move(columns));
    deferred_.clear();
    deferred_sizes_.clear();
    deferred_bytes_ = 0;
    deferred_rows_  = 0;
    sorted_sources_ = store_.make_spillable(std::move(sorted), options_.chunk_priority + 1);
    ++stats_.rounds;
    return true;
  }
  sorted_rows_ = sources->size();
  columns.push_back(std::move(sources));
  decoded_keys_.clear();
  for (std::size_t key = 0; key < sorted_keys.size(); ++key) {
    if (sorted_keys[key] != nullptr) {
      decoded_keys_.push_back(options_.key_columns[key]);
      columns.push_back(std::move(sorted_keys[key]));
    }
  }
  // Spillable between output batches, like everything else the sort holds.
  sorted_sources_ =
    store_.make_spillable(std::make_unique<table>(std::move(columns)), options_.chunk_priority + 1);
  ++stats_.rounds;
  return true;
}

bool external_sorter::gather_whole_output() {
  if (sorted_whole_ || sorted_taken_ != 0 || sorted_rows_ < detail::SCATTER_MIN_ROWS ||
      !sorted_sources_.valid()) {
    return false;
  }
  // The batches become the output batches: each must be one, within the slack.
  auto const largest =
    static_cast<double>(options_.output_batch_bytes) * (1.0 + options_.output_slack);
  for (std::size_t const bytes : deferred_sizes_) {
    if (static_cast<double>(bytes) > largest) {
      return false;
    }
  }
  // The order decides first, before any batch leaves the store (the ids are every waiting row).
  bool pays = false;
  if (!run_protected([&] {
        pinned_table const order = sorted_sources_.acquire();
        pays                     = detail::scatter_pays(
          sorted_rows_, order.view().column(0).data<std::uint64_t>(), sorted_rows_);
      }) ||
      !pays) {
    return false;
  }
  // The batches leave the store while their rows are moved (and come back if they are not).
  std::vector<std::unique_ptr<table>> owned;
  for (auto& part : deferred_) {
    auto batch = part.take_if_resident();
    if (batch == nullptr) {
      break;
    }
    bool const on_gpu = detail::cuda::on_device(batch->view());
    owned.push_back(std::move(batch));
    if (on_gpu) {
      break;  // moved on the host only (a GPU's batches are sorted as they come: none waits)
    }
  }
  auto const give_back = [&] {
    for (std::size_t at = 0; at < owned.size(); ++at) {
      deferred_[at] = store_.make_spillable(std::move(owned[at]), options_.chunk_priority);
    }
    return false;
  };
  if (owned.empty() || owned.size() != deferred_.size() ||
      detail::cuda::on_device(owned.back()->view())) {
    return give_back();
  }
  // Key columns the sort decoded are copied from their sorted values; the other fixed-width
  // columns without nulls move in place; the rest are gathered anew into batches of the same
  // rows.
  std::vector<std::size_t> plain;
  std::vector<std::size_t> others;
  std::size_t strings = 0;
  for (std::size_t index = 0; index < num_columns_; ++index) {
    if (std::find(decoded_keys_.begin(), decoded_keys_.end(), index) != decoded_keys_.end()) {
      continue;
    }
    bool nulls = false;
    for (auto const& batch : owned) {
      nulls = nulls || batch->view().column(index).has_nulls();
    }
    (is_fixed_width(schema_[index]) && !nulls ? plain : others).push_back(index);
    strings += is_fixed_width(schema_[index]) ? std::size_t{0} : std::size_t{1};
  }
  std::size_t others_bytes = 0;
  std::size_t kept_bytes   = 0;  // replaced columns that stay allocated: slices of a shared one
  for (auto& batch : owned) {
    for (std::size_t const index : others) {
      column& replaced        = batch->get_column(index);
      std::size_t const bytes = replaced.allocated_bytes();
      others_bytes += bytes;
      kept_bytes += replaced.shares_allocation() ? bytes : 0;
    }
  }
  // Beside the batches and the order (the ids and the decoded keys): the columns gathered
  // anew, with each string's length and place (16 bytes a row a string column), where each row
  // goes and one column copied out (8 bytes a row each). A replaced column that is a slice of
  // its batch's shared memory (a shard taken as it was stored) is not freed before the batch
  // is: it counts beside its new column until then.
  std::size_t const need =
    deferred_bytes_ + others_bytes + kept_bytes +
    sorted_rows_ * (1 + decoded_keys_.size() + 2 + 2 * strings) * sizeof(std::uint64_t);
  if (need > options_.merge_budget_bytes) {
    return give_back();
  }
  std::optional<memory_lease> lease;
  if (options_.task != nullptr) {
    std::size_t const base = options_.task->base_lease();
    if (need > base) {
      lease = options_.task->arbiter().try_request_lease(options_.task->id(), need - base);
      if (!lease) {
        return give_back();  // batch by batch instead: no waiting for memory it does not need
      }
    }
  }
  bool moved = false;
  bool done  = false;
  try {
    done = run_protected([&] {
      std::vector<table_view> inputs;
      std::vector<table*> tables;
      for (auto const& batch : owned) {
        inputs.push_back(batch->view());
        tables.push_back(batch.get());
      }
      pinned_table const order = sorted_sources_.acquire();
      auto const* ids          = order.view().column(0).data<std::uint64_t>();
      std::vector<std::unique_ptr<table>> gathered;
      if (!others.empty()) {
        std::vector<table_view> selected;
        for (auto const& input : inputs) {
          selected.push_back(input.select(others));
        }
        gathered = detail::gather_pieces_in_parallel(
          selected, ids, detail::first_rows(inputs), detail::SOURCE_ROW_BITS, stream_, mrs_);
      }
      if (!plain.empty() &&
          !detail::permute_in_place(
            tables, ids, detail::SOURCE_ROW_BITS, plain, stream_, mrs_.temporary())) {
        return;  // (the ids are not every row once: nothing moved)
      }
      std::size_t first = 0;
      for (table* const batch : tables) {
        std::size_t const rows = batch->num_rows();
        for (std::size_t at = 0; at < decoded_keys_.size(); ++at) {
          column& values             = batch->get_column(decoded_keys_[at]);
          column_view const& decoded = order.view().column(1 + at);
          std::size_t const width    = size_of(values.type());
          copy_bytes(values.mutable_data<std::byte>(),
                     values.kind(),
                     decoded.data<std::byte>() + first * width,
                     decoded.kind(),
                     rows * width,
                     stream_);
        }
        first += rows;
      }
      for (std::size_t at = 0; at < owned.size() && !others.empty(); ++at) {
        auto columns     = owned[at]->release();
        auto new_columns = gathered[at]->release();
        for (std::size_t other = 0; other < others.size(); ++other) {
          columns[others[other]] = std::move(new_columns[other]);
        }
        owned[at] = std::make_unique<table>(std::move(columns));
      }
      moved = true;
    });
  } catch (out_of_memory const&) {
    done = false;  // (without the OOM protocol) batch by batch instead
  } catch (...) {
    static_cast<void>(give_back());
    throw;
  }
  lease.reset();
  if (!done || !moved) {
    return give_back();
  }
  // Spillable until handed out, like everything else the sort holds; the order goes now.
  deferred_.clear();
  deferred_sizes_.clear();
  stats_.batches_sorted_in_place += owned.size();
  for (auto& batch : owned) {
    stats_.bytes_copied += estimate_size(batch->view());
    sorted_pieces_.push_back(store_.make_spillable(std::move(batch), options_.chunk_priority + 1));
  }
  sorted_taken_ = sorted_rows_;
  sorted_sources_.release();
  return true;
}

std::unique_ptr<table> external_sorter::take_sorted() {
  if (sorted_taken_ == 0) {
    static_cast<void>(gather_whole_output());
  }
  while (!sorted_pieces_.empty()) {
    spillable_table piece = std::move(sorted_pieces_.front());
    sorted_pieces_.pop_front();
    std::unique_ptr<table> batch = piece.take_if_resident();
    if (batch == nullptr) {
      // Spilled meanwhile: brought back and copied out of the store, in halves if need be.
      bool const done = run_protected([&] {
        pinned_table const pinned = piece.acquire();
        batch                     = detail::copy(pinned.view(), stream_, mrs_);
      });
      if (!done) {
        SPILLWAY_EXPECTS(
          piece.rows() > 1, "external sort: one output row does not fit the device", out_of_memory);
        auto halves = piece.split_at(piece.rows() / 2);
        sorted_pieces_.push_front(std::move(halves.second));
        sorted_pieces_.push_front(std::move(halves.first));
        continue;
      }
    }
    stats_.output_rows += batch->num_rows();
    ++stats_.output_batches;
    return batch;
  }
  if (sorted_taken_ == sorted_rows_) {
    sorted_sources_.release();
    deferred_.clear();
    deferred_sizes_.clear();
    return nullptr;
  }
  std::size_t limit = options_.output_batch_bytes;
  while (true) {
    std::unique_ptr<table> batch;
    std::optional<memory_lease> lease;
    bool const done = run_protected([&] {
      if (sorted_whole_) {
        // The sorted rows themselves: the next batch is a copy of the next of them.
        std::size_t row_bytes = 0;
        for (std::size_t index = 0; index < num_columns_; ++index) {
          row_bytes += size_of(schema_[index]);
        }
        if (options_.task != nullptr) {
          std::size_t const need = sorted_rows_ * row_bytes + limit;
          std::size_t const base = options_.task->base_lease();
          if (need > base && !lease) {
            lease.emplace(options_.task->request_lease(need - base));
          }
        }
        pinned_table const sorted = sorted_sources_.acquire();
        std::size_t const rows =
          std::clamp<std::size_t>(limit / row_bytes, 1, sorted_rows_ - sorted_taken_);
        batch =
          detail::copy(slice(sorted.view(), sorted_taken_, sorted_taken_ + rows), stream_, mrs_);
        return;
      }
      if (options_.task != nullptr) {
        // Every batch, the order and the output batch are on the device together.
        std::size_t const need = deferred_bytes_ + sorted_rows_ * sizeof(std::uint64_t) + limit;
        std::size_t const base = options_.task->base_lease();
        if (need > base && !lease) {
          lease.emplace(options_.task->request_lease(need - base));
        }
      }
      pinned_table const order = sorted_sources_.acquire();
      std::vector<pinned_table> pins;
      std::vector<table_view> inputs;
      pins.reserve(deferred_.size());
      for (auto const& part : deferred_) {
        pins.push_back(part.acquire());
        inputs.push_back(pins.back().view());
      }
      auto const* ids = order.view().column(0).data<std::uint64_t>() + sorted_taken_;
      std::size_t const rows =
        rows_within(inputs, schema_, ids, sorted_rows_ - sorted_taken_, limit);
      std::array<std::size_t, 2> const starts{0, rows};
      // The key columns the sort decoded are copied from their sorted rows.
      std::vector<sorted_column> decoded;
      for (std::size_t at = 0; at < decoded_keys_.size(); ++at) {
        decoded.emplace_back(
          decoded_keys_[at],
          slice(order.view().column(1 + at), sorted_taken_, sorted_taken_ + rows));
      }
      auto pieces = gather_with_sorted_keys(inputs, ids, starts, decoded, stream_, mrs_);
      batch       = std::move(pieces.front());
    });
    lease.reset();
    if (!done) {
      SPILLWAY_EXPECTS(
        limit > 1, "external sort: one output row does not fit the device", out_of_memory);
      limit /= 2;
      continue;
    }
    sorted_taken_ += batch->num_rows();
    stats_.bytes_copied += estimate_size(batch->view());
    stats_.output_rows += batch->num_rows();
    ++stats_.output_batches;
    if (sorted_taken_ == sorted_rows_) {
      // The last batch: the inputs and the order go now, before the caller uses it.
      sorted_sources_.release();
      deferred_.clear();
      deferred_sizes_.clear();
    }
    return batch;
  }
}

void external_sorter::sort_into_chunks(table_view const& batch,
                                       std::vector<std::unique_ptr<table>>& out,
                                       batch_order order) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  table_view const keys          = batch.select(options_.key_columns);
  std::size_t const rows         = batch.num_rows();
  std::size_t const pieces       = chunks_for(estimate_size(batch), rows);
  if (order == batch_order::IN_ORDER || is_sorted(keys, options_.orders, stream_)) {
    // A batch already in order (sorted input, all keys equal) is cut into chunks by plain copies.
    for (std::size_t piece = 0; piece < pieces; ++piece) {
      out.push_back(detail::copy(
        slice(batch, piece * rows / pieces, (piece + 1) * rows / pieces), stream_, scratch));
    }
    return;
  }
  auto const sorted = detail::sorted_order(
    keys, options_.orders, sort_stability::STABLE, stream_, scratch, /*check_order=*/false);
  // Every chunk in one gather: its two threads split the rows of all chunks between them.
  std::vector<std::size_t> starts(pieces + 1);
  for (std::size_t piece = 0; piece <= pieces; ++piece) {
    starts[piece] = piece * rows / pieces;
  }
  auto chunks = detail::gather_pieces_in_parallel(std::span<table_view const>{&batch, 1},
                                                  sorted->view().data<std::uint64_t>(),
                                                  starts,
                                                  detail::SOURCE_ROW_BITS,
                                                  stream_,
                                                  scratch);
  for (auto& chunk_rows : chunks) {
    out.push_back(std::move(chunk_rows));
  }
}

std::size_t external_sorter::chunks_for(std::size_t bytes, std::size_t rows) const noexcept {
  // Chunks need not be smaller than what lets one round load MAX_MERGE_WAYS of them: when the
  // budget is large (an input that fits in memory) smaller chunks only deepen the merge's tree.
  std::size_t const smallest = options_.merge_budget_bytes / 2 / MAX_MERGE_WAYS;
  std::size_t const by_size  = smallest == 0 ? rows : std::max<std::size_t>(1, bytes / smallest);
  std::size_t const largest  = options_.merge_budget_bytes / 2 / MIN_MERGE_WAYS;
  std::size_t const at_least = largest == 0 ? rows : (bytes + largest - 1) / largest;
  return std::max<std::size_t>(
    1, std::min(rows, std::max(at_least, std::min(options_.chunks_per_batch, by_size))));
}

external_sorter::chunk external_sorter::make_chunk(std::unique_ptr<table> rows) {
  table_view const view = rows->view();
  table_view const keys = view.select(options_.key_columns);
  chunk entry;
  entry.rows    = view.num_rows();
  entry.bytes   = estimate_size(view);
  entry.min_key = detail::copy(slice(keys, 0, 1), stream_, memory_resources{host_});
  entry.max_key =
    detail::copy(slice(keys, entry.rows - 1, entry.rows), stream_, memory_resources{host_});
  entry.handle = store_.make_spillable(std::move(rows), options_.chunk_priority);
  ++stats_.chunks_created;
  return entry;
}

void external_sorter::add_chunk(std::unique_ptr<table> rows) {
  chunks_.push_back(make_chunk(std::move(rows)));
}

void external_sorter::sample_batch(table_view const& batch) {
  // Sampling reads the batch and writes host memory; only a batch on a CUDA device takes a few
  // bytes of device scratch (its gather computes there).
  std::size_t const rows = batch.num_rows();
  if (sample_rate_ == 0.0) {
    sample_rate_ =
      std::min(1.0, static_cast<double>(options_.samples_per_batch) / static_cast<double>(rows));
  }
  sample_credit_ += static_cast<double>(rows) * sample_rate_;
  auto const owed        = static_cast<std::size_t>(sample_credit_);
  std::size_t const take = std::min(owed, rows);
  sample_credit_ -= static_cast<double>(owed);
  if (take == 0) {
    return;
  }
  // The batch's sample: its row indices are scratch, host memory, or the device's for a batch on
  // a CUDA device. The samples themselves, and all that is done with them, are on the host.
  memory_resources const host{host_};
  samples_.push_back(
    detail::sample(batch.select(options_.key_columns),
                   take,
                   options_.sample_seed + samples_taken_++,
                   stream_,
                   detail::cuda::on_device(batch) ? mrs_.with_output(host_) : host));
  sample_rows_ += take;
  if (sample_rows_ > options_.max_samples) {
    // Keep a uniform half, and sample later rows at half the rate.
    std::vector<table_view> views;
    for (auto const& part : samples_) {
      views.push_back(part->view());
    }
    auto const all = detail::concatenate(views, stream_, host);
    auto half      = detail::sample(
      all->view(), sample_rows_ / 2, options_.sample_seed + samples_taken_++, stream_, host);
    samples_.clear();
    sample_rows_ = half->num_rows();
    samples_.push_back(std::move(half));
    sample_rate_ /= 2.0;
  }
}

void external_sorter::finish() {
  if (finished_) {
    return;
  }
  finished_ = true;
  if (!deferred_.empty()) {
    if (runs_flushed_ == 0 && chunks_.empty() && sort_deferred()) {
      // One sort of the whole input: the merge strategy's single round, without chunks.
      stats_.strategy_used = sort_strategy::MERGE;
      return;
    }
    flush_deferred();
  }
  if (options_.strategy == sort_strategy::MERGE) {
    return;
  }
  stats_.sampled_rows = sample_rows_;
  // AUTO: a whole input that fits one merge gets it (the sample strategy would make one range
  // and the same merge, after a cutting pass); so does one whose sample shows no heavy key,
  // where the merge strategy measured faster. Heavy keys make the sample strategy faster
  // (docs/BENCHMARKS.md, "Merge vs sample strategy"); partition_into_ranges decides.
  if (options_.strategy == sort_strategy::AUTO &&
      2 * stats_.input_bytes <= options_.merge_budget_bytes) {
    stats_.strategy_used = sort_strategy::MERGE;
    samples_.clear();
    return;
  }
  partition_into_ranges();
}

void external_sorter::partition_into_ranges() {
  memory_resources const host{host_};
  bool const automatic = options_.strategy == sort_strategy::AUTO;
  stats_.strategy_used = automatic ? sort_strategy::MERGE : sort_strategy::SAMPLE;
  if (chunks_.empty()) {
    samples_.clear();
    return;
  }
  std::vector<table_view> views;
  for (auto const& part : samples_) {
    views.push_back(part->view());
  }
  auto const sample = detail::concatenate(views, stream_, host);
  samples_.clear();
  auto const sorted = detail::sort(
    sample->view(), sample->view(), options_.orders, sort_stability::UNSTABLE, stream_, host);
  std::size_t const sample_rows = sorted->num_rows();
  // k ranges, each with its merged output within range_fill of the merge budget.
  auto const range_bytes = std::max<std::size_t>(
    1,
    static_cast<std::size_t>(options_.range_fill *
                             static_cast<double>(options_.merge_budget_bytes) / 2.0));
  std::size_t const ranges = std::clamp<std::size_t>(
    (stats_.input_bytes + range_bytes - 1) / range_bytes, 1, std::max<std::size_t>(sample_rows, 1));
  if (ranges == 1 || sample_rows == 0) {
    if (automatic) {
      return;  // one range is one merge: the merge strategy's chunks are ready
    }
    ranges_.emplace_back(std::move(chunks_));
    chunks_.clear();
    stats_.ranges = 1;
    return;
  }
  auto const splitters = detail::quantile_splitters(sorted->view(), ranges, stream_, host);
  table_view const splitter_view = splitters->view();
  std::size_t const count        = splitter_view.num_rows();
  // Distinct splitters get a boundary at their lower bound; heavy ones (at least half a range
  // of the sample equals them) also one at their upper bound, so that they get a range alone.
  auto const first_equal =
    detail::lower_bound(splitter_view, splitter_view, options_.orders, stream_, host);
  auto const in_sample_low =
    detail::lower_bound(sorted->view(), splitter_view, options_.orders, stream_, host);
  auto const in_sample_high =
    detail::upper_bound(sorted->view(), splitter_view, options_.orders, stream_, host);
  auto const* first = first_equal->view().data<std::uint64_t>();
  auto const* low   = in_sample_low->view().data<std::uint64_t>();
  auto const* high  = in_sample_high->view().data<std::uint64_t>();
  std::vector<table_view> lower_rows;
  std::vector<table_view> upper_rows;
  std::vector<bool> heavy;
  for (std::size_t row = 0; row < count; ++row) {
    if (first[row] != row) {
      continue;
    }
    lower_rows.push_back(slice(splitter_view, row, row + 1));
    heavy.push_back(2 * ranges * (high[row] - low[row]) >= sample_rows);
    if (heavy.back()) {
      upper_rows.push_back(slice(splitter_view, row, row + 1));
    }
  }
  if (automatic && upper_rows.empty()) {
    return;  // no heavy key: the merge strategy, whose chunks are ready
  }
  stats_.strategy_used = sort_strategy::SAMPLE;
  auto const lower     = detail::concatenate(lower_rows, stream_, host);
  auto const upper = upper_rows.empty() ? detail::copy(slice(splitter_view, 0, 0), stream_, host)
                                        : detail::concatenate(upper_rows, stream_, host);
  ranges_.resize(lower->num_rows() + upper->num_rows() + 1);
  stats_.ranges = ranges_.size();

  // A chunk's range from its first and last keys: ranges before a key x are the distinct
  // splitters <= x plus the heavy ones < x.
  std::vector<table_view> minimums;
  std::vector<table_view> maximums;
  for (auto const& entry : chunks_) {
    minimums.push_back(entry.min_key->view());
    maximums.push_back(entry.max_key->view());
  }
  auto const range_of = [&](std::vector<table_view> const& keys) {
    auto const all = detail::concatenate(keys, stream_, host);
    auto const before =
      detail::upper_bound(lower->view(), all->view(), options_.orders, stream_, host);
    auto const heavy_before =
      detail::lower_bound(upper->view(), all->view(), options_.orders, stream_, host);
    std::vector<std::size_t> out(keys.size());
    for (std::size_t index = 0; index < out.size(); ++index) {
      out[index] = static_cast<std::size_t>(before->view().data<std::uint64_t>()[index] +
                                            heavy_before->view().data<std::uint64_t>()[index]);
    }
    return out;
  };
  std::vector<std::size_t> const first_range = range_of(minimums);
  std::vector<std::size_t> const last_range  = range_of(maximums);
  std::deque<chunk> to_cut;
  for (std::size_t index = 0; index < chunks_.size(); ++index) {
    if (first_range[index] == last_range[index]) {
      ranges_[first_range[index]].push_back(std::move(chunks_[index]));
    } else {
      to_cut.push_back(std::move(chunks_[index]));
    }
  }
  chunks_.clear();
  cut_chunks(std::move(to_cut), lower->view(), upper->view(), heavy);
}

void external_sorter::cut_chunks(std::deque<chunk> pending,
                                 table_view const& lower,
                                 table_view const& upper,
                                 std::vector<bool> const& heavy) {
  // Results the planner reads go to the host; bounds and copies take no scratch on the CPU, and
  // on a CUDA device compute in the device's.
  memory_resources const host    = mrs_.with_output(host_);
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  std::size_t const ranges       = ranges_.size();
  while (!pending.empty()) {
    chunk entry = std::move(pending.front());
    pending.pop_front();
    std::vector<std::pair<std::size_t, std::unique_ptr<table>>> pieces;
    std::optional<std::size_t> whole;  ///< the one range every row of the chunk is in
    std::size_t copied = 0;
    bool const done    = run_protected([&] {
      pieces.clear();
      whole.reset();
      copied                    = 0;
      pinned_table const pinned = entry.handle.acquire();
      table_view const view     = pinned.view();
      table_view const keys     = view.select(options_.key_columns);
      auto const low            = detail::lower_bound(keys, lower, options_.orders, stream_, host);
      auto const high           = detail::upper_bound(keys, upper, options_.orders, stream_, host);
      auto const* low_rows      = low->view().data<std::uint64_t>();
      auto const* high_rows     = high->view().data<std::uint64_t>();
      // Boundaries in key order: each distinct splitter's lower bound, then (when heavy) its
      // upper bound; `upper` holds the heavy splitters in the same order.
      std::vector<std::size_t> bounds;
      std::size_t next_heavy = 0;
      for (std::size_t row = 0; row < lower.num_rows(); ++row) {
        bounds.push_back(static_cast<std::size_t>(low_rows[row]));
        if (heavy[row]) {
          bounds.push_back(static_cast<std::size_t>(high_rows[next_heavy++]));
        }
      }
      bounds.push_back(entry.rows);
      std::size_t begin = 0;
      for (std::size_t range = 0; range < ranges; ++range) {
        std::size_t const end = bounds[range];
        if (end > begin) {
          if (begin == 0 && end == entry.rows) {
            whole = range;
            if (entry.min_key == nullptr || entry.max_key == nullptr) {
              // A half of a split chunk: its first and last keys, for the range's planning.
              entry.min_key = detail::copy(slice(keys, 0, 1), stream_, host);
              entry.max_key = detail::copy(slice(keys, end - 1, end), stream_, host);
            }
            return;
          }
          pieces.emplace_back(range, detail::copy(slice(view, begin, end), stream_, scratch));
          copied += estimate_size(view, begin, end);
        }
        begin = std::max(begin, end);
      }
    });
    if (done) {
      stats_.bytes_copied += copied;
      if (whole) {
        ranges_[*whole].push_back(std::move(entry));
        continue;
      }
      entry.handle.release();
      for (auto& [range, rows] : pieces) {
        ranges_[range].push_back(make_chunk(std::move(rows)));
      }
      continue;
    }
    SPILLWAY_EXPECTS(entry.rows > 1,
                     "external sort: a chunk of one row does not fit the device even alone",
                     out_of_memory);
    auto [first, second]         = entry.handle.split_at(entry.rows / 2);
    std::size_t const first_rows = entry.rows / 2;
    chunk head;
    head.handle = std::move(first);
    head.rows   = first_rows;
    head.bytes  = entry.bytes / 2;
    chunk tail;
    tail.handle = std::move(second);
    tail.rows   = entry.rows - first_rows;
    tail.bytes  = entry.bytes - head.bytes;
    pending.push_front(std::move(tail));
    pending.push_front(std::move(head));
  }
}

external_sorter::round_result external_sorter::merge_attempt(std::vector<std::size_t> const& loaded,
                                                             std::optional<std::size_t> bound_row,
                                                             table_view const& minimums) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  memory_resources const host    = mrs_.with_output(host_);  // as in cut_chunks
  round_result result;
  std::vector<pinned_table> pins;
  std::vector<table_view> live;  ///< each loaded chunk's rows not yet emitted
  std::size_t loaded_bytes = 0;
  std::size_t loaded_rows  = 0;
  std::size_t live_rows    = 0;
  pins.reserve(loaded.size());
  for (std::size_t const index : loaded) {
    chunk const& entry = chunks_[index];
    pins.push_back(entry.handle.acquire());
    live.push_back(slice(pins.back().view(), entry.offset, entry.rows));
    loaded_bytes += entry.bytes;
    loaded_rows += entry.rows;
    live_rows += entry.rows - entry.offset;
  }
  // Rows <= the smallest first key not loaded can be emitted; in each sorted chunk they are a
  // prefix.
  std::vector<std::size_t> emittable(live.size());
  std::size_t emittable_rows = 0;
  for (std::size_t input = 0; input < live.size(); ++input) {
    emittable[input] = live[input].num_rows();
    if (bound_row) {
      table_view const bound = slice(minimums, *bound_row, *bound_row + 1);
      auto const cut         = detail::upper_bound(
        live[input].select(options_.key_columns), bound, options_.orders, stream_, host);
      emittable[input] = static_cast<std::size_t>(cut->view().data<std::uint64_t>()[0]);
    }
    emittable_rows += emittable[input];
  }
  // When most loaded rows can be emitted, the rest waits in place, unmerged and uncopied. When
  // few can (more sorted runs than a round loads chunks), all loaded rows are merged and the
  // rest goes back as new chunks: merged runs, so that later rounds emit more.
  bool const in_place = 2 * emittable_rows >= live_rows;
  std::vector<table_view> inputs;
  for (std::size_t input = 0; input < live.size(); ++input) {
    inputs.push_back(in_place ? slice(live[input], 0, emittable[input]) : live[input]);
  }
  // The merge order only; its rows are gathered straight into output pieces (and chunks).
  auto const order =
    detail::merge_order(inputs, options_.key_columns, options_.orders, stream_, scratch);
  auto const* ids              = order->view().data<std::uint64_t>();
  std::size_t const total_rows = order->size();
  std::size_t emit_rows        = emittable_rows;
  double const row_bytes =
    static_cast<double>(loaded_bytes) / static_cast<double>(std::max<std::size_t>(loaded_rows, 1));
  // Output pieces of at least an output batch (the last one of the round may be smaller), so
  // that take_pending can hand each out as it is; they come from the output resource.
  auto const piece_rows = std::max<std::size_t>(
    1,
    static_cast<std::size_t>(
      std::ceil(static_cast<double>(options_.output_batch_bytes) / std::max(row_bytes, 1.0))) +
      1);
  if (bound_row && emit_rows >= piece_rows &&
      static_cast<double>(emit_rows % piece_rows) <
        UNCOPIED_BATCH_MIN_FILL * static_cast<double>(piece_rows)) {
    // No last piece too short to be handed out alone (see take_pending): its rows wait for a
    // later round. A short piece would be topped up from the next round by a copy, which
    // shifts every later batch off its piece: all of them would be copied again.
    emit_rows -= emit_rows % piece_rows;
  }
  auto const gather = [&](std::size_t begin, std::size_t end, memory_resources target) {
    auto rows = detail::gather_sources_in_parallel(
      inputs, ids + begin, end - begin, detail::SOURCE_ROW_BITS, stream_, target);
    result.copied_bytes += estimate_size(rows->view());
    return rows;
  };
  for (std::size_t begin = 0; begin < emit_rows; begin += piece_rows) {
    result.emitted.push_back(gather(begin, std::min(emit_rows, begin + piece_rows), mrs_));
  }
  result.consumed.assign(loaded.size(), 0);
  result.next_min_keys.resize(loaded.size());
  if (!in_place) {
    // Every loaded row is used up: emitted, or merged into the new chunks.
    for (std::size_t input = 0; input < live.size(); ++input) {
      result.consumed[input] = live[input].num_rows();
    }
    std::size_t const rest_rows = total_rows - emit_rows;
    if (rest_rows > 0) {
      auto const rest_bytes = static_cast<std::size_t>(row_bytes * static_cast<double>(rest_rows));
      std::size_t const chunk_size = std::max<std::size_t>(target_chunk_bytes_, 1);
      std::size_t const pieces =
        std::clamp<std::size_t>((rest_bytes + chunk_size - 1) / chunk_size, 1, rest_rows);
      for (std::size_t piece = 0; piece < pieces; ++piece) {
        std::size_t const begin = emit_rows + piece * rest_rows / pieces;
        std::size_t const end   = emit_rows + (piece + 1) * rest_rows / pieces;
        result.remainder.push_back(gather(begin, end, scratch));
      }
    }
    return result;
  }
  // The merge keeps each input's order, so what a chunk gave is a prefix of its live rows.
  if (is_cuda_device_pointer(ids)) {
    // Ids on a CUDA device: every merged row less the few not emitted (under a piece), read
    // back.
    std::vector<std::uint64_t> rest(total_rows - emit_rows);
    copy_bytes(rest.data(),
               memory_kind::HOST,
               ids + emit_rows,
               memory_kind::DEVICE,
               rest.size() * sizeof(std::uint64_t),
               stream_);
    for (std::size_t input = 0; input < inputs.size(); ++input) {
      result.consumed[input] = inputs[input].num_rows();
    }
    for (std::uint64_t const id : rest) {
      --result.consumed[static_cast<std::size_t>(id >> detail::SOURCE_ROW_BITS)];
    }
  } else {
    for (std::size_t row = 0; row < emit_rows; ++row) {
      ++result.consumed[static_cast<std::size_t>(ids[row] >> detail::SOURCE_ROW_BITS)];
    }
  }
  for (std::size_t input = 0; input < live.size(); ++input) {
    std::size_t const next = result.consumed[input];
    if (next < live[input].num_rows()) {
      result.next_min_keys[input] = detail::copy(
        slice(live[input].select(options_.key_columns), next, next + 1), stream_, host);
    }
  }
  return result;
}

bool external_sorter::emit_leading_chunks(std::uint64_t const* order) {
  // The chunk with the smallest minimum overlaps no other when its last key is <= the next
  // smallest minimum; then the same holds for the next chunk, and so on. Only whole chunks go.
  detail::row_comparator const comparator{
    chunks_.front().min_key->view(),
    detail::resolve_orders(options_.orders, options_.key_columns.size())};
  std::vector<std::size_t> leading;
  for (std::size_t position = 0; position < chunks_.size(); ++position) {
    auto const index   = static_cast<std::size_t>(order[position]);
    chunk const& entry = chunks_[index];
    if (entry.offset != 0) {
      break;
    }
    if (position + 1 < chunks_.size()) {
      chunk const& next = chunks_[static_cast<std::size_t>(order[position + 1])];
      if (comparator.compare(entry.max_key->view(), 0, next.min_key->view(), 0) > 0) {
        break;
      }
    }
    leading.push_back(index);
  }
  if (leading.empty()) {
    return false;
  }
  for (std::size_t const index : leading) {
    emit_stored(std::move(chunks_[index]));
  }
  stats_.chunks_unmerged += leading.size();
  std::sort(leading.begin(), leading.end(), std::greater<>{});
  for (std::size_t const index : leading) {
    chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
  }
  return true;
}

void external_sorter::merge_round() {
  memory_resources const host{host_};
  std::vector<table_view> minimums;
  minimums.reserve(chunks_.size());
  for (auto const& entry : chunks_) {
    minimums.push_back(entry.min_key->view());
  }
  auto const all_minimums = detail::concatenate(minimums, stream_, host);
  auto const by_minimum   = detail::sorted_order(
    all_minimums->view(), options_.orders, sort_stability::STABLE, stream_, host);
  auto const* order = by_minimum->view().data<std::uint64_t>();
  if (emit_leading_chunks(order)) {
    return;
  }
  ++stats_.rounds;

  // Load the chunks with the smallest minimums while inputs plus merged output fit the budget.
  std::size_t count        = 0;
  std::size_t loaded_bytes = 0;
  for (; count < chunks_.size(); ++count) {
    std::size_t const bytes = chunks_[static_cast<std::size_t>(order[count])].bytes;
    if (count > 0 && 2 * (loaded_bytes + bytes) > options_.merge_budget_bytes) {
      break;
    }
    loaded_bytes += bytes;
  }
  while (true) {
    std::vector<std::size_t> loaded(order, order + count);
    std::optional<std::size_t> bound_row;
    if (count < chunks_.size()) {
      bound_row = static_cast<std::size_t>(order[count]);
    }
    std::optional<memory_lease> lease;
    round_result result;
    bool const done = run_protected([&] {
      if (options_.task != nullptr) {
        // The merge holds its inputs and their merged copy; ask for what the base lease lacks.
        std::size_t need = 0;
        for (std::size_t const index : loaded) {
          need += 2 * chunks_[index].bytes;
        }
        std::size_t const base = options_.task->base_lease();
        if (need > base && !lease) {
          lease.emplace(options_.task->request_lease(need - base));
        }
      }
      result = merge_attempt(loaded, bound_row, all_minimums->view());
    });
    lease.reset();
    if (done) {
      stats_.bytes_copied += result.copied_bytes;
      // Chunks move past what they gave; those that gave all are freed on every tier.
      std::vector<std::size_t> emptied;
      for (std::size_t input = 0; input < loaded.size(); ++input) {
        chunk& entry = chunks_[loaded[input]];
        entry.offset += result.consumed[input];
        if (entry.offset == entry.rows) {
          emptied.push_back(loaded[input]);
        } else {
          entry.min_key = std::move(result.next_min_keys[input]);
        }
      }
      std::sort(emptied.begin(), emptied.end(), std::greater<>{});
      for (std::size_t const index : emptied) {
        chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
      }
      for (auto& rest : result.remainder) {
        add_chunk(std::move(rest));
      }
      for (auto& piece : result.emitted) {
        std::size_t const rows = piece->num_rows();
        emit(std::move(piece), rows);
      }
      return;
    }
    if (count > 1) {
      count /= 2;
      continue;
    }
    // A lone chunk that does not fit: drop its emitted rows, or else split it (on the host), and
    // plan again.
    chunk& lone = chunks_[static_cast<std::size_t>(order[0])];
    if (lone.offset > 0) {
      auto [emitted, rest] = lone.handle.split_at(lone.offset);
      emitted.release();
      std::size_t const rest_rows = lone.rows - lone.offset;
      lone.bytes =
        static_cast<std::size_t>(static_cast<double>(lone.bytes) * static_cast<double>(rest_rows) /
                                 static_cast<double>(lone.rows));
      lone.handle = std::move(rest);
      lone.rows   = rest_rows;
      lone.offset = 0;
      return;
    }
    SPILLWAY_EXPECTS(lone.rows > 1,
                     "external sort: a chunk of one row does not fit the device even alone",
                     out_of_memory);
    auto [first, second]         = lone.handle.split_at(lone.rows / 2);
    std::size_t const first_rows = lone.rows / 2;
    lone.handle                  = std::move(first);
    std::size_t const lone_bytes = lone.bytes;
    lone.bytes                   = lone_bytes / 2;
    chunk other;
    other.rows  = lone.rows - first_rows;
    other.bytes = lone_bytes - lone.bytes;
    lone.rows   = first_rows;
    {
      pinned_table const pinned = second.acquire();
      other.min_key =
        detail::copy(slice(pinned.view().select(options_.key_columns), 0, 1), stream_, host);
    }
    other.handle = std::move(second);
    chunks_.push_back(std::move(other));
    return;  // the next round plans again with the halves
  }
}

bool external_sorter::in_key_order(std::vector<chunk>& pieces) {
  if (pieces.size() <= 1) {
    return true;
  }
  memory_resources const host{host_};
  std::vector<table_view> minimums;
  for (auto const& piece : pieces) {
    minimums.push_back(piece.min_key->view());
  }
  auto const all_minimums = detail::concatenate(minimums, stream_, host);
  auto const by_minimum   = detail::sorted_order(
    all_minimums->view(), options_.orders, sort_stability::STABLE, stream_, host);
  auto const* order = by_minimum->view().data<std::uint64_t>();
  // The pieces do not overlap iff first, last, first, last, ... in minimum order is sorted,
  // that is iff its stable sorted order is the identity.
  std::vector<table_view> ends;
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    auto const& piece = pieces[static_cast<std::size_t>(order[index])];
    ends.push_back(piece.min_key->view());
    ends.push_back(piece.max_key->view());
  }
  auto const all_ends = detail::concatenate(ends, stream_, host);
  auto const by_end =
    detail::sorted_order(all_ends->view(), options_.orders, sort_stability::STABLE, stream_, host);
  auto const* end_order = by_end->view().data<std::uint64_t>();
  for (std::size_t index = 0; index < ends.size(); ++index) {
    if (end_order[index] != index) {
      return false;
    }
  }
  std::vector<chunk> ordered;
  ordered.reserve(pieces.size());
  for (std::size_t index = 0; index < pieces.size(); ++index) {
    ordered.push_back(std::move(pieces[static_cast<std::size_t>(order[index])]));
  }
  pieces = std::move(ordered);
  return true;
}

void external_sorter::start_range(std::vector<chunk> pieces) {
  if (pieces.empty()) {
    return;
  }
  if (in_key_order(pieces)) {
    ++stats_.ranges_unmerged;
    for (auto& piece : pieces) {
      emit_stored(std::move(piece));
    }
    return;
  }
  std::size_t bytes = 0;
  for (auto const& piece : pieces) {
    bytes += piece.bytes;
  }
  if (2 * bytes > options_.merge_budget_bytes) {
    // The sample misjudged this range: the merge strategy's rounds take it.
    ++stats_.ranges_in_rounds;
  }
  chunks_ = std::move(pieces);
}

void external_sorter::emit_stored(chunk piece) {
  // Already sorted and stored: it joins the pending output as it is, without a copy.
  pending_piece out;
  out.rows   = piece.rows;
  out.bytes  = piece.bytes;
  out.handle = std::move(piece.handle);
  pending_bytes_ += out.bytes;
  pending_.push_back(std::move(out));
}

void external_sorter::emit(std::unique_ptr<table> rows, std::size_t output_rows) {
  pending_piece piece;
  piece.rows          = output_rows;  // rows past it are dead
  piece.bytes         = estimate_size(rows->view(), 0, output_rows);
  piece.output_memory = true;  // merge_attempt gathers emitted rows from the output resource
  pending_bytes_ += piece.bytes;
  // Pending output spills after chunks: it is needed sooner.
  piece.handle = store_.make_spillable(std::move(rows), options_.chunk_priority + 1);
  pending_.push_back(std::move(piece));
}

std::unique_ptr<table> external_sorter::take_pending() {
  auto limit = static_cast<std::size_t>(static_cast<double>(options_.output_batch_bytes) *
                                        (1.0 + options_.output_slack));
  {
    // A whole piece of at least half an output batch (and within the slack), or the last piece
    // of all, goes out as the table it is stored as: no copy, when it is still on the device.
    // (A round often emits less than a batch; filling the batch from the next round's rows
    // would copy both.)
    pending_piece& front = pending_.front();
    bool const last      = pending_.size() == 1 && chunks_.empty() && next_range_ >= ranges_.size();
    bool const whole =
      front.output_memory && front.offset == 0 && front.rows == front.handle.rows();
    bool const batch_sized =
      static_cast<double>(front.bytes) >=
        UNCOPIED_BATCH_MIN_FILL * static_cast<double>(options_.output_batch_bytes) ||
      last;
    if (whole && batch_sized && front.bytes <= limit) {
      if (auto batch = front.handle.take_if_resident()) {
        pending_.pop_front();
        pending_bytes_ = 0;
        for (auto const& piece : pending_) {
          pending_bytes_ += piece.bytes;
        }
        stats_.output_rows += batch->num_rows();
        ++stats_.output_batches;
        return batch;
      }
    }
  }
  while (true) {
    // What the attempt takes: whole pieces, then possibly a prefix of one more.
    std::size_t whole_pieces  = 0;
    std::size_t partial_rows  = 0;
    std::size_t partial_bytes = 0;
    std::size_t taken_bytes   = 0;
    std::unique_ptr<table> batch;
    bool const done = run_protected([&] {
      whole_pieces  = 0;
      partial_rows  = 0;
      partial_bytes = 0;
      taken_bytes   = 0;
      std::vector<pinned_table> pins;
      std::vector<table_view> parts;
      for (auto& piece : pending_) {
        if (taken_bytes >= options_.output_batch_bytes) {
          break;
        }
        pins.push_back(piece.handle.acquire());
        table_view const rest        = slice(pins.back().view(), piece.offset, piece.rows);
        std::size_t const rest_bytes = estimate_size(rest);
        if (taken_bytes + rest_bytes <= limit) {
          parts.push_back(rest);
          taken_bytes += rest_bytes;
          ++whole_pieces;
          continue;
        }
        // The longest prefix that keeps the batch within the limit (at least one row).
        std::size_t low  = 1;
        std::size_t high = rest.num_rows();
        while (low < high) {
          std::size_t const middle = (low + high + 1) / 2;
          if (taken_bytes + estimate_size(rest, 0, middle) <= limit) {
            low = middle;
          } else {
            high = middle - 1;
          }
        }
        std::size_t const prefix_bytes = estimate_size(rest, 0, low);
        if (taken_bytes > 0 && taken_bytes + prefix_bytes > limit) {
          break;
        }
        parts.push_back(slice(rest, 0, low));
        taken_bytes += prefix_bytes;
        partial_rows  = low;
        partial_bytes = prefix_bytes;
        break;
      }
      batch = parts.size() == 1 ? detail::copy(parts.front(), stream_, mrs_)
                                : detail::concatenate(parts, stream_, mrs_);
    });
    if (!done) {
      // Split: hand out a smaller batch.
      SPILLWAY_EXPECTS(
        limit > 1, "external sort: one output row does not fit the device", out_of_memory);
      limit /= 2;
      continue;
    }
    for (std::size_t index = 0; index < whole_pieces; ++index) {
      pending_.pop_front();
    }
    if (partial_rows > 0) {
      pending_.front().offset += partial_rows;
      pending_.front().bytes -= std::min(pending_.front().bytes, partial_bytes);
    }
    pending_bytes_ = 0;
    for (auto const& piece : pending_) {
      pending_bytes_ += piece.bytes;
    }
    stats_.bytes_copied += taken_bytes;
    stats_.output_rows += batch->num_rows();
    ++stats_.output_batches;
    return batch;
  }
}

std::unique_ptr<table> external_sorter::next() {
  SPILLWAY_EXPECTS(finished_, "external_sorter::next before finish()", logic_error);
  auto batch = next_batch();
  if (batch == nullptr) {
    return batch;
  }
  if (options_.testing_reverse_output_batch == batches_out_ && batch->num_rows() > 1) {
    std::vector<std::uint64_t> reversed(batch->num_rows());
    for (std::size_t row = 0; row < reversed.size(); ++row) {
      reversed[row] = reversed.size() - 1 - row;
    }
    column_view const map{
      data_type{type_id::UINT64}, reversed.size(), reversed.data(), nullptr, 0, 0};
    batch = detail::gather(batch->view(), map, out_of_bounds_policy::FAIL, stream_, mrs_);
  }
  ++batches_out_;
  check_order(batch->view());
  return batch;
}

void external_sorter::check_order(table_view const& batch) {
  if (!options_.check_output_order) {
    return;
  }
  if (order_check_ == nullptr) {
    order_check_ = std::make_unique<order_checker>(options_.key_columns, options_.orders, host_);
  }
  auto const start     = std::chrono::steady_clock::now();
  auto const row       = order_check_->next(batch, stream_);
  stats_.order_check_seconds +=
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  if (row) {
    SPILLWAY_FAIL("external sort: internal error: output row " + std::to_string(*row) +
                    " sorts before the row ahead of it (output batch " +
                    std::to_string(batches_out_ - 1) + "); the sort's output is wrong",
                  logic_error);
  }
}

std::unique_ptr<table> external_sorter::next_batch() {
  if (sorted_sources_.valid() || !sorted_pieces_.empty()) {
    return take_sorted();
  }
  while (true) {
    bool const ranges_left = next_range_ < ranges_.size();
    if (pending_bytes_ >= options_.output_batch_bytes ||
        (chunks_.empty() && !ranges_left && !pending_.empty())) {
      return take_pending();
    }
    if (chunks_.empty()) {
      if (!ranges_left) {
        return nullptr;
      }
      // The next range: its pieces are released as they are consumed.
      start_range(std::move(ranges_[next_range_++]));
      continue;
    }
    merge_round();
  }
}

}  // namespace spillway
