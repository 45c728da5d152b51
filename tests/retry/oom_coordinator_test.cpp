/**
 * @file oom_coordinator_test.cpp
 * @brief The OOM protocol of oom_coordinator.hpp, driven through a retry adaptor over a small
 * emulated device: spill, block, roll back, split, and the deadlock rules. Each transition of the
 * documented state machine is taken at least once; stable states (BLOCKED, BUFN_WAIT) are
 * awaited with testing_wait_for_state, transient ones (BUFN_THROW, SPLIT_THROW, RETRYING) are
 * seen through what the task observes (the exception its allocation throws, its state during an
 * attempt) and through the recorded events.
 *
 * Allocations are attributed to the task bound to the allocating thread. "Ballast" allocations
 * are made by an unbound thread: they belong to no task and only fill the device.
 */
#include "lease/watchdog.hpp"
#include "retry/oom_test_device.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/events.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/with_retry.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <future>
#include <memory>
#include <mutex>
#include <numeric>
#include <optional>
#include <ostream>
#include <string>
#include <thread>
#include <typeinfo>
#include <utility>
#include <vector>

namespace spillway {

/// gtest prints task ids in failures as "task 3" (found by argument-dependent lookup).
inline void PrintTo(task_id id, std::ostream* out) { *out << to_string(id); }

namespace {

using test::device_allocation;
using test::oom_test_device;
using test::range_input;
using test::run_with_watchdog;
using test::wait_until;

constexpr task_id TASK_A{1};
constexpr task_id TASK_B{2};
constexpr task_id TASK_C{3};

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

/// The tasks of events of `kind`, in order.
std::vector<task_id> tasks_of(event_log const& log, event_kind kind) {
  std::vector<task_id> result;
  for (auto const& e : log.events()) {
    if (e.kind == kind) {
      result.push_back(e.task);
    }
  }
  return result;
}

/// `bytes` allocated by the calling thread and handed to the spill store at once: they do not
/// count as the task's unspillable bytes (but the store cannot spill them either).
device_allocation handed_to_store(oom_test_device& d, std::size_t bytes) {
  device_allocation allocation{d.adaptor, bytes};
  d.adaptor.release_ownership(allocation.get());
  return allocation;
}

/// An allocation made with the calling thread bound to `task`.
device_allocation allocate_as(oom_test_device& d, task_context& task, std::size_t bytes) {
  task_context::thread_binding const binding{task};
  return device_allocation{d.adaptor, bytes};
}

/// Frees `allocation` with the calling thread bound to `task` (so `task` is the freer).
void free_as(task_context& task, device_allocation& allocation) {
  task_context::thread_binding const binding{task};
  allocation.reset();
}

TEST(OomCoordinator, StateNames) {
  EXPECT_STREQ(to_string(oom_state::RUNNING), "running");
  EXPECT_STREQ(to_string(oom_state::BLOCKED), "blocked");
  EXPECT_STREQ(to_string(oom_state::BUFN_THROW), "bufn_throw");
  EXPECT_STREQ(to_string(oom_state::BUFN_WAIT), "bufn_wait");
  EXPECT_STREQ(to_string(oom_state::RETRYING), "retrying");
  EXPECT_STREQ(to_string(oom_state::SPLIT_THROW), "split_throw");
}

TEST(OomCoordinator, UnknownAndFreshTasksAreRunning) {
  oom_test_device d{1000};
  task_context a{d.arbiter, TASK_A};
  EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
  oom_coordinator::registration const registered{d.coordinator, a};
  EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
  EXPECT_EQ(d.coordinator.statistics().failures, 0U);
}

// RUNNING --alloc fails, spill freed bytes--> RUNNING (retry alloc)
TEST(OomCoordinator, SpillThatFreesMemoryRetriesTheAllocation) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    oom_coordinator::registration const registered{d.coordinator, a};
    device_allocation spillable{d.adaptor, 600};  // the spill store's buffer
    std::vector<std::size_t> asked;
    d.coordinator.set_spill_function([&](std::size_t bytes) {
      asked.push_back(bytes);
      return spillable.reset();
    });
    device_allocation const big = allocate_as(d, a, 700);
    EXPECT_EQ(big.bytes(), 700U);
    EXPECT_EQ(asked, (std::vector<std::size_t>{700}));
    auto const stats = d.coordinator.statistics();
    EXPECT_EQ(stats.failures, 1U);
    EXPECT_EQ(stats.spills, 1U);
    EXPECT_EQ(stats.spilled_bytes, 600U);
    EXPECT_EQ(stats.blocks, 0U);
    EXPECT_EQ(stats.retries, 0U);
    EXPECT_EQ(d.events.total_bytes(event_kind::OOM_SPILLED), 600U);
    EXPECT_EQ(tasks_of(d.events, event_kind::OOM_SPILLED), (std::vector<task_id>{TASK_A}));
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
    EXPECT_EQ(d.adaptor.unspillable_bytes(TASK_A), 700U);
  });
}

