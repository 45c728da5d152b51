/**
 * @file lease_arbiter.hpp
 * @brief Hands each task a budget of device bytes before it allocates.
 *
 * ## Policy
 * - A request that fits is granted at once, without blocking, unless an earlier request of the
 *   same or higher priority is still waiting.
 * - A request that does not fit waits in a queue ordered by (priority, arrival): higher
 *   priority first, FIFO among equals. A later request never overtakes an earlier one of the
 *   same priority, even when it would fit: otherwise a stream of small requests could starve a
 *   large one forever. The price is some idle capacity while the head waits; lending (below)
 *   reclaims it.
 * - While a task waits (in this queue, or inside a `blocking_scope` of its task context while it
 *   waits on a queue, a receive or another task's output), its leases can be lent to the head of
 *   the queue when the head's priority is at least the task's (see "Lending and priorities").
 *   Before lending, the arbiter calls the waiting task's spill hook, which spills the task's
 *   spillable buffers and returns the bytes it physically freed; only those are lent. Bytes a
 *   waiting task cannot make spillable are never lent. When the lender stops waiting it first
 *   takes its lent bytes back (a reclaim, served ahead of every request of its priority and
 *   behind those of higher priorities).
 * - A request larger than the capacity is a request for the whole device: it logs a WARN line
 *   naming the task, the requested and the granted bytes, and is granted when the device is
 *   otherwise free of leases (the task ends up holding exactly the capacity).
 * - A waiting request wakes with `cancelled_error` when its task is cancelled, or
 *   `timeout_error` after its optional timeout; a task that lent bytes while it waited takes them
 *   back first (its timeout never lets it run on with lent bytes, nor leave while its spill hook
 *   runs). Timeouts never decide progress: lending and FIFO order do.
 *
 * ## Lending and priorities
 * Lending never makes a task wait on a task of lower priority:
 * - A waiting task's bytes are lent only to a task of the same or a higher priority, never
 *   downward. A borrower keeps what it borrowed until it returns its lease, so a lender whose
 *   wait ends first waits for the borrower; with a lower-priority borrower that would be a
 *   priority inversion (the higher-priority task stalls until the lower one finishes its work).
 *   A task of lower priority than a waiting task waits for free memory instead.
 * - The queue is ordered by priority first, reclaims included: a request of a higher priority is
 *   served (and granted at once when it fits) ahead of a lower-priority task's reclaim. The
 *   head is thus the waiter of the highest priority, so every task waiting in the queue may lend
 *   to it: a task that waits in the queue while it holds leases is never stuck behind a reclaim
 *   whose bytes it holds itself.
 * - The price: a blocking scope lends only upward. A task that waits in a blocking scope on a
 *   task of lower priority (for its output, or for a device-semaphore slot it holds) while that
 *   task needs the waiting task's memory waits until memory is freed elsewhere, or forever. Such
 *   a wait is an inversion of its own; give a producer at least the priority of the tasks that
 *   wait for it (tasks of equal priority lend to each other as before).
 * - Forcing a borrower to spill when a lender wants its bytes back is no alternative: the
 *   borrower computes on them, and its spill hook can free only what it does not use.
 *
 * The arbiter never allocates; resources never arbitrate.
 * @note Thread-safe. The arbiter must outlive every lease and task context that uses it.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/lease/memory_lease.hpp>

#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <unordered_map>

namespace spillway {

/**
 * @brief Called on another task's thread to free up to `bytes` of the waiting task's device
 * memory by spilling it. Returns the bytes physically freed (0 if nothing could be spilled).
 * @note Must not request leases or wait on the arbiter.
 */
using spill_hook = std::function<std::size_t(std::size_t bytes)>;

/** @brief Options of one lease request. */
struct lease_request_options {
  /** @brief Give up with `timeout_error` after this long; never by default. */
  std::optional<std::chrono::nanoseconds> timeout;
  /** @brief This lease is the task's base lease (reported by `base_lease()`). */
  bool is_base = false;
};

