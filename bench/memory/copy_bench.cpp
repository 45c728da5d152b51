/**
 * `copy_bytes` of a 64 MiB buffer from host to (emulated) device memory, as a sort's batch goes
 * onto the device and off it, with the worker pool at 1, 2, 4 and 8 threads: into a destination
 * written before (its pages resident) and into fresh pages (mapped for each copy, as a batch
 * copied into memory the process has not touched yet).
 */
#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/copy.hpp>

#include <benchmark/benchmark.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <sys/mman.h>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t BYTES = 64_MiB;

void copy_resident(benchmark::State& state) {
  set_worker_threads(static_cast<std::size_t>(state.range(0)));
  std::vector<unsigned char> source(BYTES, 7);
  std::vector<unsigned char> destination(BYTES, 0);
  for (auto _ : state) {
    copy_bytes(destination.data(),
               memory_kind::DEVICE,
               source.data(),
               memory_kind::HOST,
               BYTES,
               default_stream());
    benchmark::DoNotOptimize(destination.data());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(BYTES));
}

void copy_fresh(benchmark::State& state) {
  set_worker_threads(static_cast<std::size_t>(state.range(0)));
  std::vector<unsigned char> source(BYTES, 7);
  for (auto _ : state) {
    void* destination =
      ::mmap(nullptr, BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (destination == MAP_FAILED) {
      state.SkipWithError("mmap failed");
      return;
    }
    copy_bytes(
      destination, memory_kind::DEVICE, source.data(), memory_kind::HOST, BYTES, default_stream());
    benchmark::DoNotOptimize(destination);
    state.PauseTiming();
    ::munmap(destination, BYTES);
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(BYTES));
}

BENCHMARK(copy_resident)
  ->Arg(1)
  ->Arg(2)
  ->Arg(4)
  ->Arg(8)
  ->Unit(benchmark::kMillisecond)
  ->UseRealTime();
BENCHMARK(copy_fresh)->Arg(1)->Arg(2)->Arg(4)->Arg(8)->Unit(benchmark::kMillisecond)->UseRealTime();

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
