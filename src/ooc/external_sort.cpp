#include <spillway/core/error.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <deque>
#include <optional>
#include <string>

namespace spillway {

struct external_sorter::chunk {
  spillable_table handle;
  std::unique_ptr<table> min_key;  ///< the first row's keys, on the host
  std::size_t rows  = 0;
  std::size_t bytes = 0;
};

struct external_sorter::pending_piece {
  spillable_table handle;
  std::size_t rows   = 0;
  std::size_t offset = 0;  ///< rows already handed out
  std::size_t bytes  = 0;  ///< bytes of the rows not yet handed out
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
  if (!options_.orders.empty()) {
    SPILLWAY_EXPECTS_EQ(options_.orders.size(),
                        options_.key_columns.size(),
                        "external sort: one order per key column",
                        invalid_argument);
  }
}

external_sorter::~external_sorter() = default;

struct external_sorter::round_result {
  std::unique_ptr<table> emitted;                 ///< rows <= the bound, in order
  std::vector<std::unique_ptr<table>> remainder;  ///< the rest, cut into chunks
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
  target_chunk_bytes_ =
    std::max(target_chunk_bytes_, bytes / std::min(options_.chunks_per_batch, rows));

  // The batch waits in the store (it may spill) while pieces of it are sorted.
  std::deque<spillable_table> pieces;
  pieces.push_back(store_.make_spillable(std::move(batch), options_.chunk_priority));
  while (!pieces.empty()) {
    spillable_table piece = std::move(pieces.front());
    pieces.pop_front();
    std::vector<std::unique_ptr<table>> chunks;
    bool const done = run_protected([&] {
      chunks.clear();
      pinned_table const pinned = piece.acquire();
      sort_into_chunks(pinned.view(), chunks);
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

void external_sorter::sort_into_chunks(table_view const& batch,
                                       std::vector<std::unique_ptr<table>>& out) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  auto const order               = detail::sorted_order(
    batch.select(options_.key_columns), options_.orders, sort_stability::STABLE, stream_, scratch);
  std::size_t const rows   = batch.num_rows();
  std::size_t const pieces = std::min(options_.chunks_per_batch, rows);
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    std::size_t const begin = piece * rows / pieces;
    std::size_t const end   = (piece + 1) * rows / pieces;
    out.push_back(detail::gather(
      batch, slice(order->view(), begin, end), out_of_bounds_policy::FAIL, stream_, scratch));
  }
}

void external_sorter::add_chunk(std::unique_ptr<table> rows) {
  table_view const view = rows->view();
  chunk entry;
  entry.rows  = view.num_rows();
  entry.bytes = estimate_size(view);
  entry.min_key =
    detail::copy(slice(view.select(options_.key_columns), 0, 1), stream_, memory_resources{host_});
  entry.handle = store_.make_spillable(std::move(rows), options_.chunk_priority);
  chunks_.push_back(std::move(entry));
  ++stats_.chunks_created;
}

void external_sorter::finish() { finished_ = true; }

external_sorter::round_result external_sorter::merge_attempt(std::vector<std::size_t> const& loaded,
                                                             std::optional<std::size_t> bound_row,
                                                             table_view const& minimums) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  round_result result;
  std::unique_ptr<table> merged;
  std::size_t loaded_bytes = 0;
  {
    std::vector<pinned_table> pins;
    std::vector<table_view> inputs;
    pins.reserve(loaded.size());
    for (std::size_t const index : loaded) {
      pins.push_back(chunks_[index].handle.acquire());
      inputs.push_back(pins.back().view());
      loaded_bytes += chunks_[index].bytes;
    }
    merged = inputs.size() == 1
               ? detail::copy(inputs.front(), stream_, scratch)
               : detail::merge(inputs, options_.key_columns, options_.orders, stream_, scratch);
  }
  result.copied_bytes += loaded_bytes;
  table_view const merged_view = merged->view();
  std::size_t const total_rows = merged_view.num_rows();
  std::size_t emit_rows        = total_rows;
  if (bound_row) {
    auto const bound    = slice(minimums, *bound_row, *bound_row + 1);
    auto const position = detail::upper_bound(merged_view.select(options_.key_columns),
                                              bound,
                                              options_.orders,
                                              stream_,
                                              memory_resources{host_});
    emit_rows           = static_cast<std::size_t>(position->view().data<std::uint64_t>()[0]);
  }
  if (emit_rows == total_rows) {
    result.emitted = std::move(merged);
    return result;
  }
  if (emit_rows > 0) {
    result.emitted = detail::copy(slice(merged_view, 0, emit_rows), stream_, scratch);
    result.copied_bytes += estimate_size(result.emitted->view());
  }
  // The rest goes back as chunks of about the chunk size.
  std::size_t const rest_rows  = total_rows - emit_rows;
  std::size_t const rest_bytes = estimate_size(merged_view, emit_rows, total_rows);
  std::size_t const chunk_size = std::max<std::size_t>(target_chunk_bytes_, 1);
  std::size_t const pieces =
    std::clamp<std::size_t>((rest_bytes + chunk_size - 1) / chunk_size, 1, rest_rows);
  for (std::size_t piece = 0; piece < pieces; ++piece) {
    std::size_t const begin = emit_rows + piece * rest_rows / pieces;
    std::size_t const end   = emit_rows + (piece + 1) * rest_rows / pieces;
    result.remainder.push_back(detail::copy(slice(merged_view, begin, end), stream_, scratch));
  }
  result.copied_bytes += rest_bytes;
  return result;
}

void external_sorter::merge_round() {
  ++stats_.rounds;
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
      // The loaded chunks are consumed: free them on every tier.
      std::sort(loaded.begin(), loaded.end(), std::greater<>{});
      for (std::size_t const index : loaded) {
        chunks_.erase(chunks_.begin() + static_cast<std::ptrdiff_t>(index));
      }
      for (auto& rest : result.remainder) {
        add_chunk(std::move(rest));
      }
      if (result.emitted != nullptr) {
        emit(std::move(result.emitted));
      }
      return;
    }
    if (count > 1) {
      count /= 2;
      continue;
    }
    // A lone chunk that does not fit: split it (on the host) and try the first half.
    chunk& lone = chunks_[static_cast<std::size_t>(order[0])];
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

void external_sorter::emit(std::unique_ptr<table> rows) {
  pending_piece piece;
  piece.rows  = rows->num_rows();
  piece.bytes = estimate_size(rows->view());
  pending_bytes_ += piece.bytes;
  // Pending output spills after chunks: it is needed sooner.
  piece.handle = store_.make_spillable(std::move(rows), options_.chunk_priority + 1);
  pending_.push_back(std::move(piece));
}

std::unique_ptr<table> external_sorter::take_pending() {
  auto limit = static_cast<std::size_t>(static_cast<double>(options_.output_batch_bytes) *
                                        (1.0 + options_.output_slack));
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
  while (true) {
    if (pending_bytes_ >= options_.output_batch_bytes || (chunks_.empty() && !pending_.empty())) {
      return take_pending();
    }
    if (chunks_.empty()) {
      return nullptr;
    }
    merge_round();
  }
}

}  // namespace spillway
