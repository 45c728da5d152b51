/**
 * @file task_context.hpp
 * @brief A task's identity and its relationship with the arbiter: leases, spill hook, waits.
 */
#pragma once

#include <spillway/core/ids.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>

#include <cstddef>
#include <functional>
#include <mutex>
#include <vector>

namespace spillway {

class device_semaphore;

/**
 * @brief One task: registered with an arbiter for its lifetime.
 *
 * At destruction the task releases the device semaphore if it still holds it and returns all
 * its leases, on every exit path. A thread that works for the task binds itself with
 * `thread_binding` so that lower layers (the OOM retry path) know which task allocates.
 * @note The context itself is thread-safe; its leases are not shared between threads.
 */
class task_context {
 public:
  /**
   * @param arbiter the device's arbiter; must outlive the context
   * @param id the task's id, unique among live tasks of the arbiter
   * @param priority higher is served first; equal priorities are FIFO
   */
  task_context(lease_arbiter& arbiter, task_id id, int priority = 0);
  ~task_context();
  task_context(task_context const&)            = delete;
  task_context& operator=(task_context const&) = delete;
  task_context(task_context&&)                 = delete;
  task_context& operator=(task_context&&)      = delete;

  [[nodiscard]] task_id id() const noexcept { return id_; }
  [[nodiscard]] int priority() const noexcept { return priority_; }
  [[nodiscard]] lease_arbiter& arbiter() const noexcept { return arbiter_; }

  /** @see lease_arbiter::request_lease */
  [[nodiscard]] memory_lease request_lease(std::size_t bytes,
                                           lease_request_options const& options = {});
  /** @return the bytes of all open leases of this task */
  [[nodiscard]] std::size_t total_lease() const { return arbiter_.total_lease(id_); }
  /** @return the bytes of this task's base lease */
  [[nodiscard]] std::size_t base_lease() const { return arbiter_.base_lease(id_); }

  /** @brief Sets what the arbiter calls to spill this task's buffers while it waits. */
  void set_spill_hook(spill_hook hook);

  /** @brief Kills the task: its waits end with `cancelled_error`. */
  void cancel();

  /**
   * @brief While alive, the task counts as waiting (on a queue, a receive, another task's
   * output), so its spillable leases can be lent to tasks of its priority or higher at the head
   * of the queue (never to lower ones: see lease_arbiter.hpp). On exit it takes lent bytes back,
   * waiting for them if needed.
   *
   * Without it, a request at the head of the queue can wait forever on a task that itself waits
   * on someone behind it.
   */
  class blocking_scope {
   public:
    explicit blocking_scope(task_context& task);
    /** @note Waits for lent bytes to come back; a cancelled task stops waiting. */
    ~blocking_scope() noexcept(false);
    blocking_scope(blocking_scope const&)            = delete;
    blocking_scope& operator=(blocking_scope const&) = delete;
    blocking_scope(blocking_scope&&)                 = delete;
    blocking_scope& operator=(blocking_scope&&)      = delete;

   private:
    task_context& task_;
    int uncaught_;
  };

  /** @return a scope during which this task counts as waiting */
  [[nodiscard]] blocking_scope blocked() { return blocking_scope{*this}; }

  /**
   * @brief Observers of waits outside the arbiter (the OOM coordinator counts such a task as
   * blocked). Called with true on entering the outermost scope, false on leaving it.
   */
  using blocking_observer = std::function<void(bool waiting)>;
  /** @return an id for `remove_blocking_observer` */
  std::size_t add_blocking_observer(blocking_observer observer);
  void remove_blocking_observer(std::size_t id);

  /** @brief Makes `task` the current task of the calling thread while alive (nests). */
  class thread_binding {
   public:
    explicit thread_binding(task_context& task) noexcept;
    ~thread_binding();
    thread_binding(thread_binding const&)            = delete;
    thread_binding& operator=(thread_binding const&) = delete;
    thread_binding(thread_binding&&)                 = delete;
    thread_binding& operator=(thread_binding&&)      = delete;

   private:
    task_context* previous_;
  };

  /**
   * @brief Makes the calling thread belong to no task while alive (nests): what it allocates
   * meanwhile is the caller's own work, such as a spill store moving a buffer, whose failure
   * must fail that work rather than block the task in the OOM protocol (the task may be what
   * another task waits on).
   */
  class detached_scope {
   public:
    detached_scope() noexcept;
    ~detached_scope();
    detached_scope(detached_scope const&)            = delete;
    detached_scope& operator=(detached_scope const&) = delete;
    detached_scope(detached_scope&&)                 = delete;
    detached_scope& operator=(detached_scope&&)      = delete;

   private:
    task_context* previous_;
  };

  /** @return the task bound to the calling thread, or null */
  [[nodiscard]] static task_context* current() noexcept;

 private:
  friend class device_semaphore;
  void notify_blocking(bool waiting);

  lease_arbiter& arbiter_;
  task_id const id_;
  int const priority_;
  std::mutex observers_mutex_;
  std::vector<std::pair<std::size_t, blocking_observer>> observers_;
  std::size_t next_observer_   = 0;
  int blocking_depth_          = 0;
  device_semaphore* semaphore_ = nullptr;  ///< set while the task holds the semaphore
};

}  // namespace spillway
