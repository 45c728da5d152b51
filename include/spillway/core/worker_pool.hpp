/**
 * @file worker_pool.hpp
 * @brief The process-wide pool of worker threads that every parallel CPU kernel runs on: a
 * fixed set of threads, sized once to the cores this process may use, and `parallel_for` to cut
 * a piece of work into parts across them.
 */
#pragma once

#include <cstddef>
#include <optional>
#include <string_view>

namespace spillway {

/**
 * @brief The cores this process may use: the CPUs of its affinity mask, capped by the CPU quota
 * of its cgroup (v2 `cpu.max`, or v1 `cpu.cfs_quota_us` / `cpu.cfs_period_us`, rounded up) of
 * it and of every cgroup above it. At least 1.
 */
[[nodiscard]] std::size_t usable_cores();

/**
 * @brief Sets the threads of the worker pool, the calling thread of a `parallel_for` included:
 * `threads - 1` workers are started (1: every part runs on the caller). 0 sets the default,
 * `usable_cores()`. Call it at start-up, before any parallel work: it must not be called while
 * a `parallel_for` runs (on any thread), as the old workers are stopped and joined.
 * @throws logic_error when `threads` exceeds MAX_WORKER_THREADS
 */
void set_worker_threads(std::size_t threads);

/** @brief The most threads `set_worker_threads` accepts. */
inline constexpr std::size_t MAX_WORKER_THREADS = 1024;

/** @return the threads of the worker pool (`usable_cores()` unless set), at least 1 */
[[nodiscard]] std::size_t worker_threads();

/**
 * @brief How many parts a kernel over `items` items should cut its work into: one per pool
 * thread, but no part smaller than `min_items_per_part` (so small inputs stay on the caller).
 * @return a count from 1 to `worker_threads()`
 */
[[nodiscard]] std::size_t parallel_parts(std::size_t items, std::size_t min_items_per_part);

namespace detail {

/// Runs `call(work, part)` for every part of [0, parts) on the pool (see `parallel_for`).
void run_parts(std::size_t parts, void (*call)(void const*, std::size_t), void const* work);

/**
 * @brief The cores a cgroup v2 `cpu.max` text ("max 100000", "150000 100000") allows, rounded
 * up; nullopt when it sets no limit or cannot be read.
 */
[[nodiscard]] std::optional<std::size_t> cgroup_v2_cores(std::string_view cpu_max);

/**
 * @brief The cores a cgroup v1 quota and period (`cpu.cfs_quota_us`, `cpu.cfs_period_us`
 * texts) allow, rounded up; nullopt when the quota is -1 (none) or either cannot be read.
 */
[[nodiscard]] std::optional<std::size_t> cgroup_v1_cores(std::string_view quota,
                                                         std::string_view period);

}  // namespace detail

/**
 * @brief Runs `work(part)` for every part of [0, parts) on the worker pool and returns when all
 * have finished. The calling thread runs part 0 (so work that must happen on the caller's task
 * belongs before or after) and then every part no worker has taken yet, so a `parallel_for`
 * from inside a part (nested) never waits for a worker that is not already running one of its
 * parts. Parts may outnumber the threads. With one pool thread the parts run in order on the
 * caller. When parts throw, every part still runs and the exception of the lowest failing part
 * is rethrown.
 * @tparam Work callable as `work(std::size_t part)`, safe to call from several threads at once
 */
template <typename Work>
void parallel_for(std::size_t parts, Work const& work) {
  detail::run_parts(
    parts,
    [](void const* context, std::size_t part) { (*static_cast<Work const*>(context))(part); },
    static_cast<void const*>(&work));
}

}  // namespace spillway
