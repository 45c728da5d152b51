/**
 * @file chunk_store.cpp
 * @brief External sort chunks: pushed batches and runs sorted and cut into stored chunks.
 */
#include "ooc/external_sort_internal.hpp"
#include "ops/parallel_gather.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <deque>
#include <optional>
#include <span>

namespace spillway {

/// Attempts to split a batch that did not fit (or to sample a run) before the sort gives up.
constexpr std::size_t MAX_SPLIT_ATTEMPTS = 64;

using detail::carried_column;
using detail::decoded_keys_target;
using detail::gather_with_sorted_keys;
using detail::sorted_column;

namespace detail {

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

std::vector<std::unique_ptr<column>>* decoded_keys_target(
  std::vector<std::size_t> const& key_columns, std::vector<std::unique_ptr<column>>& decoded) {
  return key_columns.size() == 1 ? &decoded : nullptr;
}

std::optional<std::size_t> carried_column(std::size_t num_columns,
                                          std::vector<std::size_t> const& key_columns) {
  if (num_columns != 2 || key_columns.size() != 1) {
    return std::nullopt;
  }
  return key_columns.front() == 0 ? 1 : 0;
}

}  // namespace detail

namespace {

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

/**
 * The rows of `inputs` (keys `keys`) in order, cut into pieces at `starts`, when the table is a
 * key and one value column that `detail::sorted_key_values` sorts together (no gather follows);
 * else false, with `pieces` untouched.
 */
bool sort_key_value_pieces(std::span<table_view const> inputs,
                           std::span<table_view const> keys,
                           external_sort_options const& options,
                           std::span<std::size_t const> starts,
                           std::vector<std::unique_ptr<table>>& pieces,
                           stream_view stream,
                           memory_resources mrs) {
  auto const carried = carried_column(inputs.front().num_columns(), options.key_columns);
  if (!carried) {
    return false;
  }
  std::vector<column_view> values;
  for (auto const& input : inputs) {
    values.push_back(input.column(*carried));
  }
  if (!detail::sorts_key_values(keys, options.orders, values)) {
    return false;
  }
  auto const [sorted_keys, sorted_values] =
    detail::sorted_key_values(keys, options.orders, values, stream, mrs);
  pieces = key_value_pieces(
    sorted_keys->view(), sorted_values->view(), options.key_columns.front(), starts, stream, mrs);
  return true;
}

}  // namespace

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
    if (sort_key_value_pieces(inputs, keys, options_, starts, chunks, stream_, scratch)) {
      return;
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
    // Each batch comes back onto the device to be sampled: under the protocol, each sampled once.
    std::size_t sampled = 0;
    for (std::size_t attempt = 0; sampled < batches.size(); ++attempt) {
      SPILLWAY_EXPECTS(attempt < MAX_SPLIT_ATTEMPTS,
                       "external sort: a sorted run could not be sampled in " +
                         std::to_string(MAX_SPLIT_ATTEMPTS) +
                         " attempts: the device never had room to hold one of its batches",
                       out_of_memory);
      bool const whole = run_protected([&] {
        for (; sampled < batches.size(); ++sampled) {
          pinned_table const pinned = batches[sampled].acquire();
          sample_batch(pinned.view());
        }
      });
      if (!whole && options_.coordinator != nullptr && options_.task != nullptr) {
        static_cast<void>(options_.coordinator->wait_after_rollback(options_.task->id()));
      }
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
    // Splitting brings the piece back onto the device (and may pack its halves there): under
    // the protocol too, where another task may hold the memory. Asked to split the split, it
    // runs again once memory came back; a split that never fits is a final out-of-memory.
    std::optional<std::pair<spillable_table, spillable_table>> halves;
    for (std::size_t attempt = 0; !halves; ++attempt) {
      SPILLWAY_EXPECTS(attempt < MAX_SPLIT_ATTEMPTS,
                       "external sort: a batch of " + std::to_string(piece.rows()) +
                         " rows could not be split in " + std::to_string(MAX_SPLIT_ATTEMPTS) +
                         " attempts: the device never had room to hold it",
                       out_of_memory);
      bool const split = run_protected([&] { halves.emplace(piece.split_at(piece.rows() / 2)); });
      if (!split && options_.coordinator != nullptr && options_.task != nullptr) {
        // Nothing to cut smaller: wait, as a rolled-back task does, until memory comes back.
        static_cast<void>(options_.coordinator->wait_after_rollback(options_.task->id()));
      }
    }
    pieces.push_front(std::move(halves->second));
    pieces.push_front(std::move(halves->first));
  }
  stats_.bytes_copied += bytes;
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
  std::vector<std::size_t> starts(pieces + 1);
  for (std::size_t piece = 0; piece <= pieces; ++piece) {
    starts[piece] = piece * rows / pieces;
  }
  // A key and one value: sorted together, the values carried in the sort's records, no gather.
  if (sort_key_value_pieces(std::span<table_view const>{&batch, 1},
                            {&keys, 1},
                            options_,
                            starts,
                            out,
                            stream_,
                            scratch)) {
    return;
  }
  auto const sorted = detail::sorted_order(
    keys, options_.orders, sort_stability::STABLE, stream_, scratch, /*check_order=*/false);
  // Every chunk in one gather: its two threads split the rows of all chunks between them.
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

external_sorter::chunk external_sorter::make_chunk(std::unique_ptr<table> rows) {
  table_view const view = rows->view();
  table_view const keys = view.select(options_.key_columns);
  chunk entry;
  entry.rows  = view.num_rows();
  entry.bytes = estimate_size(view);
  entry.ends  = detail::concatenate(
    std::vector<table_view>{slice(keys, 0, 1), slice(keys, entry.rows - 1, entry.rows)},
    stream_,
    memory_resources{host_});
  entry.handle = store_.make_spillable(std::move(rows), options_.chunk_priority);
  ++stats_.chunks_created;
  return entry;
}

void external_sorter::add_chunk(std::unique_ptr<table> rows) {
  chunks_.push_back(make_chunk(std::move(rows)));
}

}  // namespace spillway
