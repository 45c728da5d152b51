/**
 * @file sort_planning.cpp
 * @brief External sort planning: batch deferral, chunk sizing, sampling, ranges and their pieces.
 */
#include "ooc/external_sort_internal.hpp"
#include "ops/parallel_gather.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <deque>
#include <optional>

namespace spillway {

/// Chunks are not cut smaller than what lets one merge round load this many of them.
constexpr std::size_t MAX_MERGE_WAYS = 256;
/// Nor larger than what lets one round load this many: a round emits the merged rows below the
/// smallest first key not loaded, so with two chunks of half the budget each whose keys
/// interleave, a round emits a few rows and cuts the rest back (hundreds of rounds per range).
constexpr std::size_t MIN_MERGE_WAYS = 8;

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
  bound_sample();
}

void external_sorter::bound_sample() {
  memory_resources const host{host_};
  while (sample_rows_ > options_.max_samples) {
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
    minimums.push_back(entry.min_key());
    maximums.push_back(entry.max_key());
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
            if (entry.ends == nullptr) {
              // A half of a split chunk: its first and last keys, for the range's planning.
              entry.ends = detail::concatenate(
                std::vector<table_view>{slice(keys, 0, 1), slice(keys, end - 1, end)},
                stream_,
                host);
              entry.live_min.reset();
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

}  // namespace spillway