// RUNNING --alloc fails, nothing spilled, unspillable bytes, another task runs--> BUFN_THROW
TEST(OomCoordinator, TaskHoldingUnspillableBytesGetsRetryOomAtOnce) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    task_context::thread_binding const binding{a};
    device_allocation const held{d.adaptor, 600};
    try {
      device_allocation const more{d.adaptor, 500};
      FAIL() << "500 bytes fitted next to 600 on a 1000-byte device";
    } catch (retry_oom const& error) {
      EXPECT_EQ(error.task(), TASK_A);
      EXPECT_EQ(error.requested_bytes(), 500U);
      EXPECT_EQ(error.available_bytes(), 400U);
      EXPECT_EQ(error.capacity_bytes(), 1000U);
      EXPECT_EQ(error.attempt(), 1U);
      std::string const message = error.what();
      EXPECT_TRUE(contains(message, "task 1")) << message;
      EXPECT_TRUE(contains(message, "500")) << message;
      EXPECT_TRUE(contains(message, "400")) << message;
      EXPECT_TRUE(contains(message, "1000")) << message;
    }
    auto const stats = d.coordinator.statistics();
    EXPECT_EQ(stats.failures, 1U);
    EXPECT_EQ(stats.retries, 1U);
    EXPECT_EQ(stats.blocks, 0U) << "a task holding unspillable memory never blocks";
    EXPECT_EQ(tasks_of(d.events, event_kind::OOM_RETRY), (std::vector<task_id>{TASK_A}));
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING) << "it rolls back now";
  });
}

// RUNNING --nothing spilled, no unspillable bytes--> BLOCKED --another task frees--> RUNNING
TEST(OomCoordinator, ConcurrentTaskHoldingNothingUnspillableBlocksUntilAnotherTaskFrees) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation b_held = allocate_as(d, b, 600);
    std::atomic<bool> allocated{false};
    std::thread a_thread = test::checked_thread([&] {
      device_allocation const big = allocate_as(d, a, 500);
      allocated                   = true;
    });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
    EXPECT_FALSE(allocated.load());
    EXPECT_EQ(d.coordinator.statistics().blocks, 1U);
    EXPECT_EQ(tasks_of(d.events, event_kind::OOM_BLOCKED), (std::vector<task_id>{TASK_A}));
    EXPECT_EQ(d.coordinator.state(TASK_B), oom_state::RUNNING);
    free_as(b, b_held);
    a_thread.join();
    EXPECT_TRUE(allocated.load());
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
    EXPECT_EQ(d.coordinator.statistics().retries, 0U);
    EXPECT_EQ(d.coordinator.statistics().deadlocks, 0U);
  });
}

/*
 * Deadlock of two BLOCKED tasks. Capacity 1000, ballast 400. A (priority 1) and B (priority 0)
 * each hold a 200-byte working buffer handed to the spill store (so neither holds unspillable
 * bytes, and nothing can be spilled), then ask for 300 more: both block, and nobody runs. The
 * lower-priority B is chosen: BLOCKED -> BUFN_THROW; its allocation throws retry_oom, with_retry
 * rolls it back (its working buffer is freed) -> BUFN_WAIT. That free wakes A, which proceeds.
 * When A frees its memory, B is released (BUFN_WAIT -> RETRYING) and its retry succeeds
 * (RETRYING -> RUNNING).
 */
