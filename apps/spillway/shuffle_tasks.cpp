#include "shuffle_tasks.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/task_context.hpp>

#include <atomic>
#include <chrono>
#include <exception>
#include <latch>
#include <mutex>
#include <thread>

namespace spillway::cli {

shuffle_map_tasks::shuffle_map_tasks(device_environment& environment,
                                     std::size_t tasks,
                                     std::size_t device_tasks,
                                     std::size_t batch_bytes,
                                     task_id first_id,
                                     event_sink* events)
  : environment_(environment),
    semaphore_(environment.arbiter(),
               device_tasks,
               environment.arbiter().base_lease_for(batch_bytes, device_tasks),
               events),
    summaries_(tasks) {
  SPILLWAY_EXPECTS(tasks >= 1 && device_tasks >= 1,
                   "a shuffle needs at least one task and one device task",
                   invalid_argument);
  for (std::size_t index = 0; index < tasks; ++index) {
    tasks_.push_back(std::make_unique<device_task>(environment_, task_id{first_id.value + index}));
  }
}

shuffle_map_tasks::~shuffle_map_tasks() = default;

std::size_t shuffle_map_tasks::step_bytes(std::size_t input_bytes) noexcept {
  // The input on the device, its rows packed by partition beside it, and the partition of each
  // row with the frames' headers (a quarter more, generously).
  return input_bytes / 4 * 9;
}

void shuffle_map_tasks::work(std::size_t index,
                             std::function<std::optional<map_work>()> const& next) {
  auto& task = tasks_[index]->context();
  auto& mine = summaries_[index];
  task_context::thread_binding const binding{task};
  while (auto step = next()) {
    std::optional<device_semaphore::guard> holding;
    holding.emplace(semaphore_, task);
    auto const held = std::chrono::steady_clock::now();
    std::optional<memory_lease> more;
    std::size_t const need = step_bytes(step->bytes);
    std::size_t const base = task.base_lease();
    if (need > base) {
      more.emplace(task.request_lease(need - base));
    }
    step->run();
    more.reset();
    holding.reset();
    mine.device_seconds +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - held).count();
    ++mine.maps;
    mine.rows += step->rows;
    mine.bytes += step->bytes;
  }
}

void shuffle_map_tasks::run(std::function<std::optional<map_work>()> const& next) {
  SPILLWAY_EXPECTS(!tasks_.empty(), "the map tasks run once", logic_error);
  std::mutex taking;
  std::atomic<bool> failed{false};
  std::exception_ptr first_failure;
  std::mutex failure_mutex;
  auto const take = [&]() -> std::optional<map_work> {
    std::lock_guard lock(taking);
    return failed.load() ? std::nullopt : next();
  };
  std::latch all_done{static_cast<std::ptrdiff_t>(tasks_.size())};
  auto const guarded = [&](std::size_t index) {
    try {
      work(index, take);
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!first_failure) {
        first_failure = std::current_exception();
      }
      failed = true;
    }
    // Done with the steps, it waits on the others (not on memory): the OOM protocol must not
    // count it as a task that may still free memory, or a task blocked there would wait for it.
    auto& task                = tasks_[index]->context();
    summaries_[index].leases  = environment_.arbiter().statistics(task.id());
    auto const waiting_others = task.blocked();
    all_done.arrive_and_wait();
  };
  {
    // The caller's own task (a rank's) waits for the tasks meanwhile, likewise.
    task_context* const caller = task_context::current();
    std::optional<task_context::blocking_scope> waiting;
    if (caller != nullptr) {
      waiting.emplace(*caller);
    }
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
  }
  // Done, the tasks leave the device's OOM protocol and arbiter: registered, an idle task counts
  // as one that may still free memory, and a task blocked later (the rank's, writing the
  // partitions) would wait on it for ever. Their shards stay in the store, spillable.
  tasks_.clear();
  if (first_failure) {
    std::rethrow_exception(first_failure);
  }
}

}  // namespace spillway::cli
