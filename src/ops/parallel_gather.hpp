/**
 * @file parallel_gather.hpp
 * @brief Internal: running work on both cores, and gathering rows into new columns with the
 * columns allocated on the calling thread (so that the OOM protocol sees the caller's task) and
 * filled by two threads.
 */
#pragma once

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
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

namespace spillway::detail {

/// Below this many rows a gather runs on the calling thread alone.
inline constexpr std::size_t PARALLEL_GATHER_MIN_ROWS = std::size_t{1} << 14;

/** @brief Runs `work(0)` here and `work(1)` on a second thread; rethrows the first failure. */
template <typename Work>
void run_on_two_threads(Work const& work) {
  std::exception_ptr failure;
  std::thread helper{[&] {
    try {
      work(1);
    } catch (...) {
      failure = std::current_exception();
    }
  }};
  std::exception_ptr own_failure;
  try {
    work(0);
  } catch (...) {
    own_failure = std::current_exception();
  }
  helper.join();
  if (own_failure) {
    std::rethrow_exception(own_failure);
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

/**
 * @brief Runs `work(begin, end)` over [0, rows) in two parts on two threads when `rows` is large
 * (one part otherwise). Parts start at multiples of 64 rows, so they never share a byte of a
 * null mask.
 */
template <typename Work>
void for_row_halves(std::size_t rows, Work const& work) {
  if (rows < PARALLEL_GATHER_MIN_ROWS) {
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
      for_row_halves(rows, [&](std::size_t begin, std::size_t end) {
        for (std::size_t row = begin; row < end; ++row) {
          auto const [source, index] = locate(row);
          out[row]                   = source->template data<T>()[index];
        }
      });
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
    for_row_halves(rows, [&](std::size_t begin, std::size_t end) {
      for (std::size_t row = begin; row < end; ++row) {
        auto const [source, index]   = locate(row);
        std::string_view const value = source->string_at(index);
        if (!value.empty()) {
          std::memcpy(chars + offsets[row], value.data(), value.size());
        }
      }
    });
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

/**
 * @brief The rows `indices[0, rows)` of `source` (every index below its row count) as a new table
 * from `mrs.output()`, allocated on the calling thread and filled by two threads.
 */
inline std::unique_ptr<table> gather_rows_in_parallel(table_view const& source,
                                                      std::uint64_t const* indices,
                                                      std::size_t rows,
                                                      stream_view stream,
                                                      memory_resources mrs) {
  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(source.num_columns());
  for (auto const& input : source) {
    auto const locate = [&input, indices](std::size_t row) {
      return std::pair<column_view const*, std::size_t>{&input,
                                                        static_cast<std::size_t>(indices[row])};
    };
    columns.push_back(
      gather_column_in_parallel(input.type(), input.has_nulls(), rows, locate, stream, mrs));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace spillway::detail
