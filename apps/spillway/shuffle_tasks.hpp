/**
 * @file shuffle_tasks.hpp
 * @brief `spillway shuffle` as many tasks per rank on one device: the tasks take the rank's map
 * work in read order, one at a time, and run it side by side, at most `--device-tasks` of them
 * holding the device semaphore at once.
 */
#pragma once

#include <spillway/lease/device_semaphore.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/runtime/device_environment.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <vector>

namespace spillway::cli {

/** @brief One map step taken by a task: what it runs on the device, and its size. */
struct map_work {
  std::size_t rows  = 0;      ///< rows of its input (0 when they are not known: resumed maps)
  std::size_t bytes = 0;      ///< bytes of its input on the host, which the step copies
  std::function<void()> run;  ///< the step: copies the input onto the device and partitions it
};

/** @brief What one task of a rank's shuffle did. */
struct shuffle_task_summary {
  std::size_t maps      = 0;  ///< map steps it ran
  std::size_t rows      = 0;
  std::size_t bytes     = 0;
  double device_seconds = 0;  ///< how long it held the device semaphore
  lease_statistics leases;    ///< its leases (the base leases of the semaphore included)
};

/**
 * @brief The map tasks of one rank, on the rank's `device_environment`.
 *
 * `tasks` tasks run on threads of their own (one task runs on the calling thread), ids
 * `first_id`, `first_id + 1`, ...; each takes the next `map_work` (the caller reads the input and
 * fixes the map's number there, in order), then holds the device semaphore, with the base lease
 * the arbiter gives a holder (`lease_arbiter::base_lease_for`) and, for a step larger than it,
 * a lease for the rest, while it runs the step. The step's shards are spillable once made. A
 * task done with the work waits, counted as waiting, until every task is done.
 */
class shuffle_map_tasks {
 public:
  /**
   * @param environment the rank's device; must outlive this
   * @param tasks how many tasks (at least 1)
   * @param device_tasks how many hold the device at once (at least 1)
   * @param batch_bytes the size of input batches (the arbiter sizes base leases by it)
   * @param first_id the id of the first task; the ids after it must be free in the environment
   * @param events where the semaphore records each acquire and release; may be null
   */
  shuffle_map_tasks(device_environment& environment,
                    std::size_t tasks,
                    std::size_t device_tasks,
                    std::size_t batch_bytes,
                    task_id first_id,
                    event_sink* events = nullptr);
  ~shuffle_map_tasks();
  shuffle_map_tasks(shuffle_map_tasks const&)            = delete;
  shuffle_map_tasks& operator=(shuffle_map_tasks const&) = delete;
  shuffle_map_tasks(shuffle_map_tasks&&)                 = delete;
  shuffle_map_tasks& operator=(shuffle_map_tasks&&)      = delete;

  /**
   * @brief Runs every step `next` gives (called by one task at a time; empty at the end) on the
   * tasks. The calling thread's own task, if it has one, counts as waiting meanwhile. Once run,
   * the tasks are gone (out of the OOM protocol and the arbiter); it runs once.
   * @throws what a task threw first (the other tasks stop at their next step)
   */
  void run(std::function<std::optional<map_work>()> const& next);

  /** @return each task's summary, in task order */
  [[nodiscard]] std::vector<shuffle_task_summary> summaries() const { return summaries_; }

  /**
   * @return the bytes of device memory one map step of `input_bytes` needs: its input copied
   * onto the device and its packed partitions
   */
  [[nodiscard]] static std::size_t step_bytes(std::size_t input_bytes) noexcept;

 private:
  void work(std::size_t index, std::function<std::optional<map_work>()> const& next);

  device_environment& environment_;
  device_semaphore semaphore_;
  std::vector<std::unique_ptr<device_task>> tasks_;
  std::vector<shuffle_task_summary> summaries_;
};

}  // namespace spillway::cli
