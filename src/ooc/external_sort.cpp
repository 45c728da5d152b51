#include "ooc/external_sort_internal.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <string>
#include <utility>

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

void external_sorter::push(std::unique_ptr<table> batch) {
  SPILLWAY_EXPECTS(!finished_, "external_sorter::push after finish()", logic_error);
  SPILLWAY_EXPECTS(!sealed_, "external_sorter::push after seal()", logic_error);
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

void external_sorter::seal() {
  SPILLWAY_EXPECTS(!finished_, "external_sorter::seal after finish()", logic_error);
  sealed_ = true;
  if (!deferred_.empty()) {
    flush_deferred();
  }
}

void external_sorter::absorb(external_sorter& other) {
  SPILLWAY_EXPECTS(&other != this, "external_sorter::absorb of itself", invalid_argument);
  SPILLWAY_EXPECTS(!finished_ && !other.finished_,
                   "external_sorter::absorb: both sorters must be unfinished",
                   logic_error);
  SPILLWAY_EXPECTS(other.sealed_ && other.deferred_.empty(),
                   "external_sorter::absorb of a sorter that is not sealed",
                   logic_error);
  SPILLWAY_EXPECTS(&other.store_ == &store_ && other.options_.key_columns == options_.key_columns &&
                     other.options_.orders == options_.orders,
                   "external_sorter::absorb of a sorter of other keys, orders or store",
                   invalid_argument);
  if (other.num_columns_ != 0) {
    if (num_columns_ == 0) {
      num_columns_ = other.num_columns_;
      schema_      = other.schema_;
      key_nulls_.assign(options_.key_columns.size(), false);
    }
    SPILLWAY_EXPECTS(other.schema_ == schema_,
                     "external sort: the batches of the absorbed sorter have other columns",
                     invalid_argument);
  }
  for (auto& piece : other.chunks_) {
    chunks_.push_back(std::move(piece));
  }
  other.chunks_.clear();
  for (auto& part : other.samples_) {
    samples_.push_back(std::move(part));
  }
  other.samples_.clear();
  sample_rows_ += std::exchange(other.sample_rows_, 0);
  if (sample_rate_ == 0.0 || (other.sample_rate_ != 0.0 && other.sample_rate_ < sample_rate_)) {
    sample_rate_ = other.sample_rate_;
  }
  bound_sample();
  // Its runs are this sorter's now: the input is no longer one sort of waiting batches.
  runs_flushed_ += other.runs_flushed_ + 1;
  target_chunk_bytes_ = std::max(target_chunk_bytes_, other.target_chunk_bytes_);
  auto const& theirs  = other.stats_;
  stats_.input_rows += theirs.input_rows;
  stats_.input_bytes += theirs.input_bytes;
  stats_.retries += theirs.retries;
  stats_.splits += theirs.splits;
  stats_.chunks_created += theirs.chunks_created;
  stats_.batch_runs += theirs.batch_runs;
  stats_.bytes_copied += theirs.bytes_copied;
  other.stats_.input_rows  = 0;
  other.stats_.input_bytes = 0;
  other.finished_          = true;
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

}  // namespace spillway
