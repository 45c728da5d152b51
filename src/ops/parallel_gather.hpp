/**
 * @file parallel_gather.hpp
 * @brief Internal: running work on both cores, and gathering rows into new columns with the
 * columns allocated on the calling thread (so that the OOM protocol sees the caller's task) and
 * filled by two threads.
 */
#pragma once

#include "core/two_threads.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/null_mask.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <span>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace spillway::detail {

/// A gather runs on two threads from this many rows, or from this many bytes moved (wide rows:
/// a chunk of 14k rows of 50 columns is 15 MB, which one thread copied alone).
inline constexpr std::size_t PARALLEL_GATHER_MIN_ROWS  = std::size_t{1} << 14;
inline constexpr std::size_t PARALLEL_GATHER_MIN_BYTES = std::size_t{1} << 20;

/**
 * @brief Runs `work(begin, end)` over [0, rows) in two parts on two threads when the work is
 * large: `rows` rows, or `rows * row_bytes` bytes (one part otherwise). Parts start at
 * multiples of 64 rows, so they never share a byte of a null mask.
 */
template <typename Work>
void for_row_halves(std::size_t rows, Work const& work, std::size_t row_bytes = 0) {
  if (rows < 128 ||
      (rows < PARALLEL_GATHER_MIN_ROWS && rows * row_bytes < PARALLEL_GATHER_MIN_BYTES)) {
    work(std::size_t{0}, rows);
    return;
  }
  std::size_t const middle = rows / 2 / 64 * 64;
  run_on_two_threads([&](std::size_t half) {
    if (half == 0) {
      work(std::size_t{0}, middle);
    } else {
      work(middle, rows);
    }
  });
}

/**
 * @brief A column of `rows` rows of `type` whose row `i` is row `locate(i).second` of column
 * `*locate(i).first` (every index in range). The column is allocated here from `mrs.output()`
 * (string lengths are counted in `mrs.temporary()`); values, characters and null bits are filled
 * by two threads.
 * @param nullable whether any source column has nulls (then the result has a mask)
 */
template <typename Locate>
std::unique_ptr<column> gather_column_in_parallel(data_type type,
                                                  bool nullable,
                                                  std::size_t rows,
                                                  Locate const& locate,
                                                  stream_view stream,
                                                  memory_resources mrs) {
  resource_ref const output = mrs.output();
  mask_state const state    = nullable ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  std::unique_ptr<column> result;
  if (is_fixed_width(type)) {
    result = make_fixed_width_column(type, rows, state, stream, output);
    visit_fixed_width(type, [&]<typename T>() {
      T* out = result->mutable_data<T>();
      for_row_halves(
        rows,
        [&](std::size_t begin, std::size_t end) {
          for (std::size_t row = begin; row < end; ++row) {
            auto const [source, index] = locate(row);
            out[row]                   = source->template data<T>()[index];
          }
        },
        sizeof(T));
    });
  } else {
    // Lengths first (into the offsets), then the running sum, then the characters.
    auto lengths = make_fixed_width_column(
      data_type{type_id::INT64}, rows + 1, mask_state::UNALLOCATED, stream, mrs.temporary());
    std::int64_t* sizes = lengths->mutable_data<std::int64_t>();
    for_row_halves(rows, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        auto const [source, index] = locate(row);
        sizes[row + 1]             = static_cast<std::int64_t>(source->string_at(index).size());
      }
    });
    sizes[0] = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      sizes[row + 1] += sizes[row];
    }
    result =
      make_strings_column(rows, static_cast<std::size_t>(sizes[rows]), state, stream, output);
    std::int64_t* offsets = result->mutable_offsets();
    std::memcpy(offsets, sizes, (rows + 1) * sizeof(std::int64_t));
    lengths.reset();
    char* chars = result->mutable_chars();
    for_row_halves(
      rows,
      [&](std::size_t begin, std::size_t end) {
        for (std::size_t row = begin; row < end; ++row) {
          auto const [source, index]   = locate(row);
          std::string_view const value = source->string_at(index);
          if (!value.empty()) {
            std::memcpy(chars + offsets[row], value.data(), value.size());
          }
        }
      },
      rows == 0 ? 0 : static_cast<std::size_t>(offsets[rows]) / rows);
  }
  if (nullable) {
    bitmask_type* mask = result->mutable_null_mask();
    std::array<std::size_t, 2> nulls{};
    for_row_halves(rows, [&](std::size_t begin, std::size_t end) {
      std::size_t count = 0;
      for (std::size_t row = begin; row < end; ++row) {
        auto const [source, index] = locate(row);
        if (source->is_null(index)) {
          set_bit(mask, row, false);
          ++count;
        }
      }
      nulls[begin == 0 ? 0 : 1] = count;
    });
    result->set_null_count(nulls[0] + nulls[1]);
  }
  return result;
}

