#include "sort_tasks.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/retry/copy_to_device.hpp>

#include <atomic>
#include <exception>
#include <latch>
#include <mutex>
#include <optional>
#include <thread>

namespace spillway::cli {

struct sort_tasks::counts {
  std::size_t batches = 0;
  std::size_t rows    = 0;
  std::size_t bytes   = 0;
  external_sort_statistics sorted;  ///< its sorter's, before the merge absorbed them
  lease_statistics leases;          ///< its leases, when it was done
  retry_counts copies;              ///< of its copies of batches onto the device
};

sort_tasks::sort_tasks(device_environment& environment,
                       external_sort_options const& options,
                       std::size_t tasks,
                       std::size_t device_tasks,
                       std::size_t batch_bytes,
                       resource_ref host,
                       event_sink* events)
  : environment_(environment),
    semaphore_(environment.arbiter(),
               device_tasks,
               environment.arbiter().base_lease_for(batch_bytes, device_tasks),
               events) {
  SPILLWAY_EXPECTS(tasks >= 1 && device_tasks >= 1,
                   "a sort needs at least one task and one device task",
                   invalid_argument);
  for (std::size_t index = 0; index < tasks; ++index) {
    tasks_.push_back(std::make_unique<device_task>(environment_, task_id{index + 1}));
    auto task_options        = options;
    task_options.task        = &tasks_.back()->context();
    task_options.coordinator = &environment_.coordinator();
    sorters_.push_back(std::make_unique<external_sorter>(environment_.store(),
                                                         task_options,
                                                         environment_.stream(),
                                                         memory_resources{environment_.device()},
                                                         host));
    counts_.push_back(std::make_unique<counts>());
  }
}

sort_tasks::~sort_tasks() {
  // Sorters give their chunks back to the store before their tasks end.
  sorters_.clear();
}

void sort_tasks::work(std::size_t index,
                      std::function<std::unique_ptr<table>()> const& next_batch,
                      std::function<void(std::size_t rows, std::size_t bytes)> const& pushed) {
  auto& task   = tasks_[index]->context();
  auto& sorter = *sorters_[index];
  auto& mine   = *counts_[index];
  task_context::thread_binding const binding{task};
  while (true) {
    // The next batch is taken once the device is this task's: a task waiting for the device
    // holds no batch on the host (with more tasks than --device-tasks, each waiting task held one
    // past what the readers are sized to).
    device_semaphore::guard const holding{semaphore_, task};
    auto batch = next_batch();
    if (!batch) {
      break;
    }
    for (auto& piece : copy_to_device(std::move(batch),
                                      environment_.coordinator(),
                                      task,
                                      environment_.stream(),
                                      environment_.device(),
                                      &mine.copies)) {
      auto const rows  = piece->num_rows();
      auto const bytes = piece->allocated_bytes();
      sorter.push(std::move(piece));
      mine.rows += rows;
      mine.bytes += bytes;
      pushed(rows, bytes);
    }
    ++mine.batches;
  }
  if (index != 0) {  // task 1's sorter absorbs this one's runs
    device_semaphore::guard const holding{semaphore_, task};
    sorter.seal();
  }
  mine.sorted = sorter.statistics();
}

void sort_tasks::run(std::function<std::unique_ptr<table>()> const& next_batch,
                     std::function<void(std::size_t rows, std::size_t bytes)> const& pushed) {
  std::mutex reading;
  std::atomic<bool> failed{false};
  std::exception_ptr first_failure;
  std::mutex failure_mutex;
  auto const next = [&]() -> std::unique_ptr<table> {
    std::lock_guard lock(reading);
    return failed.load() ? nullptr : next_batch();
  };
  std::latch all_done{static_cast<std::ptrdiff_t>(tasks_.size())};
  auto const guarded = [&](std::size_t index) {
    try {
      work(index, next, pushed);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!first_failure) {
        first_failure = std::current_exception();
      }
      failed = true;
    }
    // A task done with its batches waits on the others' (not on memory): the OOM protocol must
    // not count it as one that may still free memory, or a task rolled back would wait for it.
    auto& task             = tasks_[index]->context();
    counts_[index]->leases = environment_.arbiter().statistics(task.id());
    auto const waiting     = task.blocked();
    all_done.arrive_and_wait();
  };
  if (tasks_.size() == 1) {
    guarded(0);
  } else {
    std::vector<std::thread> threads;
    threads.reserve(tasks_.size());
    for (std::size_t index = 0; index < tasks_.size(); ++index) {
      threads.emplace_back(guarded, index);
    }
    for (auto& thread : threads) {
      thread.join();
    }
  }
  if (first_failure) {
    std::rethrow_exception(first_failure);
  }
  task_context::thread_binding const binding{merging_task()};
  // The merge is task 1's alone: the other tasks give their runs to it and end.
  {
    device_semaphore::guard const holding{semaphore_, merging_task()};
    for (std::size_t index = 1; index < sorters_.size(); ++index) {
      sorters_.front()->absorb(*sorters_[index]);
    }
  }
  sorters_.resize(1);
  tasks_.resize(1);
  device_semaphore::guard const holding{semaphore_, merging_task()};
  sorters_.front()->finish();
}

std::vector<sort_task_summary> sort_tasks::summaries() const {
  std::optional<external_sort_statistics> merged;
  if (!sorters_.empty()) {
    merged = sorters_.front()->statistics();
  }
  external_sort_statistics absorbed;  // the other tasks' counts, in task 1's sorter since
  for (std::size_t index = 1; index < counts_.size(); ++index) {
    absorbed.retries += counts_[index]->sorted.retries;
    absorbed.splits += counts_[index]->sorted.splits;
  }
  std::vector<sort_task_summary> out;
  for (std::size_t index = 0; index < counts_.size(); ++index) {
    auto const& mine = *counts_[index];
    sort_task_summary summary;
    summary.id      = task_id{index + 1};
    summary.batches = mine.batches;
    summary.rows    = mine.rows;
    summary.bytes   = mine.bytes;
    summary.retries = mine.sorted.retries + mine.copies.retries;
    summary.splits  = mine.sorted.splits + mine.copies.splits;
    if (index == 0 && merged) {
      // Task 1's sorter went on to merge, with the others' counts absorbed into it.
      summary.retries = merged->retries + mine.copies.retries - absorbed.retries;
      summary.splits  = merged->splits + mine.copies.splits - absorbed.splits;
    }
    summary.chunks = mine.sorted.chunks_created;
    // Task 1 goes on merging; the others ended when their runs were absorbed.
    summary.leases = index == 0 ? environment_.arbiter().statistics(summary.id) : mine.leases;
    out.push_back(summary);
  }
  return out;
}

}  // namespace spillway::cli