TEST(OomCoordinator, ConcurrentDeadlockOfTwoBlockedTasksRollsBackTheLowerPriorityOne) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A, 1};
    task_context b{d.arbiter, TASK_B, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 400};
    std::promise<void> b_ready;
    std::promise<void> a_may_free;
    std::atomic<int> a_calls{0};
    std::atomic<int> b_calls{0};
    std::atomic<oom_state> b_state_on_retry{oom_state::BLOCKED};
    std::thread b_thread = test::checked_thread([&] {
      auto const results = with_retry(d.coordinator, b, range_input{1}, [&](range_input&) {
        int const call               = ++b_calls;
        device_allocation const work = handed_to_store(d, 200);
        if (call == 1) {
          b_ready.set_value();
          d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
        } else {
          b_state_on_retry = d.coordinator.state(TASK_B);
        }
        device_allocation const more{d.adaptor, 300};
        return call;
      });
      EXPECT_EQ(results, (std::vector<int>{2}));
    });
    std::thread a_thread = test::checked_thread([&] {
      b_ready.get_future().wait();
      auto results = with_retry(d.coordinator, a, range_input{1}, [&](range_input&) {
        ++a_calls;
        std::vector<device_allocation> kept;
        kept.push_back(handed_to_store(d, 200));
        kept.emplace_back(d.adaptor, 300);
        return kept;
      });
      a_may_free.get_future().wait();
      results.clear();  // frees A's memory: releases B
    });
    // B waits in BUFN_WAIT until A frees; had A been rolled back too, A would call again.
    wait_until(
      [&] { return d.coordinator.state(TASK_B) == oom_state::BUFN_WAIT || a_calls.load() > 1; });
    EXPECT_EQ(a_calls.load(), 1);
    EXPECT_NE(d.coordinator.state(TASK_A), oom_state::BLOCKED) << "B's roll back woke A";
    auto const stats = d.coordinator.statistics();
    EXPECT_EQ(stats.blocks, 2U);
    EXPECT_EQ(stats.deadlocks, 1U);
    EXPECT_EQ(stats.retries, 1U);
    EXPECT_EQ(tasks_of(d.events, event_kind::OOM_RETRY), (std::vector<task_id>{TASK_B}));
    a_may_free.set_value();
    a_thread.join();
    b_thread.join();
    EXPECT_EQ(a_calls.load(), 1) << "A never rolled back";
    EXPECT_EQ(b_calls.load(), 2);
    EXPECT_EQ(b_state_on_retry.load(), oom_state::RETRYING);
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
    EXPECT_EQ(d.coordinator.state(TASK_B), oom_state::RUNNING);
    EXPECT_EQ(d.coordinator.statistics().splits, 0U);
  });
}

/**
 * @brief A spill store of test inputs: an input's device buffer is freed by `spill` while the
 * input is spillable, and allocated again by `materialize`. The buffers belong to the store, so
 * they never count as a task's unspillable bytes.
 */
class input_store {
 public:
  struct entry {
    std::size_t bytes = 0;
    void* pointer     = nullptr;
    bool resident     = false;
    bool spillable    = true;
  };

  explicit input_store(retry_resource_adaptor& adaptor) : adaptor_(adaptor) {}

  /** @return a resident entry of `bytes`, allocated by the calling thread */
  std::shared_ptr<entry> add(std::size_t bytes) {
    auto result      = std::make_shared<entry>();
    result->bytes    = bytes;
    result->pointer  = adaptor_.allocate(bytes);
    result->resident = true;
    adaptor_.release_ownership(result->pointer);
    std::lock_guard lock{mutex_};
    entries_.push_back(result);
    return result;
  }

  /** @brief The spill function: frees spillable resident buffers until `bytes` are freed. */
  std::size_t spill(std::size_t bytes) {
    std::vector<std::pair<void*, std::size_t>> victims;
    std::size_t freed = 0;
    {
      std::lock_guard lock{mutex_};
      for (auto const& candidate : entries_) {
        if (freed >= bytes) {
          break;
        }
        if (candidate->resident && candidate->spillable) {
          victims.emplace_back(candidate->pointer, candidate->bytes);
          freed += candidate->bytes;
          candidate->resident = false;
          candidate->pointer  = nullptr;
        }
      }
    }
    for (auto const& [pointer, size] : victims) {
      adaptor_.deallocate(pointer, size);
    }
    return freed;
  }

