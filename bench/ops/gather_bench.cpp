/**
 * Gathers of rows by a random order, in bytes moved per second: what the out-of-core sort does
 * to every input batch (its rows by sorted order, cut into chunks) and to every merge round.
 *
 * - wide: 125K rows of 50 columns as the wide sort benchmark's (an INT64 key, 8 strings of 96
 *   characters, 41 INT64/FLOAT64/INT32 values), about one 128 MiB batch, gathered into 1 or 64
 *   pieces;
 * - narrow: 10M rows of two INT64 columns (the 100M-row sort's batches), into 1 or 64 pieces.
 *
 * The order is a random permutation, or (`gather_narrow_runs/K`) the rows stably sorted by a key
 * of K values drawn at random: K ascending runs through the rows, as a time series sorted by a
 * key, then by time, gives; up to `detail::SCATTER_MAX_RUNS` runs the plain columns are
 * scattered. Outputs come from a pool over the host resource, so that the time is the gather's
 * and not the kernel's first touch of fresh pages.
 */
#include "ops/parallel_gather.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/table.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <numeric>
#include <random>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t WIDE_ROWS      = 125'000;
constexpr std::size_t NARROW_ROWS    = 10'000'000;
constexpr std::size_t STRING_COLUMNS = 8;
constexpr std::size_t NUMBER_COLUMNS = 41;
constexpr std::size_t STRING_CHARS   = 96;

pool_memory_resource& pool() {
  static host_memory_resource host;
  static pool_memory_resource resource{host};
  return resource;
}

std::unique_ptr<column> random_fixed(type_id id, std::size_t rows, std::mt19937_64& engine) {
  auto result =
    make_fixed_width_column(data_type{id}, rows, mask_state::UNALLOCATED, default_stream(), pool());
  auto* bytes             = result->mutable_data<std::byte>();
  std::size_t const width = size_of(data_type{id});
  for (std::size_t row = 0; row < rows; ++row) {
    std::uint64_t const value = engine();
    std::memcpy(bytes + row * width, &value, width);
  }
  return result;
}

std::unique_ptr<column> random_strings(std::size_t rows, std::mt19937_64& engine) {
  auto result = make_strings_column(
    rows, rows * STRING_CHARS, mask_state::UNALLOCATED, default_stream(), pool());
  std::int64_t* offsets = result->mutable_offsets();
  char* chars           = result->mutable_chars();
  for (std::size_t row = 0; row <= rows; ++row) {
    offsets[row] = static_cast<std::int64_t>(row * STRING_CHARS);
  }
  for (std::size_t index = 0; index < rows * STRING_CHARS; ++index) {
    chars[index] = static_cast<char>('a' + engine() % 26);
  }
  return result;
}

table const& wide_table() {
  pool();  // built first, so that it outlives the table
  static std::unique_ptr<table> result;
  if (!result) {
    std::mt19937_64 engine{5};
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(random_fixed(type_id::INT64, WIDE_ROWS, engine));
    for (std::size_t index = 0; index < STRING_COLUMNS; ++index) {
      columns.push_back(random_strings(WIDE_ROWS, engine));
    }
    type_id const numbers[] = {type_id::INT64, type_id::FLOAT64, type_id::INT32};
    for (std::size_t index = 0; index < NUMBER_COLUMNS; ++index) {
      columns.push_back(random_fixed(numbers[index % 3], WIDE_ROWS, engine));
    }
    result = std::make_unique<table>(std::move(columns));
  }
  return *result;
}

table const& narrow_table() {
  pool();  // built first, so that it outlives the table
  static std::unique_ptr<table> result;
  if (!result) {
    std::mt19937_64 engine{6};
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(random_fixed(type_id::INT64, NARROW_ROWS, engine));
    columns.push_back(random_fixed(type_id::INT64, NARROW_ROWS, engine));
    result = std::make_unique<table>(std::move(columns));
  }
  return *result;
}

std::vector<std::uint64_t> random_order(std::size_t rows) {
  std::vector<std::uint64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), std::uint64_t{0});
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64{7});
  return ids;
}

/// Every row, stably sorted by a key of `keys` values drawn at random.
std::vector<std::uint64_t> order_of_runs(std::size_t rows, std::size_t keys) {
  std::mt19937_64 engine{8};
  std::vector<std::uint32_t> key(rows);
  for (auto& value : key) {
    value = static_cast<std::uint32_t>(engine() % keys);
  }
  std::vector<std::uint64_t> ids(rows);
  std::iota(ids.begin(), ids.end(), std::uint64_t{0});
  std::stable_sort(
    ids.begin(), ids.end(), [&](std::uint64_t a, std::uint64_t b) { return key[a] < key[b]; });
  return ids;
}

void run_gather(benchmark::State& state,
                table const& source,
                std::size_t pieces,
                std::vector<std::uint64_t> const& ids) {
  table_view const view  = source.view();
  std::size_t const rows = view.num_rows();
  std::vector<std::size_t> starts(pieces + 1);
  for (std::size_t piece = 0; piece <= pieces; ++piece) {
    starts[piece] = piece * rows / pieces;
  }
  memory_resources const mrs{pool()};
  for (auto _ : state) {
    auto out = detail::gather_pieces_in_parallel(std::span<table_view const>{&view, 1},
                                                 ids.data(),
                                                 starts,
                                                 detail::SOURCE_ROW_BITS,
                                                 default_stream(),
                                                 mrs);
    benchmark::DoNotOptimize(out);
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(source.allocated_bytes()));
}

void gather_wide(benchmark::State& state) {
  run_gather(state,
             wide_table(),
             static_cast<std::size_t>(state.range(0)),
             random_order(wide_table().num_rows()));
}
void gather_narrow(benchmark::State& state) {
  run_gather(state,
             narrow_table(),
             static_cast<std::size_t>(state.range(0)),
             random_order(narrow_table().num_rows()));
}
void gather_narrow_runs(benchmark::State& state) {
  run_gather(state,
             narrow_table(),
             16,
             order_of_runs(narrow_table().num_rows(), static_cast<std::size_t>(state.range(0))));
}

BENCHMARK(gather_wide)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(gather_narrow)->Arg(1)->Arg(64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(gather_narrow_runs)
  ->Arg(313)
  ->Arg(1200)
  ->Arg(2048)
  ->Arg(4096)
  ->Arg(8192)
  ->Arg(16384)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
