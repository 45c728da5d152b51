/**
 * Allocate/free throughput of the pool against the plain host resource, 1 and 2 threads, sizes
 * from 64 B to 64 MiB. Each iteration allocates a batch of blocks, touches the first byte of
 * each (so that lazily mapped memory is not free), and frees them in allocation order; the
 * batch holds at most 64 MiB so the large sizes stay within memory.
 */
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/logging_resource_adaptor.hpp>
#include <spillway/memory/pool_memory_resource.hpp>

#include <benchmark/benchmark.h>

#include <algorithm>
#include <array>
#include <cstddef>
#include <random>
#include <sstream>
#include <string>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t MAX_BATCH = 64;

host_memory_resource& host() {
  static host_memory_resource resource;
  return resource;
}

pool_memory_resource& pool() {
  // One pool shared by every thread of a run, as an operator's resource is.
  static pool_memory_resource resource{host(), 256_MiB};
  return resource;
}

template <typename Resource>
void alloc_free(benchmark::State& state, Resource& (*resource)()) {
  auto const bytes        = static_cast<std::size_t>(state.range(0));
  std::size_t const batch = std::clamp<std::size_t>(64_MiB / bytes / 2, 1, MAX_BATCH);
  std::array<void*, MAX_BATCH> blocks{};
  memory_resource& mr = resource();
  for (auto _ : state) {
    for (std::size_t index = 0; index < batch; ++index) {
      blocks[index]                               = mr.allocate(bytes);
      *static_cast<volatile char*>(blocks[index]) = 1;
    }
    for (std::size_t index = 0; index < batch; ++index) {
      mr.deallocate(blocks[index], bytes);
    }
  }
  state.SetItemsProcessed(state.iterations() * static_cast<std::int64_t>(batch));
  state.counters["ns_per_alloc_free"] =
    benchmark::Counter(static_cast<double>(state.iterations() * static_cast<std::int64_t>(batch)),
                       benchmark::Counter::kIsRate | benchmark::Counter::kInvert);
}

void sizes(benchmark::internal::Benchmark* bench) {
  for (std::int64_t bytes = 64; bytes <= static_cast<std::int64_t>(64_MiB); bytes *= 8) {
    bench->Arg(bytes);
  }
  bench->Arg(static_cast<std::int64_t>(64_MiB));
  bench->Threads(1)->Threads(2)->UseRealTime();
}

BENCHMARK_CAPTURE(alloc_free, host, &host)->Apply(sizes);
BENCHMARK_CAPTURE(alloc_free, pool, &pool)->Apply(sizes);

/// A recorded allocation log: 20 000 events of a mixed workload (mostly small blocks, some large,
/// lifetimes overlapping), written by `logging_resource_adaptor` and replayed below.
std::string const& recorded_log() {
  static std::string const log = [] {
    std::ostringstream out;
    logging_resource_adaptor logger{host(), out};
    std::mt19937_64 engine{7};
    std::vector<std::pair<void*, std::size_t>> live;
    for (int step = 0; step < 10000; ++step) {
      if (live.empty() || engine() % 3 != 0) {
        std::size_t const bytes =
          engine() % 10 == 0 ? 64_KiB << (engine() % 6) : 16 << (engine() % 8);
        live.emplace_back(logger.allocate(bytes), bytes);
      } else {
        std::size_t const victim = engine() % live.size();
        logger.deallocate(live[victim].first, live[victim].second);
        live[victim] = live.back();
        live.pop_back();
      }
    }
    for (auto const& [pointer, bytes] : live) {
      logger.deallocate(pointer, bytes);
    }
    logger.flush();
    return out.str();
  }();
  return log;
}

template <typename Resource>
void replay(benchmark::State& state, Resource& (*resource)()) {
  std::string const& log = recorded_log();
  std::size_t events     = 0;
  for (auto _ : state) {
    std::istringstream in{log};
    auto const result = replay_allocation_log(in, resource());
    events += result.allocations + result.frees;
  }
  state.SetItemsProcessed(static_cast<std::int64_t>(events));
}

BENCHMARK_CAPTURE(replay, host, &host)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(replay, pool, &pool)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
