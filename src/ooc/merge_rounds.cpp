/**
 * @file merge_rounds.cpp
 * @brief External sort merge rounds: chunks merged, emitted below a bound, the rest cut back.
 */
#include "ooc/external_sort_internal.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <cmath>
#include <optional>

namespace spillway {

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

external_sorter::round_result external_sorter::merge_attempt(
  std::vector<std::size_t> const& loaded, std::optional<table_view> const& bound) {
  memory_resources const scratch = mrs_.with_output(mrs_.temporary());
  memory_resources const host    = mrs_.with_output(host_);  // as in cut_chunks
  round_result result;
  std::vector<pinned_table> pins;
  std::vector<table_view> live;  ///< each loaded chunk's rows not yet emitted
  std::size_t loaded_bytes = 0;
  std::size_t loaded_rows  = 0;
  std::size_t live_rows    = 0;
  pins.reserve(loaded.size());
  // Chunks on disk are read side by side on the store's I/O threads (each acquire would wait for
  // its own read, one after another): as many as the host has room for now.
  for (std::size_t const index : loaded) {
    store_.prefetch(chunks_[index].handle);
  }
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
    if (bound) {
      auto const cut = detail::upper_bound(
        live[input].select(options_.key_columns), *bound, options_.orders, stream_, host);
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
  if (bound && emit_rows >= piece_rows &&
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

bool external_sorter::emit_leading_chunks(std::size_t const* order) {
  // The chunk with the smallest minimum overlaps no other when its last key is <= the next
  // smallest minimum; then the same holds for the next chunk, and so on. Only whole chunks go.
  detail::row_comparator const comparator{
    chunks_.front().min_key(),
    detail::resolve_orders(options_.orders, options_.key_columns.size())};
  std::vector<std::size_t> leading;
  for (std::size_t position = 0; position < chunks_.size(); ++position) {
    auto const index   = order[position];
    chunk const& entry = chunks_[index];
    if (entry.offset != 0 || !entry.has_max_key()) {
      break;
    }
    if (position + 1 < chunks_.size()) {
      chunk const& next = chunks_[order[position + 1]];
      if (comparator.compare(entry.max_key(), 0, next.min_key(), 0) > 0) {
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
  remove_chunks(std::move(leading));
  return true;
}

void external_sorter::order_chunks() {
  memory_resources const host{host_};
  std::vector<table_view> minimums;
  minimums.reserve(chunks_.size());
  for (auto const& entry : chunks_) {
    minimums.push_back(entry.min_key());
  }
  auto const all_minimums = detail::concatenate(minimums, stream_, host);
  auto const sorted       = detail::sorted_order(
    all_minimums->view(), options_.orders, sort_stability::STABLE, stream_, host);
  auto const* order = sorted->view().data<std::uint64_t>();
  by_minimum_.assign(order, order + chunks_.size());
  by_minimum_valid_ = true;
}

void external_sorter::reorder_chunks(std::vector<std::size_t> moved) {
  if (moved.empty()) {
    return;
  }
  detail::row_comparator const comparator{
    chunks_[moved.front()].min_key(),
    detail::resolve_orders(options_.orders, options_.key_columns.size())};
  // By minimum, then by index: the order `order_chunks` gives.
  auto const before = [&](std::size_t lhs, std::size_t rhs) {
    int const order = comparator.compare(chunks_[lhs].min_key(), 0, chunks_[rhs].min_key(), 0);
    return order != 0 ? order < 0 : lhs < rhs;
  };
  std::sort(moved.begin(), moved.end());
  std::erase_if(by_minimum_, [&moved](std::size_t index) {
    return std::binary_search(moved.begin(), moved.end(), index);
  });
  std::sort(moved.begin(), moved.end(), before);
  // Each moved chunk goes after those that precede it (a binary search from where the last one
  // went: a few comparisons per chunk rather than one per chunk in all).
  std::vector<std::size_t> merged;
  merged.reserve(by_minimum_.size() + moved.size());
  auto from = by_minimum_.begin();
  for (std::size_t const index : moved) {
    auto const at = std::upper_bound(from, by_minimum_.end(), index, before);
    merged.insert(merged.end(), from, at);
    merged.push_back(index);
    from = at;
  }
  merged.insert(merged.end(), from, by_minimum_.end());
  by_minimum_ = std::move(merged);
}

void external_sorter::remove_chunks(std::vector<std::size_t> indices) {
  std::sort(indices.begin(), indices.end());
  // Where each kept chunk moves to (the others keep their order); removed ones map to npos.
  constexpr auto removed = static_cast<std::size_t>(-1);
  std::vector<std::size_t> moved_to(chunks_.size(), removed);
  std::size_t kept = 0;
  auto next        = indices.begin();
  for (std::size_t index = 0; index < chunks_.size(); ++index) {
    if (next != indices.end() && *next == index) {
      ++next;
      continue;
    }
    if (kept != index) {
      chunks_[kept] = std::move(chunks_[index]);
    }
    moved_to[index] = kept++;
  }
  chunks_.resize(kept);
  std::vector<std::size_t> order;
  order.reserve(by_minimum_.size());
  for (std::size_t const index : by_minimum_) {
    if (index < moved_to.size() && moved_to[index] != removed) {
      order.push_back(moved_to[index]);
    }
  }
  by_minimum_ = std::move(order);
}

void external_sorter::merge_round() {
  if (!by_minimum_valid_ || by_minimum_.size() != chunks_.size()) {
    order_chunks();
  }
  if (emit_leading_chunks(by_minimum_.data())) {
    return;
  }
  ++stats_.rounds;
  std::size_t const* order = by_minimum_.data();

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
    std::optional<table_view> bound;
    if (count < chunks_.size()) {
      bound = chunks_[order[count]].min_key();
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
      result = merge_attempt(loaded, bound);
    });
    lease.reset();
    if (done) {
      stats_.bytes_copied += result.copied_bytes;
      // Chunks move past what they gave; those that gave all are freed on every tier. The
      // others, and the merged remainder's new chunks, take their places by minimum again.
      std::vector<std::size_t> emptied;
      std::vector<std::size_t> moved;
      for (std::size_t input = 0; input < loaded.size(); ++input) {
        chunk& entry = chunks_[loaded[input]];
        entry.offset += result.consumed[input];
        if (entry.offset == entry.rows) {
          emptied.push_back(loaded[input]);
        } else if (result.consumed[input] > 0) {
          entry.live_min = std::move(result.next_min_keys[input]);
          moved.push_back(loaded[input]);
        }
      }
      for (auto& rest : result.remainder) {
        moved.push_back(chunks_.size());
        add_chunk(std::move(rest));
      }
      reorder_chunks(std::move(moved));
      remove_chunks(std::move(emptied));
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
    memory_resources const host{host_};
    by_minimum_valid_            = false;  // the halves are ordered again
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
      other.live_min =
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
    minimums.push_back(piece.min_key());
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
    ends.push_back(piece.min_key());
    ends.push_back(piece.max_key());
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
  chunks_           = std::move(pieces);
  by_minimum_valid_ = false;
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

}  // namespace spillway
