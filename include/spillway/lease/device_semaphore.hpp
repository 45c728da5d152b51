/**
 * @file device_semaphore.hpp
 * @brief Limits how many tasks share the device at once and grants each its base lease.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <unordered_map>

namespace spillway {

/**
 * @brief At most `max_tasks` tasks hold the device; acquisition is FIFO.
 *
 * Acquiring grants the task a base lease of `base_lease_bytes` from the arbiter; the last
 * release returns it. `lease_arbiter::base_lease(task)` answers what a task's base lease is.
 * Re-entrant per task: nested acquires count, and only the outermost release gives the device
 * up. A task context releases the semaphore when it is destroyed, on every exit path. While a
 * task waits for the semaphore it counts as waiting, so its spillable leases can be lent (to
 * tasks of its priority or higher).
 * @note Thread-safe.
 */
class device_semaphore {
 public:
  device_semaphore(lease_arbiter& arbiter,
                   std::size_t max_tasks,
                   std::size_t base_lease_bytes,
                   event_sink* events = nullptr);
  ~device_semaphore();
  device_semaphore(device_semaphore const&)            = delete;
  device_semaphore& operator=(device_semaphore const&) = delete;
  device_semaphore(device_semaphore&&)                 = delete;
  device_semaphore& operator=(device_semaphore&&)      = delete;

  /**
   * @brief Waits for a slot (FIFO), then for the base lease.
   * @throws spillway::cancelled_error when the task is cancelled while waiting
   */
  void acquire(task_context& task);
  /** @brief Undoes one `acquire`; the outermost returns the slot and the base lease. */
  void release(task_context& task);

  /** @brief Holds the semaphore for a scope. */
  class guard {
   public:
    guard(device_semaphore& semaphore, task_context& task) : semaphore_(semaphore), task_(task) {
      semaphore_.acquire(task_);
    }
    ~guard() { semaphore_.release(task_); }
    guard(guard const&)            = delete;
    guard& operator=(guard const&) = delete;
    guard(guard&&)                 = delete;
    guard& operator=(guard&&)      = delete;

   private:
    device_semaphore& semaphore_;
    task_context& task_;
  };

  [[nodiscard]] std::size_t max_tasks() const noexcept { return max_tasks_; }
  [[nodiscard]] std::size_t base_lease_bytes() const noexcept { return base_lease_bytes_; }
  /** @return tasks holding the device now */
  [[nodiscard]] std::size_t holders() const;
  /** @return tasks waiting for a slot now */
  [[nodiscard]] std::size_t waiters() const;
  /** @return how many times `task` holds the semaphore (0 when it does not) */
  [[nodiscard]] std::size_t hold_count(task_id task) const;

 private:
  /// Undoes the slot taken by an `acquire` that fails before it completes.
  void give_up_slot(task_id task);

  struct holder {
    std::size_t count = 0;
    memory_lease base;
  };

  lease_arbiter& arbiter_;
  std::size_t const max_tasks_;
  std::size_t const base_lease_bytes_;
  event_sink* const events_;
  mutable mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::uint64_t> queue_ SPILLWAY_GUARDED_BY(mutex_);  ///< tickets in arrival order
  std::uint64_t next_ticket_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::unordered_map<task_id, holder> holders_ SPILLWAY_GUARDED_BY(mutex_);
  std::size_t slots_taken_ SPILLWAY_GUARDED_BY(mutex_) = 0;
};

}  // namespace spillway