  void make_spillable(entry& target) {
    std::lock_guard lock{mutex_};
    target.spillable = true;
  }

  void materialize(entry& target) {
    {
      std::lock_guard lock{mutex_};
      target.spillable = false;  // pinned for the attempt
      if (target.resident) {
        return;
      }
    }
    // Allocated outside the lock: a failure here runs the spill function.
    void* const pointer = adaptor_.allocate(target.bytes);
    adaptor_.release_ownership(pointer);
    std::lock_guard lock{mutex_};
    target.pointer  = pointer;
    target.resident = true;
  }

  void remove(std::shared_ptr<entry> const& target) {
    void* pointer = nullptr;
    {
      std::lock_guard lock{mutex_};
      std::erase(entries_, target);
      if (target->resident) {
        pointer = target->pointer;
      }
      target->resident = false;
    }
    if (pointer != nullptr) {
      adaptor_.deallocate(pointer, target->bytes);
    }
  }

  std::shared_ptr<entry> add_spilled(std::size_t bytes) {
    auto result   = std::make_shared<entry>();
    result->bytes = bytes;
    std::lock_guard lock{mutex_};
    entries_.push_back(result);
    return result;
  }

 private:
  retry_resource_adaptor& adaptor_;
  std::mutex mutex_;
  std::vector<std::shared_ptr<entry>> entries_;
};

/** @brief A retryable input whose rows live in an `input_store` buffer. Move-only. */
class stored_input {
 public:
  stored_input(input_store& store, std::shared_ptr<input_store::entry> data, std::size_t rows)
    : store_(&store), data_(std::move(data)), rows_(rows) {}
  ~stored_input() {
    if (data_) {
      store_->remove(data_);
    }
  }
  stored_input(stored_input&& other) noexcept
    : store_(other.store_), data_(std::move(other.data_)), rows_(other.rows_) {}
  stored_input& operator=(stored_input&& other) noexcept {
    if (this != &other) {
      if (data_) {
        store_->remove(data_);
      }
      store_ = other.store_;
      data_  = std::move(other.data_);
      rows_  = other.rows_;
    }
    return *this;
  }
  stored_input(stored_input const&)            = delete;
  stored_input& operator=(stored_input const&) = delete;

  [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
  void make_spillable() { store_->make_spillable(*data_); }
  void materialize() { store_->materialize(*data_); }
  [[nodiscard]] std::pair<stored_input, stored_input> split_at(std::size_t row) {
    std::size_t const first_bytes = data_->bytes * row / rows_;
    return {stored_input{*store_, store_->add_spilled(first_bytes), row},
            stored_input{*store_, store_->add_spilled(data_->bytes - first_bytes), rows_ - row}};
  }

 private:
  input_store* store_;
  std::shared_ptr<input_store::entry> data_;
  std::size_t rows_;
};

static_assert(retryable_input<stored_input>);

/*
 * Rolling back lets the victim's input spill, for the task that is still BLOCKED. Capacity 1000,
 * ballast 150; A's input (100) and B's input (500) are in the spill store. Both attempts pin their
 * inputs, then A (priority 1) and B (priority 0) each ask for 300: nothing is spillable, both
 * block, B is rolled back and its input becomes spillable. A must now get the chance to retry its
 * allocation, whose spill then frees B's input, instead of being rolled back in turn as if
 * nothing had changed.
 */
TEST(OomCoordinator, ConcurrentRolledBackInputOfTheVictimSpillsForTheBlockedTask) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    input_store store{d.adaptor};
    d.coordinator.set_spill_function([&](std::size_t bytes) { return store.spill(bytes); });
    task_context a{d.arbiter, TASK_A, 1};
    task_context b{d.arbiter, TASK_B, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 150};
    stored_input a_input{store, store.add(100), 1};
    stored_input b_input{store, store.add(500), 1};
    std::promise<void> b_pinned;
    std::atomic<int> a_calls{0};
    std::atomic<int> b_calls{0};
    std::thread b_thread = test::checked_thread([&] {
      with_retry(d.coordinator, b, std::move(b_input), [&](stored_input&) {
        if (++b_calls == 1) {
          b_pinned.set_value();
          d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
        }
        device_allocation const work{d.adaptor, 300};
      });
    });
    std::thread a_thread = test::checked_thread([&] {
      b_pinned.get_future().wait();
      with_retry(d.coordinator, a, std::move(a_input), [&](stored_input&) {
        ++a_calls;
        device_allocation const work{d.adaptor, 300};
      });
    });
    a_thread.join();
    b_thread.join();
    EXPECT_EQ(a_calls.load(), 1) << "A was rolled back although B's roll back made room for it";
    // B may roll back more than once (its input comes back while A still runs); A never does.
    auto const retries = tasks_of(d.events, event_kind::OOM_RETRY);
    EXPECT_FALSE(retries.empty());
    EXPECT_EQ(std::count(retries.begin(), retries.end(), TASK_A), 0);
    EXPECT_GE(d.coordinator.statistics().spills, 1U);
    EXPECT_EQ(d.coordinator.statistics().splits, 0U);
    EXPECT_EQ(static_cast<std::size_t>(b_calls.load()), retries.size() + 1);
  });
}

