/**
 * @file output_batches.cpp
 * @brief External sort output: the one-sort path, pending output and the checked output batches.
 */
#include "ooc/external_sort_internal.hpp"
#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <chrono>
#include <optional>
#include <span>
#include <string>
#include <tuple>

namespace spillway {

using detail::carried_column;
using detail::decoded_keys_target;
using detail::gather_with_sorted_keys;
using detail::sorted_column;

namespace {

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

}  // namespace

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
  auto const start = std::chrono::steady_clock::now();
  auto const row   = order_check_->next(batch, stream_);
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
