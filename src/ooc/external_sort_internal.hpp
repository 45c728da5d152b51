/**
 * @file external_sort_internal.hpp
 * @brief What the parts of `external_sorter` share (private to the ooc layer).
 *
 * `external_sorter` is defined in parts: external_sort.cpp (construction, `push`, `finish`),
 * sort_planning.cpp (deferred batches, chunk sizes, the sample and its ranges), chunk_store.cpp
 * (batches and runs sorted into stored chunks), merge_rounds.cpp (merge rounds and what they
 * emit) and output_batches.cpp (the one-sort path, output batches and their order check).
 */
#pragma once

#include <spillway/ooc/external_sort.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <utility>
#include <vector>

namespace spillway {

/// A stored piece of pending output this full (of `output_batch_bytes`) is handed out alone,
/// without a copy, rather than topped up with the next piece's rows.
constexpr double UNCOPIED_BATCH_MIN_FILL = 0.5;

struct external_sorter::chunk {
  spillable_table handle;
  /// The first and the last row's keys, two rows on the host (one table: a sort of a large input
  /// keeps tens of thousands of chunks); null for the second half of a split.
  std::unique_ptr<table> ends;
  /// The first live row's keys, when they are not the first row's (rows before it were emitted,
  /// or the chunk is the second half of a split).
  std::unique_ptr<table> live_min;
  std::size_t rows  = 0;  ///< stored rows
  std::size_t bytes = 0;  ///< stored bytes
  /// Rows before it are merged and emitted: a round emits a prefix of each chunk it loads, and
  /// the rest stays where it is stored instead of being copied into new chunks.
  std::size_t offset = 0;

  /// The first live row's keys.
  [[nodiscard]] table_view min_key() const {
    return live_min ? live_min->view() : slice(ends->view(), 0, 1);
  }
  /// Whether the last row's keys are known (not in the second half of a split).
  [[nodiscard]] bool has_max_key() const noexcept { return ends != nullptr; }
  /// The last row's keys (at or above those of the first half of a split).
  [[nodiscard]] table_view max_key() const { return slice(ends->view(), 1, 2); }
};

struct external_sorter::pending_piece {
  spillable_table handle;
  std::size_t rows   = 0;
  std::size_t offset = 0;      ///< rows already handed out
  std::size_t bytes  = 0;      ///< bytes of the rows not yet handed out
  bool output_memory = false;  ///< allocated from the output resource (may be handed out as is)
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

namespace detail {

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
                                                            memory_resources mrs);

/**
 * Where `sorted_sources` hands back the key columns it decodes from its sorted prefixes, or null.
 * One key is decoded (the output's key column is then copied, not moved or gathered); several are
 * not: each decoded column is memory a first run must fault in while the sort's merge writes it,
 * which cost more than moving the columns saved (the in-memory distributed sort by two INT64
 * keys, first runs 2.9-3.0 s -> 4.2-5.3 s, later ones 2.27-2.32 -> 2.15-2.19 s;
 * 7843efc:docs/BENCHMARKS.md, "More runs scattered, shards taken as stored, splitters by prefix").
 */
std::vector<std::unique_ptr<column>>* decoded_keys_target(
  std::vector<std::size_t> const& key_columns, std::vector<std::unique_ptr<column>>& decoded);

/**
 * The value column `sorted_key_values` would carry with the key: the one column besides the one
 * key column (whether it qualifies, `detail::sorts_key_values` says).
 */
std::optional<std::size_t> carried_column(std::size_t num_columns,
                                          std::vector<std::size_t> const& key_columns);

}  // namespace detail

}  // namespace spillway
