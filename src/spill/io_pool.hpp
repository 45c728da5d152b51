/**
 * @file io_pool.hpp
 * @brief The spill store's disk I/O threads: reads go ahead of writes, so that an operator waiting
 * for its data is not stuck behind a backlog of spills.
 */
#pragma once

#include <spillway/core/mutex.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

namespace spillway::detail {

/** @brief What a job does, which decides its place in the queue. */
enum class io_kind : std::uint8_t { READ, WRITE };

/**
 * @brief A fixed set of threads running I/O jobs; reads first, then writes, each in FIFO order.
 * @note Thread-safe. Jobs must not throw (they report their own errors).
 */
class io_pool {
 public:
  explicit io_pool(std::size_t threads);
  /** @brief Runs the remaining jobs, then joins. */
  ~io_pool();
  io_pool(io_pool const&)            = delete;
  io_pool& operator=(io_pool const&) = delete;
  io_pool(io_pool&&)                 = delete;
  io_pool& operator=(io_pool&&)      = delete;

  /** @brief Queues `job`. */
  void submit(io_kind kind, std::function<void()> job);
  /** @brief Waits until no job is queued or running. */
  void drain();

 private:
  void run();

  mutex mutex_;
  std::condition_variable work_available_;
  std::condition_variable idle_;
  std::deque<std::function<void()>> reads_ SPILLWAY_GUARDED_BY(mutex_);
  std::deque<std::function<void()>> writes_ SPILLWAY_GUARDED_BY(mutex_);
  std::size_t running_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  bool stopping_ SPILLWAY_GUARDED_BY(mutex_)       = false;
  std::vector<std::thread> threads_;
};

}  // namespace spillway::detail
