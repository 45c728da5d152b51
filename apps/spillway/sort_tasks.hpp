/**
 * @file sort_tasks.hpp
 * @brief `spillway sort` as many tasks on one device: each task takes the next input batch,
 * copies it onto the device while it holds the device semaphore, and sorts it into a sorter of
 * its own; then the first task's sorter absorbs the others' runs and merges them all.
 */
#pragma once

#include <spillway/lease/device_semaphore.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <vector>

namespace spillway::cli {

/** @brief What one task of a sort did (counted before its runs were merged). */
struct sort_task_summary {
  task_id id;
  std::size_t batches = 0;  ///< input batches it sorted (pieces of split batches count once)
  std::size_t rows    = 0;
  std::size_t bytes   = 0;
  std::size_t retries = 0;  ///< steps rolled back and run again
  std::size_t splits  = 0;  ///< steps that split their input
  std::size_t chunks  = 0;  ///< sorted chunks it stored
  lease_statistics leases;  ///< its leases (the base leases of the semaphore included)
};

/**
 * @brief The tasks of one sort, on one `device_environment`.
 *
 * `tasks` tasks (ids 1..tasks) run on threads of their own; at most `device_tasks` of them hold
 * the device semaphore at once, each with the base lease the arbiter gives a holder
 * (`lease_arbiter::base_lease_for`). A task takes the next batch once it holds the semaphore,
 * copies it onto the device and sorts it into chunks (all of it spillable once stored), and lets
 * the semaphore go: tasks waiting for the device hold no batch on the host. Task 1 then merges: its
 * sorter absorbs the others' (sealed) and hands out the output under the semaphore (`merge_guard`).
 */
class sort_tasks {
 public:
  /**
   * @param environment the device; must outlive this
   * @param options the sort; `task` and `coordinator` are set per task
   * @param tasks how many tasks (at least 1)
   * @param device_tasks how many hold the device at once (at least 1)
   * @param batch_bytes the size of input batches (the arbiter sizes base leases by it)
   * @param host where sorters keep their keys
   * @param events where the semaphore records who holds it (the run report's lanes); may be null
   */
  sort_tasks(device_environment& environment,
             external_sort_options const& options,
             std::size_t tasks,
             std::size_t device_tasks,
             std::size_t batch_bytes,
             resource_ref host,
             event_sink* events = nullptr);
  ~sort_tasks();
  sort_tasks(sort_tasks const&)            = delete;
  sort_tasks& operator=(sort_tasks const&) = delete;
  sort_tasks(sort_tasks&&)                 = delete;
  sort_tasks& operator=(sort_tasks&&)      = delete;

  /**
   * @brief Sorts every batch `next_batch` returns (host memory; null at the end; called by one
   * task at a time) and calls `pushed(rows, bytes)` for each piece sorted (from the tasks'
   * threads). Then the runs of all tasks are merged into task 1's sorter, which is finished.
   * @throws what a task threw first (the other tasks stop at their next batch)
   */
  void run(std::function<std::unique_ptr<table>()> const& next_batch,
           std::function<void(std::size_t rows, std::size_t bytes)> const& pushed);

  /** @return the sorter whose `next()` gives the output, after `run` */
  [[nodiscard]] external_sorter& merged() noexcept { return *sorters_.front(); }
  /** @return the task that merges (task 1) */
  [[nodiscard]] task_context& merging_task() noexcept { return tasks_.front()->context(); }
  [[nodiscard]] device_semaphore& semaphore() noexcept { return semaphore_; }
  /** @return each task's summary, in task order (leases as of now) */
  [[nodiscard]] std::vector<sort_task_summary> summaries() const;

 private:
  struct counts;
  void work(std::size_t index,
            std::function<std::unique_ptr<table>()> const& next_batch,
            std::function<void(std::size_t rows, std::size_t bytes)> const& pushed);

  device_environment& environment_;
  device_semaphore semaphore_;
  std::vector<std::unique_ptr<device_task>> tasks_;
  std::vector<std::unique_ptr<external_sorter>> sorters_;
  std::vector<std::unique_ptr<counts>> counts_;
};

}  // namespace spillway::cli
