/**
 * @file worker_threads_guard.hpp
 * @brief Sizes the worker pool for a scope and restores its size after.
 */
#pragma once

#include <spillway/core/worker_pool.hpp>

#include <cstddef>

namespace spillway::testing {

/** @brief While alive, the worker pool has `threads` threads; the previous size after. */
class worker_threads_guard {
 public:
  explicit worker_threads_guard(std::size_t threads) : previous_(worker_threads()) {
    set_worker_threads(threads);
  }
  ~worker_threads_guard() { set_worker_threads(previous_); }
  worker_threads_guard(worker_threads_guard const&)            = delete;
  worker_threads_guard& operator=(worker_threads_guard const&) = delete;
  worker_threads_guard(worker_threads_guard&&)                 = delete;
  worker_threads_guard& operator=(worker_threads_guard&&)      = delete;

 private:
  std::size_t previous_;
};

/** @brief The pool sizes every kernel must give the same results with. */
inline constexpr std::size_t POOL_SIZES[] = {1, 2, 3, 8, 16};

}  // namespace spillway::testing