/*
 * Everybody rolled back and nobody can proceed: the highest-priority task splits. Capacity 1000,
 * ballast 400; A (priority 1) and B (priority 0) each hold 200 unspillable bytes from earlier
 * work; each step needs 30 bytes per row, 300 for 10 rows, and 200 are free.
 * - A fails while B runs: retry_oom (RUNNING -> BUFN_THROW), rolls back -> BUFN_WAIT.
 * - B fails with A in BUFN_WAIT: alone, but not the highest priority -> retry_oom -> BUFN_WAIT.
 * - Every task is now in BUFN_WAIT: the highest-priority one, A, splits
 *   (BUFN_WAIT -> SPLIT_THROW -> RUNNING); halves of 150 bytes fit.
 */
TEST(OomCoordinator, ConcurrentWhenEveryTaskRolledBackTheHighestPrioritySplits) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A, 1};
    task_context b{d.arbiter, TASK_B, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 400};
    device_allocation a_held = allocate_as(d, a, 200);
    device_allocation b_held = allocate_as(d, b, 200);
    std::vector<std::size_t> a_sizes;
    std::vector<oom_state> a_states;
    std::vector<std::size_t> a_results;
    std::vector<std::size_t> b_results;
    std::thread a_thread = test::checked_thread([&] {
      a_results = with_retry(d.coordinator, a, range_input{10}, [&](range_input& piece) {
        a_sizes.push_back(piece.rows());
        a_states.push_back(d.coordinator.state(TASK_A));
        device_allocation const work{d.adaptor, piece.rows() * 30};
        return piece.rows();
      });
    });
    std::thread b_thread = test::checked_thread([&] {
      d.coordinator.testing_wait_for_state(TASK_A, oom_state::BUFN_WAIT);
      b_results = with_retry(d.coordinator, b, range_input{10}, [&](range_input& piece) {
        device_allocation const work{d.adaptor, piece.rows() * 30};
        return piece.rows();
      });
    });
    a_thread.join();
    free_as(a, a_held);  // lets B through
    b_thread.join();
    // A's first roll back earns it one more run of its input (the deadlock of two BUFN_WAIT
    // tasks lets it retry); failing again with no success anywhere, it splits.
    EXPECT_EQ(a_sizes, (std::vector<std::size_t>{10, 10, 5, 5}));
    EXPECT_EQ(a_results, (std::vector<std::size_t>{5, 5}));
    ASSERT_EQ(a_states.size(), 4U);
    EXPECT_EQ(a_states[0], oom_state::RUNNING);
    EXPECT_EQ(a_states[1], oom_state::RETRYING) << "BUFN_WAIT -> RETRYING once";
    EXPECT_EQ(a_states[2], oom_state::RUNNING) << "SPLIT_THROW -> RUNNING";
    EXPECT_EQ(std::accumulate(b_results.begin(), b_results.end(), std::size_t{0}), 10U);
    auto const splits = tasks_of(d.events, event_kind::OOM_SPLIT);
    ASSERT_FALSE(splits.empty());
    EXPECT_EQ(splits.front(), TASK_A);
    auto const retries = tasks_of(d.events, event_kind::OOM_RETRY);
    ASSERT_GE(retries.size(), 2U);
    EXPECT_EQ(retries[0], TASK_A);
    EXPECT_EQ(retries[1], TASK_B);
    EXPECT_GE(d.coordinator.statistics().deadlocks, 1U);
  });
}

