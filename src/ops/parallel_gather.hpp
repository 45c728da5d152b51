/**
 * @file parallel_gather.hpp
 * @brief Internal: gathering rows into new columns with the columns allocated on the calling
 * thread (so that the OOM protocol sees the caller's task) and filled in parts on the worker pool;
 * and the scatter that moves rows to their places instead when the ids walk the sources in a few
 * ascending runs (`scatter_pays`).
 */
#pragma once

#include "table/cuda/device_table.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/null_mask.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <numeric>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace spillway::detail {

/// A gather runs in parts on the worker pool from this many rows, or from this many bytes moved
/// (wide rows: a batch of 50 columns cut into chunks of 2000 rows was gathered on one thread, chunk
/// by chunk).
inline constexpr std::size_t PARALLEL_GATHER_MIN_ROWS  = std::size_t{1} << 14;
inline constexpr std::size_t PARALLEL_GATHER_MIN_BYTES = std::size_t{1} << 20;
/// Rows ahead of the current one whose source values a gather prefetches. Runs of several
/// batches gather from 30 MB and more at random: 32 rows ahead took the push phase of 100M rows
/// from 2.07-2.12 s to 1.89-1.94 s (16 before; 64 was slower).
inline constexpr std::size_t GATHER_PREFETCH_ROWS = 32;

/// The first of `items` items that part `part` of `parts` equal parts takes (`items` at `parts`).
inline std::size_t part_begin(std::size_t items, std::size_t parts, std::size_t part) noexcept {
  return items / parts * part + items % parts * part / parts;
}

/**
 * @brief Output rows `[0, total)` of a gather into pieces (piece `p` holds rows
 * `[starts[p], starts[p + 1])`), cut into parts for the worker pool when the work is large: one
 * part per pool thread, each of at least half of PARALLEL_GATHER_MIN_ROWS rows or half of
 * PARALLEL_GATHER_MIN_BYTES bytes (and 64 rows). A cut falls in a piece at a multiple of 64 of
 * its own rows, so the parts never share a byte of a piece's null mask.
 */
class piece_rows {
 public:
  piece_rows(std::span<std::size_t const> starts, std::size_t row_bytes)
    : starts_(starts), total_(starts.empty() ? 0 : starts.back()) {
    bounds_.push_back(0);
    if (total_ >= 128 &&
        (total_ >= PARALLEL_GATHER_MIN_ROWS || total_ * row_bytes >= PARALLEL_GATHER_MIN_BYTES)) {
      std::size_t const by_rows  = total_ / (PARALLEL_GATHER_MIN_ROWS / 2);
      std::size_t const by_bytes = total_ * row_bytes / (PARALLEL_GATHER_MIN_BYTES / 2);
      std::size_t const parts =
        std::min({worker_threads(), std::max({std::size_t{2}, by_rows, by_bytes}), total_ / 64});
      for (std::size_t part = 1; part < parts; ++part) {
        std::size_t const target = part_begin(total_, parts, part);
        std::size_t const piece  = piece_of(target);
        std::size_t const cut    = starts_[piece] + (target - starts_[piece]) / 64 * 64;
        if (cut > bounds_.back() && cut < total_) {
          bounds_.push_back(cut);
        }
      }
    }
    bounds_.push_back(total_);
  }

  /// Runs `work(begin, end)` over the output rows, a part at a time on the worker pool.
  template <typename Work>
  void in_parts(Work const& work) const {
    parallel_for(parts(), [&](std::size_t part) { work(bounds_[part], bounds_[part + 1]); });
  }

  /// Calls `visit(piece, first, last)` with the piece-local rows of each piece that output rows
  /// `[begin, end)` overlap.
  template <typename Visit>
  void for_each_piece(std::size_t begin, std::size_t end, Visit const& visit) const {
    for (std::size_t piece = begin < total_ ? piece_of(begin) : starts_.size();
         piece + 1 < starts_.size() && starts_[piece] < end;
         ++piece) {
      std::size_t const first = std::max(begin, starts_[piece]);
      std::size_t const last  = std::min(end, starts_[piece + 1]);
      if (first < last) {
        visit(piece, first - starts_[piece], last - starts_[piece]);
      }
    }
  }

