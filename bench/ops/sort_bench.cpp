/**
 * sorted_order throughput in rows per second: 10M INT64 keys (random, sorted, all equal), two
 * INT64 keys (10M rows, the first with 1000 distinct values), and 1M strings of 10 to 30
 * random lowercase letters; std::sort of the same INT64 values (a copy, sorted in place, one
 * thread) in the same run as the baseline. Inputs are built once and kept; every iteration
 * allocates its order and scratch from the plain host resource. Times are wall-clock
 * (`UseRealTime`), so rows/s count the second thread's work once.
 *
 * merge_order of the 10M random INT64 keys cut into 16, 128 or 1024 sorted runs: the merge
 * rounds of the out-of-core sort (a run per sorted batch, a few chunks of each loaded); also on
 * pools of 1, 2, 4 and 8 threads.
 *
 * upper_bound of the 10M rows of the two INT64 keys in K splitters (1, 63 or 1023 rows of them,
 * evenly spaced in their order): a range partitioning's partition ids, as the distributed sort's
 * shuffle makes them for K + 1 ranks.
 */
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/table.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t INT64_ROWS  = 10'000'000;
constexpr std::size_t STRING_ROWS = 1'000'000;

host_memory_resource& host() {
  static host_memory_resource resource;
  return resource;
}

enum class shape : std::uint8_t { RANDOM, SORTED, ALL_EQUAL, THOUSAND_DISTINCT, SKEWED };

std::vector<std::int64_t> const& int64_values(shape kind) {
  static std::map<shape, std::vector<std::int64_t>> cache;
  auto& values = cache[kind];
  if (values.empty()) {
    values.resize(INT64_ROWS);
    std::mt19937_64 engine{static_cast<std::uint64_t>(kind) + 1};
    for (std::size_t row = 0; row < INT64_ROWS; ++row) {
      switch (kind) {
        case shape::RANDOM:
          values[row] = static_cast<std::int64_t>(engine());
          break;
        case shape::SORTED:
          values[row] = static_cast<std::int64_t>(row);
          break;
        case shape::ALL_EQUAL:
          values[row] = 7;
          break;
        case shape::THOUSAND_DISTINCT:
          values[row] = static_cast<std::int64_t>(engine() % 1000);
          break;
        case shape::SKEWED:  // 90% of the rows on key 0, the rest random (as external_sort_bench)
          values[row] = row % 10 == 0 ? static_cast<std::int64_t>(engine() >> 1) : 0;
          break;
      }
    }
  }
  return values;
}

std::unique_ptr<column> const& int64_column(shape kind) {
  static std::map<shape, std::unique_ptr<column>> cache;
  auto& result = cache[kind];
  if (!result) {
    auto const& values = int64_values(kind);
    result             = make_fixed_width_column(
      type_id::INT64, values.size(), mask_state::UNALLOCATED, default_stream(), host());
    std::memcpy(result->mutable_data<std::int64_t>(), values.data(), values.size() * 8);
  }
  return result;
}

std::unique_ptr<column> const& string_column() {
  static std::unique_ptr<column> result;
  if (!result) {
    std::mt19937_64 engine{11};
    std::vector<std::string> values(STRING_ROWS);
    std::size_t chars = 0;
    for (auto& value : values) {
      value.resize(10 + engine() % 21);
      for (auto& letter : value) {
        letter = static_cast<char>('a' + engine() % 26);
      }
      chars += value.size();
    }
    result =
      make_strings_column(STRING_ROWS, chars, mask_state::UNALLOCATED, default_stream(), host());
    std::int64_t* offsets = result->mutable_offsets();
    offsets[0]            = 0;
    for (std::size_t row = 0; row < STRING_ROWS; ++row) {
      std::memcpy(result->mutable_chars() + offsets[row], values[row].data(), values[row].size());
      offsets[row + 1] = offsets[row] + static_cast<std::int64_t>(values[row].size());
    }
  }
  return result;
}

void run_sorted_order(benchmark::State& state, table_view const& keys) {
  for (auto _ : state) {
    auto order =
      sorted_order(keys, {}, sort_stability::UNSTABLE, default_stream(), memory_resources{host()});
    benchmark::DoNotOptimize(order->mutable_data<std::uint64_t>());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(keys.num_rows()));
}

void sorted_order_int64(benchmark::State& state, shape kind) {
  run_sorted_order(state, table_view{int64_column(kind)->view()});
}

void std_sort_int64(benchmark::State& state, shape kind) {
  auto const& values = int64_values(kind);
  std::vector<std::int64_t> copy(values.size());
  for (auto _ : state) {
    state.PauseTiming();
    copy = values;
    state.ResumeTiming();
    std::sort(copy.begin(), copy.end());
    benchmark::DoNotOptimize(copy.data());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(values.size()));
}

void sorted_order_two_int64(benchmark::State& state) {
  run_sorted_order(state,
                   table_view{int64_column(shape::THOUSAND_DISTINCT)->view(),
                              int64_column(shape::RANDOM)->view()});
}