/*
 * RUNNING (here RETRYING) --fails holding unspillable bytes, alone, highest priority, already
 * rolled back with no success since--> SPLIT_THROW. Capacity 1000, ballast 450; A (priority 1)
 * holds 200 unspillable; B (priority 0, this thread) holds 50. A's step needs 400 (40 per row).
 * A fails while B runs -> retry_oom. B frees its 50 before A's roll back is done, so A retries at
 * once (BUFN_WAIT skipped: memory was freed since the failure -> RETRYING). B then waits in a
 * blocking scope (not running). A fails again, now alone: another roll back cannot help, so its
 * allocation throws split_and_retry_oom, and the halves (200 each) fit.
 */
TEST(OomCoordinator, ConcurrentTaskThatRolledBackAndFailsAgainAloneSplitsAtOnce) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A, 1};
    task_context b{d.arbiter, TASK_B, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 450};
    device_allocation a_held  = allocate_as(d, a, 200);
    device_allocation b_small = allocate_as(d, b, 50);
    std::promise<void> a_failed;
    std::promise<void> a_go;
    std::vector<std::size_t> sizes;
    std::vector<std::string> caught;
    std::optional<oom_state> state_on_retry;
    std::thread a_thread = test::checked_thread([&] {
      with_retry(d.coordinator, a, range_input{10}, [&](range_input& piece) {
        sizes.push_back(piece.rows());
        if (sizes.size() == 2) {
          state_on_retry = d.coordinator.state(TASK_A);
        }
        try {
          device_allocation const work{d.adaptor, piece.rows() * 40};
        } catch (retry_oom const&) {
          caught.emplace_back("retry");
          if (sizes.size() == 1) {
            a_failed.set_value();
            a_go.get_future().wait();
          }
          throw;
        } catch (split_and_retry_oom const&) {
          caught.emplace_back("split");
          throw;
        }
      });
    });
    a_failed.get_future().wait();
    free_as(b, b_small);
    {
      auto const waiting = b.blocked();
      a_go.set_value();
      a_thread.join();
    }
    EXPECT_EQ(sizes, (std::vector<std::size_t>{10, 10, 5, 5}));
    EXPECT_EQ(caught, (std::vector<std::string>{"retry", "split"}));
    EXPECT_EQ(state_on_retry, oom_state::RETRYING);
    EXPECT_EQ(d.coordinator.statistics().retries, 1U);
    EXPECT_EQ(d.coordinator.statistics().splits, 1U);
    EXPECT_EQ(tasks_of(d.events, event_kind::OOM_SPLIT), (std::vector<task_id>{TASK_A}));
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
  });
}

/*
 * A task inside a blocking scope counts as not running. A is BLOCKED while B runs: no deadlock.
 * Once B waits in a blocking scope (say, for A's output), nobody runs: A, the only BLOCKED task,
 * rolls back (BLOCKED -> BUFN_THROW).
 */
TEST(OomCoordinator, ConcurrentTaskInABlockingScopeCountsAsNotRunning) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 700};
    std::string outcome;
    std::thread a_thread = test::checked_thread([&] {
      try {
        device_allocation const big = allocate_as(d, a, 500);
        outcome                     = "allocated";
      } catch (retry_oom const&) {
        outcome = "retry";
      }
    });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
    EXPECT_EQ(d.coordinator.statistics().deadlocks, 0U) << "B runs: not a deadlock";
    {
      auto const waiting = b.blocked();
      a_thread.join();
    }
    EXPECT_EQ(outcome, "retry");
    EXPECT_EQ(d.coordinator.statistics().deadlocks, 1U);
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
  });
}