  /// @return the output rows
  [[nodiscard]] std::size_t total() const noexcept { return total_; }

  /// @return the parts the rows are cut into
  [[nodiscard]] std::size_t parts() const noexcept { return bounds_.size() - 1; }

  /// @return which part output row `row` (< total) belongs to
  [[nodiscard]] std::size_t part_of(std::size_t row) const noexcept {
    return static_cast<std::size_t>(std::upper_bound(bounds_.begin(), bounds_.end(), row) -
                                    bounds_.begin()) -
           1;
  }

 private:
  /// The piece holding output row `row` (< total).
  [[nodiscard]] std::size_t piece_of(std::size_t row) const noexcept {
    return static_cast<std::size_t>(std::upper_bound(starts_.begin(), starts_.end(), row) -
                                    starts_.begin()) -
           1;
  }

  std::span<std::size_t const> starts_;
  std::size_t total_;
  std::vector<std::size_t> bounds_;  ///< part p: rows [bounds_[p], bounds_[p + 1])
};

/**
 * @brief Copies `bytes` bytes from `from` to `to` (not overlapping): strings of up to 32 bytes
 * by two loads and two stores that may overlap, without a call, reading and writing no byte
 * outside either range.
 */
/// Copies `bytes` (from sizeof(Word) to 2 * sizeof(Word)) as a leading and a trailing Word.
template <typename Word>
void copy_head_and_tail(char* to, char const* from, std::size_t bytes) noexcept {
  Word head;
  Word tail;
  std::memcpy(&head, from, sizeof(Word));
  std::memcpy(&tail, from + bytes - sizeof(Word), sizeof(Word));
  std::memcpy(to, &head, sizeof(Word));
  std::memcpy(to + bytes - sizeof(Word), &tail, sizeof(Word));
}

inline void copy_string(char* to, char const* from, std::size_t bytes) noexcept {
  if (bytes > 32) {
    std::memcpy(to, from, bytes);
  } else if (bytes >= 16) {
    copy_head_and_tail<std::array<char, 16>>(to, from, bytes);
  } else if (bytes >= 8) {
    copy_head_and_tail<std::uint64_t>(to, from, bytes);
  } else if (bytes >= 4) {
    copy_head_and_tail<std::uint32_t>(to, from, bytes);
  } else {
    for (std::size_t index = 0; index < bytes; ++index) {
      to[index] = from[index];
    }
  }
}

/// Copies one value of `width` bytes: the common widths by fixed-size copies, without a call.
inline void copy_value(std::byte* to, std::byte const* from, std::size_t width) noexcept {
  switch (width) {
    case 8:
      std::memcpy(to, from, 8);
      break;
    case 4:
      std::memcpy(to, from, 4);
      break;
    default:
      std::memcpy(to, from, width);
      break;
  }
}

/// Plain columns whose sources hold at most this many bytes are gathered in groups of about
/// this size, a group at a time (see `plain_column_groups`).
inline constexpr std::size_t GATHER_GROUP_BYTES = std::size_t{1} << 22;

/**
 * @brief The plain columns `columns` (with `bytes[i]` source bytes each) cut into groups that a
 * gather copies together, row by row. Columns larger than `GATHER_GROUP_BYTES` form one group:
 * their values miss the cache whatever the order, and one pass over the ids overlaps their
 * misses. Smaller ones are packed into groups of at most that size: a group's sources stay in
 * the cache while its rows are gathered, where 41 columns copied together (a batch of wide rows)
 * missed on every value.
 */
inline std::vector<std::vector<std::size_t>> plain_column_groups(
  std::span<std::size_t const> columns, std::span<std::size_t const> bytes) {
  std::vector<std::vector<std::size_t>> groups;
  std::vector<std::size_t> large;
  std::size_t filled = 0;
  for (std::size_t at = 0; at < columns.size(); ++at) {
    if (bytes[at] > GATHER_GROUP_BYTES) {
      large.push_back(columns[at]);
      continue;
    }
    if (groups.empty() || filled + bytes[at] > GATHER_GROUP_BYTES) {
      groups.emplace_back();
      filled = 0;
    }
    groups.back().push_back(columns[at]);
    filled += bytes[at];
  }
  if (!large.empty()) {
    groups.push_back(std::move(large));
  }
  return groups;
}

