/**
 * @file oom_coordinator.hpp
 * @brief The state machine that turns an allocation failure into spill, block, retry or split,
 * and guarantees progress without timeouts.
 *
 * ## Thread (task) states
 * ```
 *  RUNNING ──alloc fails, spill freed bytes──────────────────────────────▶ RUNNING (retry alloc)
 *  RUNNING ──alloc fails, nothing spilled, but memory was freed since the
 *              attempt began ──────────────────────────────────────────────▶ RUNNING (retry alloc)
 *  RUNNING ──alloc fails, nothing spilled, task holds no unspillable bytes──▶ BLOCKED
 *  RUNNING ──alloc fails, nothing spilled, task holds unspillable bytes:
 *              this is the highest priority and it already rolled back
 *              with no success anywhere since ───────────────────────────▶ SPLIT_THROW
 *              otherwise ──────────────────────────────────────────────────▶ BUFN_THROW
 *  BLOCKED ──another task frees memory, or finishes a roll back (its input
 *              may now spill) ─────────────────────────────────────────────▶ RUNNING (retry alloc)
 *  BLOCKED ──deadlock, lowest-priority BLOCKED task────────────────────────▶ BUFN_THROW
 *  BLOCKED ──deadlock, chosen to split (see below)─────────────────────────▶ SPLIT_THROW
 *  BUFN_THROW ──allocation throws retry_oom; with_retry rolls back─────────▶ BUFN_WAIT
 *  BUFN_WAIT ──memory was freed since the failure, or a later free and it
 *              is the highest-priority BUFN_WAIT task with none BLOCKED ───▶ RETRYING
 *  BUFN_WAIT ──deadlock with no BLOCKED task, highest-priority BUFN_WAIT:
 *              its first roll back since a success anywhere ───────────────▶ RETRYING
 *              otherwise ──────────────────────────────────────────────────▶ SPLIT_THROW
 *  SPLIT_THROW ──split_and_retry_oom; with_retry splits the input ─────────▶ RUNNING
 *  RETRYING ──the attempt succeeds────────────────────────────────────────▶ RUNNING
 * ```
 * A deadlock is the moment when no registered task is RUNNING or RETRYING outside a blocking
 * scope: every task is BLOCKED, BUFN_WAIT, or waiting on something else. Then, if any task is
 * BLOCKED, the lowest-priority BLOCKED task rolls back (it holds nothing unspillable, but rolling
 * back lets its input spill; BLOCKED tasks then retry their allocations first) — unless it already
 * rolled back with no success anywhere since and is the highest priority: another roll back
 * cannot help it, so it splits (BLOCKED -> SPLIT_THROW). Otherwise every task has rolled back and
 * waits. The highest-priority BUFN_WAIT task runs its input again if this was its first roll back
 * since a success anywhere: its roll back freed what the attempt held and let its input spill,
 * and no allocation has tried since (a lone task would otherwise split, or fail for good on a
 * step that cannot split, after one passing failure). If it fails again with no success
 * anywhere, it splits (as a BLOCKED task does above); a task that had its retry splits its input
 * at once. Every step either frees memory, lets a task run, or shrinks an input; an input of one
 * row that still fails is a final error. No timeout decides anything.
 *
 * A task whose memory is not all spillable never blocks (it would hold memory hostage): it
 * rolls back at once. A BLOCKED task is woken (back to RUNNING or RETRYING) the moment memory is
 * freed, before its thread runs, so a deadlock found meanwhile never picks it.
 * @note Thread-safe. Tasks register with `registration` for their lifetime.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/lease/task_context.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <unordered_map>

namespace spillway {

/** @brief Where a task stands in the OOM protocol. */
enum class oom_state : std::uint8_t {
  RUNNING,      ///< computing (or allocating)
  BLOCKED,      ///< allocation failed, nothing to spill; waits for another task to free memory
  BUFN_THROW,   ///< chosen to roll back: its allocation is about to throw retry_oom
  BUFN_WAIT,    ///< rolled back; waits until memory is freed or it is chosen to split
  RETRYING,     ///< released from BUFN_WAIT, running its input again
  SPLIT_THROW,  ///< chosen to split: its allocation or wait ends in split_and_retry_oom
};

/** @return "running", "blocked", ... */
char const* to_string(oom_state state) noexcept;

/** @brief How a rolled-back task continues. */
enum class resume_action : std::uint8_t { RETRY, SPLIT };

/** @brief Counters of the protocol. */
struct oom_statistics {
  std::size_t failures      = 0;  ///< allocation failures seen
  std::size_t spills        = 0;  ///< failures resolved by spilling
  std::size_t spilled_bytes = 0;
  std::size_t blocks        = 0;  ///< times a task blocked
  std::size_t retries       = 0;  ///< retry_oom thrown
  std::size_t splits        = 0;  ///< split_and_retry_oom thrown
  std::size_t deadlocks     = 0;  ///< deadlocks broken
};