/*
 * BLOCKED --deadlock, chosen to split--> SPLIT_THROW. A (priority 1, nothing unspillable) blocks;
 * B enters a blocking scope: deadlock, A rolls back (retry_oom). B frees 10 bytes meanwhile, so A
 * retries at once, fails again and blocks again, with B still in its scope: deadlock again. A has
 * already rolled back with no success anywhere since, is the only BLOCKED task and the highest
 * priority: another roll back cannot help, so its allocation throws split_and_retry_oom.
 */
TEST(OomCoordinator, ConcurrentBlockedTaskThatAlreadyRolledBackIsChosenToSplit) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A, 1};
    task_context b{d.arbiter, TASK_B, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 700};
    device_allocation b_small = allocate_as(d, b, 10);
    std::promise<void> a_failed;
    std::promise<void> a_go;
    std::vector<std::size_t> sizes;
    std::vector<std::string> caught;
    std::thread a_thread = test::checked_thread([&] {
      with_retry(d.coordinator, a, range_input{10}, [&](range_input& piece) {
        sizes.push_back(piece.rows());
        try {
          device_allocation const work{d.adaptor, piece.rows() * 50};
        } catch (retry_oom const&) {
          caught.emplace_back("retry");
          if (sizes.size() == 1) {
            a_failed.set_value();
            a_go.get_future().wait();
          }
          throw;
        } catch (split_and_retry_oom const&) {
          caught.emplace_back("split");
          throw;
        }
      });
    });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
    {
      auto const waiting = b.blocked();
      a_failed.get_future().wait();
      free_as(b, b_small);
      a_go.set_value();
      a_thread.join();
    }
    EXPECT_EQ(sizes, (std::vector<std::size_t>{10, 10, 5, 5}));
    EXPECT_EQ(caught, (std::vector<std::string>{"retry", "split"}));
    EXPECT_EQ(d.coordinator.statistics().deadlocks, 2U);
    EXPECT_EQ(d.coordinator.statistics().retries, 1U);
    EXPECT_EQ(d.coordinator.statistics().splits, 1U);
  });
}

/*
 * A free wakes BLOCKED tasks before it releases a rolled-back one. Capacity 1000, ballast 500;
 * B (this thread) holds 300, A (priority 2) 100 unspillable. A fails and waits in BUFN_WAIT; C
 * (nothing unspillable) fails and blocks. B frees its 300: C is woken (its allocation is
 * retried), A stays in BUFN_WAIT even though it has the higher priority. C's later free releases
 * A (BUFN_WAIT -> RETRYING).
 */
TEST(OomCoordinator, ConcurrentAFreeWakesBlockedTasksAheadOfRolledBackOnes) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A, 2};
    task_context b{d.arbiter, TASK_B, 0};
    task_context c{d.arbiter, TASK_C, 0};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    oom_coordinator::registration const registered_c{d.coordinator, c};
    device_allocation ballast{d.adaptor, 500};
    device_allocation b_held = allocate_as(d, b, 300);
    device_allocation a_held = allocate_as(d, a, 100);
    std::atomic<int> a_calls{0};
    std::thread a_thread = test::checked_thread([&] {
      with_retry(d.coordinator, a, range_input{1}, [&](range_input&) {
        ++a_calls;
        device_allocation const work{d.adaptor, 200};
      });
    });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BUFN_WAIT);
    std::atomic<bool> c_allocated{false};
    std::promise<void> c_may_free;
    std::thread c_thread = test::checked_thread([&] {
      task_context::thread_binding const binding{c};
      device_allocation work{d.adaptor, 150};
      c_allocated = true;
      c_may_free.get_future().wait();
      work.reset();
    });
    d.coordinator.testing_wait_for_state(TASK_C, oom_state::BLOCKED);
    free_as(b, b_held);
    EXPECT_NE(d.coordinator.state(TASK_C), oom_state::BLOCKED) << "the free woke C at once";
    wait_until([&] { return c_allocated.load(); });
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::BUFN_WAIT) << "C was blocked: A waits";
    c_may_free.set_value();
    c_thread.join();
    a_thread.join();
    EXPECT_EQ(a_calls.load(), 2);
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::RUNNING);
  });
}