/// A gather of at least this many rows may scatter its plain columns instead (`scatter_pays`).
inline constexpr std::size_t SCATTER_MIN_ROWS = std::size_t{1} << 16;
/// The most ascending runs of source rows the ids may make for a scatter: each run writes its
/// own place of every output column, and their lines must stay in the cache (4096 runs of a
/// group of 4 columns of 8 bytes: 1 MiB, about a core's L2). `spillway_gather_bench`'s
/// `gather_narrow_runs` (10M rows of two INT64 columns, a time series sorted by a key of K
/// values, then by time), scattered against gathered on one machine in one session: 1200 runs
/// 137-149 against 180-183 ms, 4096 runs 156-170 against 182-189 ms, 8192 runs 183-207 against
/// 187-191 ms, 16384 runs 201-232 against 189-196 ms (7843efc:docs/BENCHMARKS.md, "More runs
/// scattered, shards taken as stored, splitters by prefix").
inline constexpr std::size_t SCATTER_MAX_RUNS = 4096;

/**
 * @brief Whether the plain columns of a gather of `ids[0, rows)` from `sources` rows are better
 * written by a scatter, each source row read in order and written to its place: when the ids
 * are every source row once (as a sort's are) and walk the sources in at most
 * SCATTER_MAX_RUNS ascending runs, most of whose steps leave the cache line (a time series
 * sorted by a key of a few values, then by time: read in output order, every value is a miss,
 * while in source order the runs' few output places stay cached).
 */
inline bool scatter_pays(std::size_t sources, std::uint64_t const* ids, std::size_t rows) {
  if (rows < SCATTER_MIN_ROWS || rows != sources) {
    return false;
  }
  std::size_t runs = 1;
  std::size_t near = 0;  // steps to one of the next few rows: a gather reads those in order
  for (std::size_t row = 1; row < rows; ++row) {
    if (ids[row] < ids[row - 1]) {
      if (++runs > SCATTER_MAX_RUNS) {
        return false;
      }
    } else if (ids[row] - ids[row - 1] <= 8) {
      ++near;
    }
  }
  return near < rows / 2;
}

/// `scatter_pays` with the sources `inputs`.
inline bool scatter_pays(std::span<table_view const> inputs,
                         std::uint64_t const* ids,
                         std::size_t rows) {
  std::size_t sources = 0;
  for (auto const& input : inputs) {
    sources += input.num_rows();
  }
  return scatter_pays(sources, ids, rows);
}

/// A place of a scatter: `(piece << PLACE_ROW_BITS) | row in the piece`.
inline constexpr unsigned PLACE_ROW_BITS      = 40;
inline constexpr std::uint64_t PLACE_ROW_MASK = (std::uint64_t{1} << PLACE_ROW_BITS) - 1;

/// The first row of each input in the concatenation of `inputs`, and their total, last.
inline std::vector<std::size_t> first_rows(std::span<table_view const> inputs) {
  std::vector<std::size_t> first_of(inputs.size() + 1, 0);
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    first_of[input + 1] = first_of[input] + inputs[input].num_rows();
  }
  return first_of;
}

/**
 * @brief Where each source row of a gather of `ids` into pieces goes: the place (see
 * PLACE_ROW_BITS) of row `first_of[input] + row` of the concatenated sources, one UINT64 a
 * source row from `temporary`, filled in `parts`' parts on the worker pool.
 * @return the places, or null when the ids are not every source row once
 */