/// Rows ahead of the current one whose source values a sources gather prefetches.
inline constexpr std::size_t GATHER_PREFETCH_ROWS = 16;

/**
 * @brief The rows `ids[0, rows)` of several tables with the same column types as a new table
 * from `mrs.output()`, allocated on the calling thread and filled by two threads. An id is
 * `(input << row_bits) | row`. Fixed-width columns without nulls are copied together row by
 * row, with the sources of later rows prefetched (the ids of a full sort jump across every
 * input, so each value is a cache miss); the other columns one at a time.
 */
inline std::unique_ptr<table> gather_sources_in_parallel(std::span<table_view const> inputs,
                                                         std::uint64_t const* ids,
                                                         std::size_t rows,
                                                         unsigned row_bits,
                                                         stream_view stream,
                                                         memory_resources mrs) {
  std::size_t const num_columns = inputs.empty() ? 0 : inputs.front().num_columns();
  std::uint64_t const row_mask  = (std::uint64_t{1} << row_bits) - 1;
  struct plain_column {
    std::vector<std::byte const*> bases;  ///< each input's first value
    std::byte* out;
    std::size_t width;
  };
  std::vector<plain_column> plain;
  std::vector<std::unique_ptr<column>> columns(num_columns);
  for (std::size_t index = 0; index < num_columns; ++index) {
    data_type const type = inputs.front().column(index).type();
    bool nullable        = false;
    for (auto const& input : inputs) {
      nullable = nullable || input.column(index).has_nulls();
    }
    if (is_fixed_width(type) && !nullable) {
      columns[index] =
        make_fixed_width_column(type, rows, mask_state::UNALLOCATED, stream, mrs.output());
      plain_column entry{{}, columns[index]->mutable_data<std::byte>(), size_of(type)};
      for (auto const& input : inputs) {
        column_view const& source = input.column(index);
        entry.bases.push_back(static_cast<std::byte const*>(source.head()) +
                              source.offset() * entry.width);
      }
      plain.push_back(std::move(entry));
      continue;
    }
    auto const locate = [&inputs, ids, index, row_bits, row_mask](std::size_t row) {
      std::uint64_t const id = ids[row];
      return std::pair<column_view const*, std::size_t>{
        &inputs[static_cast<std::size_t>(id >> row_bits)].column(index),
        static_cast<std::size_t>(id & row_mask)};
    };
    columns[index] = gather_column_in_parallel(type, nullable, rows, locate, stream, mrs);
  }
  if (!plain.empty()) {
    std::size_t plain_row_bytes = 0;
    for (auto const& entry : plain) {
      plain_row_bytes += entry.width;
    }
    for_row_halves(
      rows,
      [&](std::size_t begin, std::size_t end) {
        for (std::size_t row = begin; row < end; ++row) {
          if (row + GATHER_PREFETCH_ROWS < end) {
            std::uint64_t const ahead = ids[row + GATHER_PREFETCH_ROWS];
            for (auto const& entry : plain) {
              __builtin_prefetch(entry.bases[static_cast<std::size_t>(ahead >> row_bits)] +
                                 static_cast<std::size_t>(ahead & row_mask) * entry.width);
            }
          }
          std::uint64_t const id = ids[row];
          auto const input       = static_cast<std::size_t>(id >> row_bits);
          auto const source_row  = static_cast<std::size_t>(id & row_mask);
          for (auto const& entry : plain) {
            std::byte const* from = entry.bases[input] + source_row * entry.width;
            std::byte* to         = entry.out + row * entry.width;
            switch (entry.width) {
              case 8:
                std::memcpy(to, from, 8);
                break;
              case 4:
                std::memcpy(to, from, 4);
                break;
              default:
                std::memcpy(to, from, entry.width);
                break;
            }
          }
        }
      },
      plain_row_bytes);
  }
  return std::make_unique<table>(std::move(columns));
}

/**
 * @brief The rows `indices[0, rows)` of `source` (every index below its row count and 2^40) as a
 * new table from `mrs.output()`, allocated on the calling thread and filled by two threads.
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