void upper_bound_splitters(benchmark::State& state) {
  table_view const keys{int64_column(shape::THOUSAND_DISTINCT)->view(),
                        int64_column(shape::RANDOM)->view()};
  memory_resources const mrs{host()};
  auto const order = sorted_order(keys, {}, sort_stability::STABLE, default_stream(), mrs);
  auto const count = static_cast<std::size_t>(state.range(0));
  auto picks       = make_fixed_width_column(
    type_id::UINT64, count, mask_state::UNALLOCATED, default_stream(), host());
  for (std::size_t pick = 0; pick < count; ++pick) {
    picks->mutable_data<std::uint64_t>()[pick] =
      order->view().data<std::uint64_t>()[(pick + 1) * keys.num_rows() / (count + 1)];
  }
  auto const splitters =
    gather(keys, picks->view(), out_of_bounds_policy::FAIL, default_stream(), mrs);
  for (auto _ : state) {
    auto ids = upper_bound(splitters->view(), keys, {}, default_stream(), mrs);
    benchmark::DoNotOptimize(ids->mutable_data<std::uint64_t>());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(keys.num_rows()));
}

void sorted_order_strings(benchmark::State& state) {
  run_sorted_order(state, table_view{string_column()->view()});
}

void merge_order_int64(benchmark::State& state) {
  auto const runs = static_cast<std::size_t>(state.range(0));
  auto values     = int64_values(shape::RANDOM);
  std::vector<std::unique_ptr<column>> columns;
  std::vector<table_view> inputs;
  for (std::size_t run = 0; run < runs; ++run) {
    std::size_t const begin = run * values.size() / runs;
    std::size_t const end   = (run + 1) * values.size() / runs;
    std::sort(values.begin() + static_cast<std::ptrdiff_t>(begin),
              values.begin() + static_cast<std::ptrdiff_t>(end));
    columns.push_back(make_fixed_width_column(
      type_id::INT64, end - begin, mask_state::UNALLOCATED, default_stream(), host()));
    std::memcpy(columns.back()->mutable_data<std::int64_t>(),
                values.data() + begin,
                (end - begin) * sizeof(std::int64_t));
    inputs.push_back(table_view{columns.back()->view()});
  }
  for (auto _ : state) {
    auto order = detail::merge_order(inputs, {0}, {}, default_stream(), memory_resources{host()});
    benchmark::DoNotOptimize(order->mutable_data<std::uint64_t>());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(values.size()));
}

/// merge_order_int64 on a worker pool of `state.range(1)` threads (restored after): more than two
/// cut the merge into one part per thread.
void merge_order_int64_on_pool(benchmark::State& state) {
  std::size_t const before = worker_threads();
  set_worker_threads(static_cast<std::size_t>(state.range(1)));
  merge_order_int64(state);
  set_worker_threads(before);
}

/// The merge of the 10-30 letter strings cut into `runs` sorted runs (the output phase of an
/// out-of-core sort of string keys).
void merge_order_strings(benchmark::State& state) {
  auto const runs        = static_cast<std::size_t>(state.range(0));
  table_view const whole = table_view{string_column()->view()};
  std::size_t const rows = whole.num_rows();
  std::vector<std::unique_ptr<table>> sorted_runs;
  std::vector<table_view> inputs;
  for (std::size_t run = 0; run < runs; ++run) {
    table_view const part = slice(whole, run * rows / runs, (run + 1) * rows / runs);
    sorted_runs.push_back(
      sort(part, part, {}, sort_stability::STABLE, default_stream(), memory_resources{host()}));
    inputs.push_back(sorted_runs.back()->view());
  }
  for (auto _ : state) {
    auto order = detail::merge_order(inputs, {0}, {}, default_stream(), memory_resources{host()});
    benchmark::DoNotOptimize(order->mutable_data<std::uint64_t>());
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(rows));
}

BENCHMARK_CAPTURE(sorted_order_int64, random, shape::RANDOM)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(std_sort_int64, random, shape::RANDOM)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(sorted_order_int64, sorted, shape::SORTED)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(std_sort_int64, sorted, shape::SORTED)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(sorted_order_int64, all_equal, shape::ALL_EQUAL)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(std_sort_int64, all_equal, shape::ALL_EQUAL)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK_CAPTURE(sorted_order_int64, skewed, shape::SKEWED)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK(sorted_order_two_int64)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(sorted_order_strings)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(upper_bound_splitters)
  ->Arg(1)
  ->Arg(3)
  ->Arg(7)
  ->Arg(63)
  ->Arg(1023)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK(merge_order_strings)->Arg(16)->Arg(128)->Unit(benchmark::kMillisecond)->UseRealTime();
BENCHMARK(merge_order_int64)
  ->Arg(16)
  ->Arg(128)
  ->Arg(1024)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK(merge_order_int64_on_pool)
  ->ArgsProduct({{16, 128}, {1, 2, 4, 8}})
  ->ArgNames({"runs", "threads"})
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