inline std::unique_ptr<column> scatter_places(std::vector<std::size_t> const& first_of,
                                              std::uint64_t const* ids,
                                              std::span<std::size_t const> starts,
                                              unsigned row_bits,
                                              piece_rows const& parts,
                                              stream_view stream,
                                              resource_ref temporary) {
  constexpr std::uint64_t NOWHERE = ~std::uint64_t{0};
  std::uint64_t const row_mask    = (std::uint64_t{1} << row_bits) - 1;
  std::size_t const sources       = first_of.back();
  auto places_column              = make_fixed_width_column(
    data_type{type_id::UINT64}, sources, mask_state::UNALLOCATED, stream, temporary);
  std::uint64_t* places = places_column->mutable_data<std::uint64_t>();
  std::fill_n(places, sources, NOWHERE);
  parts.in_parts([&](std::size_t begin, std::size_t end) {
    parts.for_each_piece(begin, end, [&](std::size_t piece, std::size_t first, std::size_t last) {
      std::uint64_t const* from_id = ids + starts[piece];
      for (std::size_t row = first; row < last; ++row) {
        std::uint64_t const id = from_id[row];
        places[first_of[id >> row_bits] + (id & row_mask)] =
          (std::uint64_t{piece} << PLACE_ROW_BITS) | row;
      }
    });
  });
  if (std::find(places, places + sources, NOWHERE) != places + sources) {
    return nullptr;  // a row twice, so another not at all
  }
  return places_column;
}

/**
 * @brief Copies `width` bytes of source row `source` of `from` to its place, `to[piece] + row *
 * width`.
 */
inline void copy_to_place(std::byte* const* to,
                          std::uint64_t place,
                          std::byte const* from,
                          std::size_t width) noexcept {
  copy_value(to[place >> PLACE_ROW_BITS] + (place & PLACE_ROW_MASK) * width, from, width);
}

/**
 * @brief Writes the plain columns `groups` of every piece by a scatter (see `scatter_pays`):
 * where each source row goes is found first (8 bytes a source row in `temporary`), then each of
 * `parts`' parts reads its share of the source rows, in order, and writes them to their places.
 * @return false, having written nothing, when the ids are not every source row once
 */
inline bool scatter_plain_groups(std::span<table_view const> inputs,
                                 std::uint64_t const* ids,
                                 std::span<std::size_t const> starts,
                                 unsigned row_bits,
                                 std::vector<std::vector<std::size_t>> const& groups,
                                 std::vector<std::size_t> const& widths,
                                 std::vector<std::vector<std::byte const*>> const& bases,
                                 std::vector<std::vector<std::unique_ptr<column>>>& columns,
                                 piece_rows const& parts,
                                 stream_view stream,
                                 resource_ref temporary) {
  auto const first_of = first_rows(inputs);
  auto const places_column =
    scatter_places(first_of, ids, starts, row_bits, parts, stream, temporary);
  if (places_column == nullptr) {
    return false;
  }
  std::uint64_t const* places = places_column->view().data<std::uint64_t>();
  std::size_t const sources   = first_of.back();
  std::size_t const count     = parts.parts();
  parallel_for(count, [&](std::size_t part) {
    std::size_t const begin = part_begin(sources, count, part);
    std::size_t const end   = part_begin(sources, count, part + 1);
    for (auto const& group : groups) {
      // Per column of the group, each piece's values.
      std::vector<std::vector<std::byte*>> targets(group.size());
      for (std::size_t at = 0; at < group.size(); ++at) {
        for (auto& piece : columns) {
          targets[at].push_back(piece[group[at]]->template mutable_data<std::byte>());
        }
      }
      for (std::size_t input = 0; input < inputs.size(); ++input) {
        std::size_t const first = std::max(begin, first_of[input]);
        std::size_t const last  = std::min(end, first_of[input + 1]);
        for (std::size_t global = first; global < last; ++global) {
          std::size_t const source = global - first_of[input];
          for (std::size_t at = 0; at < group.size(); ++at) {
            std::size_t const width = widths[group[at]];
            copy_to_place(
              targets[at].data(), places[global], bases[group[at]][input] + source * width, width);
          }
        }
      }
    }
  });
  return true;
}

/**
 * @brief Puts the rows of `tables` (the same column types, every column owned, not a view) in
 * the order `ids` (an id is `(table << row_bits) | row`), in place, for the columns `plain`
 * (fixed-width, without nulls in any table): row `o` of the tables read one after another
 * becomes the row `ids[o]` was, so each table keeps its row count. Where each row goes is found
 * first (8 bytes a row in `temporary`); then, a column at a time, the column's values are
 * copied out (its width a row in `temporary`) and scattered back to their places in parts on
 * the worker pool, each part reading its share of the rows in order. Nothing is allocated after the
 * first row is written, so an allocation that fails leaves the tables as they were.
 * @return false, having changed nothing, when the ids are not every row once
 */