/** @brief Counters of one task or of the whole arbiter. */
struct lease_statistics {
  std::size_t granted_bytes = 0;  ///< bytes ever granted
  std::size_t grants        = 0;  ///< leases ever granted
  std::size_t waits         = 0;  ///< requests that had to wait
  std::chrono::nanoseconds wait_time{0};
  std::size_t lent_bytes     = 0;  ///< bytes lent (by this task, or by all)
  std::size_t borrowed_bytes = 0;  ///< bytes borrowed (by this task, or by all)
  std::size_t whole_device   = 0;  ///< requests turned into whole-device requests
  std::size_t cancelled      = 0;
  std::size_t timed_out      = 0;
};

class lease_arbiter {
 public:
  /**
   * @param capacity the device bytes to hand out
   * @param events where to record lease events; may be null
   */
  explicit lease_arbiter(std::size_t capacity, event_sink* events = nullptr);
  ~lease_arbiter();
  lease_arbiter(lease_arbiter const&)            = delete;
  lease_arbiter& operator=(lease_arbiter const&) = delete;
  lease_arbiter(lease_arbiter&&)                 = delete;
  lease_arbiter& operator=(lease_arbiter&&)      = delete;

  /**
   * @brief Registers `task` with its priority (higher is served first) and spill hook.
   * Requests of unregistered tasks register them with priority 0 and no hook.
   */
  void register_task(task_id task, int priority, spill_hook hook = {});
  /** @brief Replaces the spill hook of a registered task. */
  void set_spill_hook(task_id task, spill_hook hook);
  /** @brief Returns all leases of `task` and forgets it. */
  void unregister_task(task_id task);

  /**
   * @brief Grants `bytes` to `task`, waiting while they do not fit.
   * @throws spillway::cancelled_error when the task is or gets cancelled
   * @throws spillway::timeout_error after `options.timeout`
   */
  [[nodiscard]] memory_lease request_lease(task_id task,
                                           std::size_t bytes,
                                           lease_request_options const& options = {});

  /** @return a lease when `bytes` can be granted at once, else nothing (never waits) */
  [[nodiscard]] std::optional<memory_lease> try_request_lease(task_id task, std::size_t bytes);

  /** @return the bytes of every open lease of `task` */
  [[nodiscard]] std::size_t total_lease(task_id task) const;
  /** @return the bytes of the base lease of `task` (0 when it has none) */
  [[nodiscard]] std::size_t base_lease(task_id task) const;
  /** @return the bytes `task` has lent to others and not yet taken back */
  [[nodiscard]] std::size_t lent_bytes(task_id task) const;
  /**
   * @brief Closes every lease of `task`. Lease objects still alive become inert.
   */
  void return_all_leases(task_id task);

  /** @brief Wakes every waiting request of `task` with `cancelled_error`; later ones fail too. */
  void cancel(task_id task);
  /** @return whether `task` was cancelled */
  [[nodiscard]] bool is_cancelled(task_id task) const;

  /**
   * @brief Marks `task` as waiting on something other than the arbiter until `end_waiting`.
   * Nested calls count. Use `task_context::blocking_scope` rather than calling this directly.
   */
  void begin_waiting(task_id task);
  /**
   * @brief Ends a `begin_waiting`; the last one takes back lent bytes first, waiting if needed.
   * @throws spillway::cancelled_error when the task is cancelled while taking bytes back
   */
  void end_waiting(task_id task);

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /**
   * @return the base lease of a task that holds the device beside up to `holders - 1` others
   * (the device semaphore's slots) and works in batches of `batch_bytes`: room for
   * BASE_LEASE_BATCHES batches, at most an equal share of the capacity, at least one byte
   */
  [[nodiscard]] std::size_t base_lease_for(std::size_t batch_bytes,
                                           std::size_t holders) const noexcept;
  /// Batches a base lease holds (`base_lease_for`): one being read in, one sorted, their output.
  static constexpr std::size_t BASE_LEASE_BATCHES = 4;
  /** @return the bytes held by open leases, lent bytes excluded */
  [[nodiscard]] std::size_t used_bytes() const;
  /** @return the most bytes ever held at once */
  [[nodiscard]] std::size_t peak_used_bytes() const;
  /** @return requests waiting now */
  [[nodiscard]] std::size_t waiting_requests() const;
  /** @return counters of `task` (zero when unknown) */
  [[nodiscard]] lease_statistics statistics(task_id task) const;
  /** @return counters over all tasks, including unregistered ones */
  [[nodiscard]] lease_statistics total_statistics() const;

