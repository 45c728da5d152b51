/**
 * @file device_gate.hpp
 * @brief The shuffle's device steps on one rank (`device_gate`); private to the layer.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/spill/spill_store.hpp>

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <limits>
#include <map>

namespace spillway::detail {

/// Runs of a device step alone (`device_gate::run`) while spilling frees something meanwhile.
constexpr std::size_t MAX_ALONE_RUNS = 8;

/**
 * @brief The shuffle's device steps on one rank: side by side normally, and alone to recover from
 * out-of-memory.
 *
 * A step (`run`) that fails with `out_of_memory` has rolled back (its allocations were freed by
 * unwinding). It then waits until no other step of the rank runs and no shard of the rank is
 * being handed to another rank (those hold pinned device memory until their receiver takes it,
 * which never waits on this rank's steps), spills every unpinned buffer of the store, and runs
 * again. It is alone among the rank's steps only: receives (the push inbox, replies) are not
 * steps and may fill the device again meanwhile, so it spills and runs again while spilling
 * frees something, up to MAX_ALONE_RUNS times. Steps must not wait on other ranks, nor run other
 * steps, while inside `run`.
 */
class device_gate {
 public:
  explicit device_gate(spill_store& store) : store_(store) {}

  /** @brief Runs `step`; once more alone after an out_of_memory. @return what `step` returns */
  template <typename Step>
  decltype(auto) run(Step&& step) {
    {
      shared_entry const entry(*this);
      retry_block_marker const marker;
      try {
        return step();
      } catch (out_of_memory const&) {
        // Rolled back; run again alone below.
      }
    }
    exclusive_entry const entry(*this);
    make_room_alone();
    for (std::size_t alone = 1;; ++alone) {
      count_run_again();
      retry_block_marker const marker;
      try {
        return step();
      } catch (out_of_memory const&) {
        if (alone == MAX_ALONE_RUNS || make_room_alone() == 0) {
          throw;
        }
      }
    }
  }

  /** @brief Waits until this rank's steps and hand-overs are done, then spills the store. */
  void make_room() {
    exclusive_entry const entry(*this);
    retries_.fetch_add(1, std::memory_order_relaxed);  // (the receive that asked runs again)
    make_room_alone();
  }

  /** @brief Counts a hand-over of pinned device memory to another rank while it lasts. */
  class hand_over {
   public:
    explicit hand_over(device_gate& gate) : gate_(gate) {
      scoped_lock lock(gate_.mutex_);
      ++gate_.hand_overs_;
    }
    ~hand_over() {
      scoped_lock lock(gate_.mutex_);
      --gate_.hand_overs_;
      gate_.changed_.notify_all();
    }
    hand_over(hand_over const&)            = delete;
    hand_over& operator=(hand_over const&) = delete;
    hand_over(hand_over&&)                 = delete;
    hand_over& operator=(hand_over&&)      = delete;

   private:
    device_gate& gate_;
  };

  /** @return the steps run again alone so far, and the receives that made room to run again */
  [[nodiscard]] std::size_t retries() const noexcept {
    return retries_.load(std::memory_order_relaxed);
  }

  /** @return the steps of each task (by id) run again alone so far; a step of no task: id 0 */
  [[nodiscard]] std::map<std::uint64_t, std::size_t> retries_by_task() const {
    scoped_lock lock(mutex_);
    return retries_by_task_;
  }