/*
 * A free that happens after an allocation failed but before the task blocked is not lost.
 * B frees its memory while A's failure path runs (simulated in the spill function, which then
 * reports that it spilled nothing). Memory was freed since A's attempt, so A retries at once
 * rather than blocking for a free that already happened (B, still running, would never free
 * again).
 */
TEST(OomCoordinator, ConcurrentAFreeBetweenAFailedAttemptAndBlockingIsNotLost) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation b_held = allocate_as(d, b, 600);
    std::atomic<int> spill_calls{0};
    d.coordinator.set_spill_function([&](std::size_t) {
      if (spill_calls++ == 0) {
        free_as(b, b_held);
      }  // B frees, concurrently with A's failure
      return std::size_t{0};
    });
    std::atomic<bool> done{false};
    std::thread a_thread = test::checked_thread([&] {
      device_allocation const big = allocate_as(d, a, 500);
      done                        = true;
    });
    wait_until([&] { return done.load() || d.coordinator.state(TASK_A) == oom_state::BLOCKED; });
    EXPECT_TRUE(done.load()) << "A blocked waiting for a free that had already happened";
    if (!done.load()) {
      device_allocation rescue = allocate_as(d, b, 1);
      free_as(b, rescue);
    }
    a_thread.join();
    EXPECT_EQ(d.coordinator.statistics().blocks, 0U);
  });
}

TEST(OomCoordinator, ConcurrentFreeingNothingWakesNobody) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    oom_coordinator::registration const registered_b{d.coordinator, b};
    device_allocation ballast{d.adaptor, 700};
    std::thread a_thread =
      test::checked_thread([&] { device_allocation const big = allocate_as(d, a, 500); });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
    {
      task_context::thread_binding const binding{b};
      void* const nothing = d.adaptor.allocate(0);
      d.adaptor.deallocate(nothing, 0);
    }
    EXPECT_EQ(d.coordinator.state(TASK_A), oom_state::BLOCKED)
      << "a zero-byte free made A retry an allocation that cannot succeed";
    ballast.reset();
    a_thread.join();
  });
}

TEST(OomCoordinator, ConcurrentUnregisteringTheLastRunningTaskBreaksTheDeadlock) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    task_context b{d.arbiter, TASK_B};
    oom_coordinator::registration const registered_a{d.coordinator, a};
    std::optional<oom_coordinator::registration> registered_b;
    registered_b.emplace(d.coordinator, b);
    device_allocation ballast{d.adaptor, 700};
    std::string outcome;
    std::thread a_thread = test::checked_thread([&] {
      try {
        device_allocation const big = allocate_as(d, a, 500);
        outcome                     = "allocated";
      } catch (retry_oom const&) {
        outcome = "retry";
      }
    });
    d.coordinator.testing_wait_for_state(TASK_A, oom_state::BLOCKED);
    registered_b.reset();  // B is done: nobody else will free memory for A
    a_thread.join();
    EXPECT_EQ(outcome, "retry");
  });
}

TEST(OomCoordinator, FailureOutsideTasksOnlySpills) {
  oom_test_device d{1000};
  try {
    device_allocation const big{d.adaptor, 2000};
    FAIL() << "2000 bytes fitted on a 1000-byte device";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(typeid(error), typeid(out_of_memory)) << "the upstream's own failure";
    EXPECT_EQ(error.requested_bytes(), 2000U);
    EXPECT_TRUE(contains(error.what(), "1000")) << error.what();
  }
  EXPECT_EQ(d.coordinator.statistics().failures, 1U);
  device_allocation spillable{d.adaptor, 800};
  d.coordinator.set_spill_function([&](std::size_t) { return spillable.reset(); });
  device_allocation const fits{d.adaptor, 900};
  EXPECT_EQ(d.coordinator.statistics().spills, 1U);
}

TEST(OomCoordinator, UnregisteredTaskGetsTheUpstreamFailure) {
  run_with_watchdog([] {
    oom_test_device d{1000};
    task_context a{d.arbiter, TASK_A};
    device_allocation ballast{d.adaptor, 700};
    task_context::thread_binding const binding{a};
    EXPECT_THROW(device_allocation(d.adaptor, 500), out_of_memory);
    EXPECT_EQ(d.coordinator.statistics().blocks, 0U);
  });
}

}  // namespace
}  // namespace spillway