class oom_coordinator {
 public:
  /** @brief Frees up to `bytes` of device memory by spilling; returns the bytes freed. */
  using spill_function = std::function<std::size_t(std::size_t bytes)>;

  explicit oom_coordinator(event_sink* events = nullptr);
  ~oom_coordinator();
  oom_coordinator(oom_coordinator const&)            = delete;
  oom_coordinator& operator=(oom_coordinator const&) = delete;
  oom_coordinator(oom_coordinator&&)                 = delete;
  oom_coordinator& operator=(oom_coordinator&&)      = delete;

  /** @brief Sets what is called first on every allocation failure (the spill store). */
  void set_spill_function(spill_function spill);

  /** @brief Takes part in the protocol for the life of the object. */
  class registration {
   public:
    registration(oom_coordinator& coordinator, task_context& task);
    ~registration();
    registration(registration const&)            = delete;
    registration& operator=(registration const&) = delete;
    registration(registration&&)                 = delete;
    registration& operator=(registration&&)      = delete;

   private:
    oom_coordinator& coordinator_;
    task_context& task_;
    std::size_t observer_;
  };

  /**
   * @brief The failure path of one allocation of `bytes` (the `attempt`-th) by `task`.
   * @param task the allocating task, or null outside tasks (then only spilling is tried)
   * @param unspillable_bytes device bytes the task holds that cannot be spilled now
   * @param frees_before_attempt `free_count()` read before the failed attempt; when memory was
   * freed since, the allocation is retried at once (that free's wake-up has passed)
   * @return true to retry the allocation, false to let the `out_of_memory` stand
   * @throws retry_oom or split_and_retry_oom as the protocol decides
   */
  bool on_allocation_failure(task_context const* task,
                             std::size_t bytes,
                             std::size_t attempt,
                             std::size_t unspillable_bytes,
                             std::size_t available_bytes,
                             std::size_t capacity_bytes,
                             std::optional<std::uint64_t> frees_before_attempt = std::nullopt);

  /**
   * @brief Memory was freed by `freer` (null outside tasks): wakes BLOCKED tasks, or releases
   * the highest-priority BUFN_WAIT task other than the freer.
   */
  void on_deallocation(std::size_t bytes, task_context const* freer);

  /**
   * @brief Called by `with_retry` after rolling back on retry_oom: waits in BUFN_WAIT.
   * @return RETRY when memory was freed for it, SPLIT when it was chosen to split
   */
  resume_action wait_after_rollback(task_id task);

  /** @brief Called by `with_retry` when an attempt succeeds. */
  void attempt_succeeded(task_id task);

  /** @return how many frees `on_deallocation` has seen; read it before an allocation attempt */
  [[nodiscard]] std::uint64_t free_count() const noexcept;

  /** @return the state of `task` (RUNNING when unknown) */
  [[nodiscard]] oom_state state(task_id task) const;
  /** @return the protocol's counters */
  [[nodiscard]] oom_statistics statistics() const;
  /** @brief Waits until `task` is in `state` (tests drive the state machine with it). */
  void testing_wait_for_state(task_id task, oom_state state) const;

 private:
  struct task_entry {
    int priority                            = 0;
    oom_state state                         = oom_state::RUNNING;
    bool waiting_elsewhere                  = false;
    bool rolled_back                        = false;  ///< rolled back with no success since
    std::uint64_t success_epoch_at_rollback = 0;
    /// Its last roll back was its first since a success anywhere, and no deadlock has let it
    /// run again since: a deadlock of BUFN_WAIT tasks that picks it lets it retry, not split.
    bool retry_owed           = false;
    std::size_t foreign_frees = 0;  ///< frees by other tasks since this task's last failure
    oom_state resume_state    = oom_state::RUNNING;  ///< what a BLOCKED task returns to
  };

  void register_task(task_context& task);
  void unregister_task(task_id task);
  void set_waiting_elsewhere(task_id task, bool waiting);
  /// Breaks a deadlock if there is one. Requires the lock.
  void resolve_deadlock() SPILLWAY_REQUIRES(mutex_);
  bool is_highest_priority(task_id task) const SPILLWAY_REQUIRES(mutex_);
  void record(event_kind kind, task_id task, std::size_t bytes);

  event_sink* const events_;
  mutable mutex mutex_;
  mutable std::condition_variable changed_;
  spill_function spill_ SPILLWAY_GUARDED_BY(mutex_);
  std::unordered_map<task_id, task_entry> tasks_ SPILLWAY_GUARDED_BY(mutex_);
  std::uint64_t success_epoch_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::atomic<std::uint64_t> frees_{0};  ///< written under mutex_, read without it
  mutable std::size_t sleepers_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  oom_statistics stats_ SPILLWAY_GUARDED_BY(mutex_);
};

}  // namespace spillway
