/**
 * Lease arbiter and device semaphore costs: the uncontended request + close path, throughput
 * with 2, 8 and 32 threads (ample capacity: lock contention only; tight capacity: real waits in
 * the FIFO queue), and semaphore acquire/release.
 */
#include <spillway/core/units.hpp>
#include <spillway/lease/device_semaphore.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>

#include <benchmark/benchmark.h>

#include <memory>

namespace spillway {
namespace {

constexpr std::size_t LEASE_BYTES = 1_MiB;

void uncontended_request_close(benchmark::State& state) {
  lease_arbiter arbiter{1_GiB};
  task_context task{arbiter, task_id{1}};
  for (auto _ : state) {
    memory_lease lease = arbiter.request_lease(task.id(), LEASE_BYTES);
    benchmark::DoNotOptimize(lease.bytes());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(uncontended_request_close);

/// One arbiter shared by every thread of a run; capacity per thread as given.
template <std::size_t CapacityTenthsPerThread>
void threads_request_close(benchmark::State& state) {
  static std::unique_ptr<lease_arbiter> arbiter;
  if (state.thread_index() == 0) {
    arbiter = std::make_unique<lease_arbiter>(static_cast<std::size_t>(state.threads()) *
                                              LEASE_BYTES * CapacityTenthsPerThread / 10);
  }
  // Google Benchmark starts the timed loop of all threads together after setup.
  for (auto _ : state) {
    memory_lease lease = arbiter->request_lease(
      task_id{static_cast<std::uint64_t>(state.thread_index()) + 1}, LEASE_BYTES);
    benchmark::DoNotOptimize(lease.bytes());
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(threads_request_close<40>)
  ->Name("ample_capacity")
  ->Threads(2)
  ->Threads(8)
  ->Threads(32)
  ->UseRealTime();
BENCHMARK(threads_request_close<5>)
  ->Name("half_capacity_waits")
  ->Threads(2)
  ->Threads(8)
  ->Threads(32)
  ->UseRealTime();

void semaphore_acquire_release(benchmark::State& state) {
  static std::unique_ptr<lease_arbiter> arbiter;
  static std::unique_ptr<device_semaphore> semaphore;
  if (state.thread_index() == 0) {
    arbiter   = std::make_unique<lease_arbiter>(1_GiB);
    semaphore = std::make_unique<device_semaphore>(*arbiter, 2, LEASE_BYTES);
  }
  task_context task{*arbiter, task_id{static_cast<std::uint64_t>(state.thread_index()) + 1}};
  for (auto _ : state) {
    semaphore->acquire(task);
    semaphore->release(task);
  }
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(semaphore_acquire_release)->Threads(1)->Threads(2)->Threads(8)->UseRealTime();

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