inline bool permute_in_place(std::span<table* const> tables,
                             std::uint64_t const* ids,
                             unsigned row_bits,
                             std::span<std::size_t const> plain,
                             stream_view stream,
                             resource_ref temporary) {
  std::vector<table_view> views;
  for (table* const owned : tables) {
    views.push_back(owned->view());
  }
  auto const first_of    = first_rows(views);
  std::size_t const rows = first_of.back();
  std::size_t widest     = 0;
  for (std::size_t const index : plain) {
    widest = std::max(widest, size_of(views.front().column(index).type()));
  }
  // The output rows are the tables' rows: piece p of the output is table p.
  piece_rows const parts{first_of, widest};
  auto const places_column =
    scatter_places(first_of, ids, first_of, row_bits, parts, stream, temporary);
  if (places_column == nullptr || plain.empty()) {
    return places_column != nullptr;
  }
  std::uint64_t const* places = places_column->view().data<std::uint64_t>();
  auto const copied_column    = make_fixed_width_column(
    data_type{type_id::UINT8}, rows * widest, mask_state::UNALLOCATED, stream, temporary);
  std::byte* const copied = copied_column->mutable_data<std::byte>();
  for (std::size_t const index : plain) {
    std::size_t const width = size_of(views.front().column(index).type());
    std::vector<std::byte*> targets;
    for (table* const owned : tables) {
      targets.push_back(owned->get_column(index).template mutable_data<std::byte>());
    }
    std::size_t const count = parts.parts();
    parallel_for(count, [&](std::size_t part) {
      for (std::size_t at = part; at < tables.size(); at += count) {
        if (views[at].num_rows() > 0) {
          std::memcpy(copied + first_of[at] * width, targets[at], views[at].num_rows() * width);
        }
      }
    });
    parallel_for(count, [&](std::size_t part) {
      std::size_t const begin = part_begin(rows, count, part);
      std::size_t const end   = part_begin(rows, count, part + 1);
      for (std::size_t row = begin; row < end; ++row) {
        copy_to_place(targets.data(), places[row], copied + row * width, width);
      }
    });
  }
  return true;
}

/**
 * @brief Rows of several tables with the same column types gathered into pieces: piece `p` (a
 * new table from `mrs.output()`) holds the rows `ids[starts[p], starts[p + 1])`. An id is
 * `(input << row_bits) | row`. Every column is allocated on the calling thread (so that the OOM
 * protocol sees the caller's task); values, characters and null bits are filled in parts on the
 * worker pool that split the rows of all pieces between them (`piece_rows`), so that many small
 * pieces (a batch cut into chunks) use every core as one large one does. Fixed-width columns
 * without nulls are copied in groups (`plain_column_groups`), each group row by row across every
 * piece, with the sources of later rows prefetched (the ids of a full sort jump across every
 * input); the other columns one at a time across every piece; or, when `scatter_pays`, the plain
 * columns are scattered instead. String lengths (and a scatter's places) are counted in
 * `mrs.temporary()`.
 */