 private:
  friend class memory_lease;

  struct task_state {
    int priority        = 0;
    std::size_t leased  = 0;  ///< bytes of open leases
    std::size_t lent    = 0;  ///< part of `leased` lent to others
    std::size_t base    = 0;  ///< part of `leased` that is the base lease
    std::uint64_t epoch = 0;  ///< unique; renewed by return_all_leases: older leases are inert
    int waiting         = 0;  ///< arbiter waits plus blocking scopes now
    bool draining       = false;
    bool cancelled      = false;
    spill_hook hook;
    lease_statistics stats;
  };

  /// (higher priority first, then reclaims before requests, then arrival)
  struct queue_key {
    int negated_priority;
    int reclaim_rank;  // 0 for reclaims, 1 for requests
    std::uint64_t arrival;
    friend auto operator<=>(queue_key const&, queue_key const&) = default;
  };

  struct waiter {
    task_id task;
    std::size_t bytes;  ///< bytes this request adds to the task's leases
  };

  void release(task_id task, std::size_t bytes, std::uint64_t epoch, bool is_base) noexcept;
  task_state& state_of(task_id task) SPILLWAY_REQUIRES(mutex_);
  /// Returns every lease of `task` at once (return_all_leases, unregister_task).
  void drop_all_leases(task_id task, task_state& state) SPILLWAY_REQUIRES(mutex_);
  memory_lease grant(task_id task,
                     task_state& state,
                     std::size_t bytes,
                     bool is_base,
                     std::chrono::nanoseconds waited) SPILLWAY_REQUIRES(mutex_);
  bool can_bypass_queue(int priority) const SPILLWAY_REQUIRES(mutex_);
  /// Lends spilled bytes of waiting tasks other than `borrower`, of its priority or lower, to
  /// cover `shortfall`. Drops the lock while spill hooks run. Returns true if anything was lent.
  bool lend_to(task_id borrower, std::size_t shortfall, scoped_lock& lock)
    SPILLWAY_REQUIRES(mutex_);
  void wait_in_queue(task_id task,
                     queue_key key,
                     std::size_t need,
                     std::optional<std::chrono::steady_clock::time_point> deadline,
                     std::size_t requested,
                     scoped_lock& lock) SPILLWAY_REQUIRES(mutex_);
  /// Takes `task`'s lent bytes back (a reclaim, ahead of every request), waiting if needed; a
  /// cancelled task gives up instead. Called when the task's waiting ends.
  void reclaim_lent(task_id task, scoped_lock& lock) SPILLWAY_REQUIRES(mutex_);
  void notify() SPILLWAY_REQUIRES(mutex_);

  std::size_t const capacity_;
  event_sink* const events_;
  mutable mutex mutex_;
  std::condition_variable changed_;
  std::unordered_map<task_id, task_state> tasks_ SPILLWAY_GUARDED_BY(mutex_);
  std::map<queue_key, waiter> queue_ SPILLWAY_GUARDED_BY(mutex_);
  std::uint64_t next_arrival_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::uint64_t next_epoch_ SPILLWAY_GUARDED_BY(mutex_)   = 1;  ///< unique per task life
  std::size_t used_ SPILLWAY_GUARDED_BY(mutex_)           = 0;
  std::size_t peak_used_ SPILLWAY_GUARDED_BY(mutex_)      = 0;
  std::size_t sleepers_ SPILLWAY_GUARDED_BY(mutex_)       = 0;
  lease_statistics totals_ SPILLWAY_GUARDED_BY(mutex_);
};

}  // namespace spillway