 private:
  /**
   * @brief Waits under the gate's lock until `ready()`, then calls `enter()` under it. The task
   * of the calling thread, if any, counts as waiting meanwhile (`task_context::blocked`): the OOM
   * protocol must not take a task waiting here for one that may still free memory (a task
   * blocked in an allocation inside a step would wait for it forever). A task leaves that scope
   * holding no part of the gate, since leaving it may wait for leases it lent to a task that
   * needs the gate; then it looks again. `waiting(+1/-1)` counts it as a waiter meanwhile.
   */
  template <typename Ready, typename Enter, typename Waiting>
  void wait_to_enter(Ready const& ready, Enter const& enter, Waiting const& waiting) {
    task_context* const task = task_context::current();
    while (true) {
      {
        scoped_lock lock(mutex_);
        if (ready()) {
          enter();
          return;
        }
        if (task == nullptr) {
          waiting(1);
          lock.wait(changed_, ready);
          waiting(-1);
          enter();
          return;
        }
      }
      auto const blocked = task->blocked();
      scoped_lock lock(mutex_);
      waiting(1);
      lock.wait(changed_, ready);
      waiting(-1);
    }
  }

  class shared_entry {
   public:
    explicit shared_entry(device_gate& gate) : gate_(gate) {
      gate_.wait_to_enter(
        [&]() SPILLWAY_REQUIRES(gate_.mutex_) {
          return !gate_.exclusive_ && gate_.exclusive_waiting_ == 0;
        },
        [&]() SPILLWAY_REQUIRES(gate_.mutex_) { ++gate_.running_; },
        [](int) {});
    }
    ~shared_entry() {
      scoped_lock lock(gate_.mutex_);
      --gate_.running_;
      gate_.changed_.notify_all();
    }
    shared_entry(shared_entry const&)            = delete;
    shared_entry& operator=(shared_entry const&) = delete;
    shared_entry(shared_entry&&)                 = delete;
    shared_entry& operator=(shared_entry&&)      = delete;

   private:
    device_gate& gate_;
  };

  class exclusive_entry {
   public:
    explicit exclusive_entry(device_gate& gate) : gate_(gate) {
      gate_.wait_to_enter(
        [&]() SPILLWAY_REQUIRES(gate_.mutex_) {
          return !gate_.exclusive_ && gate_.running_ == 0 && gate_.hand_overs_ == 0;
        },
        [&]() SPILLWAY_REQUIRES(gate_.mutex_) { gate_.exclusive_ = true; },
        [&](int change) SPILLWAY_REQUIRES(gate_.mutex_) {
          if (change > 0) {
            ++gate_.exclusive_waiting_;
          } else {
            --gate_.exclusive_waiting_;
            gate_.changed_.notify_all();  // shared entries may go in meanwhile
          }
        });
    }
    ~exclusive_entry() {
      scoped_lock lock(gate_.mutex_);
      gate_.exclusive_ = false;
      gate_.changed_.notify_all();
    }
    exclusive_entry(exclusive_entry const&)            = delete;
    exclusive_entry& operator=(exclusive_entry const&) = delete;
    exclusive_entry(exclusive_entry&&)                 = delete;
    exclusive_entry& operator=(exclusive_entry&&)      = delete;

   private:
    device_gate& gate_;
  };

  /** @brief Counts a step of the calling thread's task run again alone. */
  void count_run_again() {
    retries_.fetch_add(1, std::memory_order_relaxed);
    task_context const* const task = task_context::current();
    scoped_lock lock(mutex_);
    ++retries_by_task_[task == nullptr ? 0 : task->id().value];
  }

  /// @return the bytes spilled
  std::size_t make_room_alone() {
    return store_.spill(std::numeric_limits<std::size_t>::max(), spill_tier::DEVICE);
  }

  spill_store& store_;
  mutable mutex mutex_;
  std::condition_variable changed_;
  std::size_t running_ SPILLWAY_GUARDED_BY(mutex_)           = 0;
  std::size_t exclusive_waiting_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::size_t hand_overs_ SPILLWAY_GUARDED_BY(mutex_)        = 0;
  bool exclusive_ SPILLWAY_GUARDED_BY(mutex_)                = false;
  std::atomic<std::size_t> retries_{0};
  std::map<std::uint64_t, std::size_t> retries_by_task_ SPILLWAY_GUARDED_BY(mutex_);
};

}  // namespace spillway::detail