inline std::vector<std::unique_ptr<table>> gather_pieces_in_parallel(
  std::span<table_view const> inputs,
  std::uint64_t const* ids,
  std::span<std::size_t const> starts,
  unsigned row_bits,
  stream_view stream,
  memory_resources mrs) {
#if SPILLWAY_HAS_CUDA
  for (auto const& input : inputs) {
    if (cuda::on_device(input)) {
      return cuda::gather_pieces(inputs, ids, starts, row_bits, stream, mrs);
    }
  }
#endif
  std::size_t const num_columns = inputs.empty() ? 0 : inputs.front().num_columns();
  std::size_t const num_pieces  = starts.empty() ? 0 : starts.size() - 1;
  std::uint64_t const row_mask  = (std::uint64_t{1} << row_bits) - 1;
  auto const input_of = [&](std::uint64_t id) { return static_cast<std::size_t>(id >> row_bits); };
  auto const row_in   = [&](std::uint64_t id) { return static_cast<std::size_t>(id & row_mask); };

  // What each column is, and the bytes a row moves (for the number of parts).
  enum class kind : std::uint8_t { PLAIN, FIXED, STRING };
  std::vector<kind> kinds(num_columns);
  std::vector<std::size_t> widths(num_columns, 0);
  std::vector<bool> nullable(num_columns, false);
  std::size_t row_bytes = 0;
  for (std::size_t index = 0; index < num_columns; ++index) {
    data_type const type = inputs.front().column(index).type();
    for (auto const& input : inputs) {
      nullable[index] = nullable[index] || input.column(index).has_nulls();
    }
    if (is_fixed_width(type)) {
      kinds[index]  = nullable[index] ? kind::FIXED : kind::PLAIN;
      widths[index] = size_of(type);
      row_bytes += widths[index];
    } else {
      kinds[index]      = kind::STRING;
      std::size_t chars = 0;
      std::size_t rows  = 0;
      for (auto const& input : inputs) {
        chars += estimate_size(table_view{input.column(index)});
        rows += input.num_rows();
      }
      row_bytes += rows == 0 ? 0 : chars / rows;
    }
  }
  piece_rows const parts{starts, row_bytes};

  // String lengths first (into per-piece length columns), in parts, and where each
  // string's characters are (so that the copy reads no source offset again).
  std::vector<std::vector<std::unique_ptr<column>>> lengths(num_columns);
  std::vector<std::vector<std::unique_ptr<column>>> sources(num_columns);
  for (std::size_t index = 0; index < num_columns; ++index) {
    if (kinds[index] != kind::STRING) {
      continue;
    }
    for (std::size_t piece = 0; piece < num_pieces; ++piece) {
      std::size_t const rows = starts[piece + 1] - starts[piece];
      lengths[index].push_back(make_fixed_width_column(
        data_type{type_id::INT64}, rows + 1, mask_state::UNALLOCATED, stream, mrs.temporary()));
      sources[index].push_back(make_fixed_width_column(
        data_type{type_id::UINT64}, rows, mask_state::UNALLOCATED, stream, mrs.temporary()));
    }
  }
  // Each input's offsets (from its first row) and characters, per string column.
  std::vector<std::vector<std::int64_t const*>> string_offsets(num_columns);
  std::vector<std::vector<char const*>> string_chars(num_columns);
  for (std::size_t index = 0; index < num_columns; ++index) {
    if (kinds[index] != kind::STRING) {
      continue;
    }
    for (auto const& input : inputs) {
      column_view const& source = input.column(index);
      string_offsets[index].push_back(source.offsets() + source.offset());
      string_chars[index].push_back(source.chars());
    }
  }
  // Random ids miss the cache on each source offset and on each string's characters: the
  // offsets are prefetched two distances ahead, the characters (from offsets by then cached) one.
  parts.in_parts([&](std::size_t begin, std::size_t end) {
    for (std::size_t index = 0; index < num_columns; ++index) {
      if (kinds[index] != kind::STRING) {
        continue;
      }
      std::int64_t const* const* offsets = string_offsets[index].data();
      char const* const* chars           = string_chars[index].data();
      parts.for_each_piece(begin, end, [&](std::size_t piece, std::size_t first, std::size_t last) {
        std::int64_t* sizes          = lengths[index][piece]->mutable_data<std::int64_t>();
        auto* from                   = sources[index][piece]->mutable_data<std::uint64_t>();
        std::uint64_t const* from_id = ids + starts[piece];
        for (std::size_t row = first; row < last; ++row) {
          if (row + GATHER_PREFETCH_ROWS < last) {
            std::uint64_t const ahead = from_id[row + GATHER_PREFETCH_ROWS];
            __builtin_prefetch(offsets[input_of(ahead)] + row_in(ahead));
          }
          std::uint64_t const id     = from_id[row];
          std::int64_t const* bounds = offsets[input_of(id)] + row_in(id);
          sizes[row + 1]             = bounds[1] - bounds[0];
          from[row] = reinterpret_cast<std::uintptr_t>(chars[input_of(id)] + bounds[0]);
        }
      });
    }
  });

  // Every column of every piece, allocated here.
  std::vector<std::vector<std::unique_ptr<column>>> columns(num_pieces);
  for (std::size_t piece = 0; piece < num_pieces; ++piece) {
    std::size_t const rows = starts[piece + 1] - starts[piece];
    for (std::size_t index = 0; index < num_columns; ++index) {
      data_type const type   = inputs.front().column(index).type();
      mask_state const state = nullable[index] ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
      if (kinds[index] != kind::STRING) {
        columns[piece].push_back(make_fixed_width_column(type, rows, state, stream, mrs.output()));
        continue;
      }
      std::int64_t* sizes = lengths[index][piece]->mutable_data<std::int64_t>();
      sizes[0]            = 0;
      for (std::size_t row = 0; row < rows; ++row) {
        sizes[row + 1] += sizes[row];
      }
      auto result = make_strings_column(
        rows, static_cast<std::size_t>(sizes[rows]), state, stream, mrs.output(), type);
      std::memcpy(result->mutable_offsets(), sizes, (rows + 1) * sizeof(std::int64_t));
      columns[piece].push_back(std::move(result));
    }
  }
  lengths.clear();  // (sources stay until the characters are copied)

  // Plain columns: each input's first value, per column, and the columns in groups copied
  // together (see `plain_column_groups`).
  std::vector<std::size_t> plain;
  std::vector<std::size_t> plain_bytes;
  std::vector<std::vector<std::byte const*>> bases(num_columns);
  for (std::size_t index = 0; index < num_columns; ++index) {
    if (kinds[index] != kind::PLAIN) {
      continue;
    }
    plain.push_back(index);
    std::size_t const width = widths[index];
    std::size_t bytes       = 0;
    for (auto const& input : inputs) {
      column_view const& source = input.column(index);
      bases[index].push_back(static_cast<std::byte const*>(source.head()) +
                             source.offset() * width);
      bytes += source.size() * width;
    }
    plain_bytes.push_back(bytes);
  }
  auto const groups    = plain_column_groups(plain, plain_bytes);
  bool const scattered = !groups.empty() && scatter_pays(inputs, ids, parts.total()) &&
                         scatter_plain_groups(inputs,
                                              ids,
                                              starts,
                                              row_bits,
                                              groups,
                                              widths,
                                              bases,
                                              columns,
                                              parts,
                                              stream,
                                              mrs.temporary());
  std::vector<std::vector<std::size_t>> const no_groups;  // (when scattered)
  std::vector<std::size_t> nulls(num_columns * num_pieces * parts.parts(), 0);
  // A group or a column at a time across every piece, so that its sources stay cached.
  parts.in_parts([&](std::size_t begin, std::size_t end) {
    std::size_t const part = parts.part_of(begin);
    // Plain columns a group at a time, row by row, the sources of later rows prefetched.
    for (auto const& group : scattered ? no_groups : groups) {
      std::vector<std::byte*> targets(group.size());
      std::vector<std::byte const* const*> froms(group.size());
      std::vector<std::size_t> sizes(group.size());
      for (std::size_t at = 0; at < group.size(); ++at) {
        froms[at] = bases[group[at]].data();
        sizes[at] = widths[group[at]];
      }
      parts.for_each_piece(begin, end, [&](std::size_t piece, std::size_t first, std::size_t last) {
        std::uint64_t const* from_id = ids + starts[piece];
        for (std::size_t at = 0; at < group.size(); ++at) {
          targets[at] = columns[piece][group[at]]->template mutable_data<std::byte>();
        }
        for (std::size_t row = first; row < last; ++row) {
          if (row + GATHER_PREFETCH_ROWS < last) {
            std::uint64_t const ahead = from_id[row + GATHER_PREFETCH_ROWS];
            for (std::size_t at = 0; at < group.size(); ++at) {
              __builtin_prefetch(froms[at][input_of(ahead)] + row_in(ahead) * sizes[at]);
            }
          }
          std::uint64_t const id = from_id[row];
          for (std::size_t at = 0; at < group.size(); ++at) {
            std::size_t const width = sizes[at];
            std::byte const* from   = froms[at][input_of(id)] + row_in(id) * width;
            copy_value(targets[at] + row * width, from, width);
          }
        }
      });
    }
    for (std::size_t index = 0; index < num_columns; ++index) {
      if (kinds[index] == kind::PLAIN) {
        continue;  // (copied with their group above)
      }
      parts.for_each_piece(begin, end, [&](std::size_t piece, std::size_t first, std::size_t last) {
        std::uint64_t const* from_id = ids + starts[piece];
        spillway::column& out        = *columns[piece][index];
        if (kinds[index] == kind::FIXED) {
          visit_fixed_width(out.type(), [&]<typename T>() {
            T* values = out.template mutable_data<T>();
            for (std::size_t row = first; row < last; ++row) {
              std::uint64_t const id = from_id[row];
              values[row] = inputs[input_of(id)].column(index).template data<T>()[row_in(id)];
            }
          });
        } else if (kinds[index] == kind::STRING) {
          char* chars                 = out.mutable_chars();
          std::int64_t const* offsets = out.mutable_offsets();
          auto const* from = sources[index][piece]->template mutable_data<std::uint64_t>();
          for (std::size_t row = first; row < last; ++row) {
            if (row + GATHER_PREFETCH_ROWS < last) {
              __builtin_prefetch(reinterpret_cast<char const*>(from[row + GATHER_PREFETCH_ROWS]));
            }
            copy_string(chars + offsets[row],
                        reinterpret_cast<char const*>(from[row]),
                        static_cast<std::size_t>(offsets[row + 1] - offsets[row]));
          }
        }
        if (nullable[index]) {
          bitmask_type* mask = out.mutable_null_mask();
          std::size_t count  = 0;
          for (std::size_t row = first; row < last; ++row) {
            std::uint64_t const id = from_id[row];
            if (inputs[input_of(id)].column(index).is_null(row_in(id))) {
              set_bit(mask, row, false);
              ++count;
            }
          }
          nulls[(piece * num_columns + index) * parts.parts() + part] += count;
        }
      });
    }
  });

  std::vector<std::unique_ptr<table>> result;
  result.reserve(num_pieces);
  for (std::size_t piece = 0; piece < num_pieces; ++piece) {
    for (std::size_t index = 0; index < num_columns; ++index) {
      if (nullable[index]) {
        auto const first = nulls.begin() + static_cast<std::ptrdiff_t>(
                                             (piece * num_columns + index) * parts.parts());
        columns[piece][index]->set_null_count(std::accumulate(
          first, first + static_cast<std::ptrdiff_t>(parts.parts()), std::size_t{0}));
      }
    }
    result.push_back(std::make_unique<table>(std::move(columns[piece])));
  }
  return result;
}

/**
 * @brief The rows `ids[0, rows)` of several tables with the same column types as a new table
 * from `mrs.output()`: `gather_pieces_in_parallel` with one piece.
 */
inline std::unique_ptr<table> gather_sources_in_parallel(std::span<table_view const> inputs,
                                                         std::uint64_t const* ids,
                                                         std::size_t rows,
                                                         unsigned row_bits,
                                                         stream_view stream,
                                                         memory_resources mrs) {
  std::array<std::size_t, 2> const starts{0, rows};
  return std::move(gather_pieces_in_parallel(inputs, ids, starts, row_bits, stream, mrs).front());
}

/**
 * @brief The rows `indices[0, rows)` of `source` (every index below its row count and 2^40) as a
 * new table from `mrs.output()`, allocated on the calling thread and filled on the worker pool.
 */
inline std::unique_ptr<table> gather_rows_in_parallel(table_view const& source,
                                                      std::uint64_t const* indices,
                                                      std::size_t rows,
                                                      stream_view stream,
                                                      memory_resources mrs) {
  // One input: every index is a source id of input 0.
  return gather_sources_in_parallel(
    std::span<table_view const>{&source, 1}, indices, rows, 40, stream, mrs);
}

}  // namespace spillway::detail
