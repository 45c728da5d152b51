#include <spillway/core/logging.hpp>
#include <spillway/lease/device_semaphore.hpp>
#include <spillway/lease/task_context.hpp>

#include <exception>

namespace spillway {
namespace {

thread_local task_context* current_task = nullptr;

}  // namespace

task_context::task_context(lease_arbiter& arbiter, task_id id, int priority)
  : arbiter_(arbiter), id_(id), priority_(priority) {
  arbiter_.register_task(id_, priority_);
}

task_context::~task_context() {
  try {
    while (semaphore_ != nullptr && semaphore_->hold_count(id_) > 0) {
      semaphore_->release(*this);
    }
  } catch (std::exception const& error) {
    log(log_level::ERROR,
        to_string(id_) + ": releasing the device semaphore failed: " + error.what());
  }
  arbiter_.unregister_task(id_);
}

memory_lease task_context::request_lease(std::size_t bytes, lease_request_options const& options) {
  return arbiter_.request_lease(id_, bytes, options);
}

void task_context::set_spill_hook(spill_hook hook) {
  arbiter_.set_spill_hook(id_, std::move(hook));
}

void task_context::cancel() { arbiter_.cancel(id_); }

std::size_t task_context::add_blocking_observer(blocking_observer observer) {
  std::lock_guard lock{observers_mutex_};
  observers_.emplace_back(next_observer_, std::move(observer));
  return next_observer_++;
}

void task_context::remove_blocking_observer(std::size_t id) {
  std::lock_guard lock{observers_mutex_};
  std::erase_if(observers_, [id](auto const& entry) { return entry.first == id; });
}

void task_context::notify_blocking(bool waiting) {
  std::vector<blocking_observer> observers;
  {
    std::lock_guard lock{observers_mutex_};
    blocking_depth_ += waiting ? 1 : -1;
    bool const edge = waiting ? blocking_depth_ == 1 : blocking_depth_ == 0;
    if (!edge) {
      return;
    }
    for (auto const& [id, observer] : observers_) {
      observers.push_back(observer);
    }
  }
  for (auto const& observer : observers) {
    observer(waiting);
  }
}

task_context::blocking_scope::blocking_scope(task_context& task)
  : task_(task), uncaught_(std::uncaught_exceptions()) {
  task_.arbiter_.begin_waiting(task_.id_);
  task_.notify_blocking(true);
}

task_context::blocking_scope::~blocking_scope() noexcept(false) {
  task_.notify_blocking(false);
  if (std::uncaught_exceptions() > uncaught_) {
    // Unwinding: never throw from here; a cancelled or failing task gives its leases up anyway.
    try {
      task_.arbiter_.end_waiting(task_.id_);
    } catch (std::exception const& error) {
      log(log_level::WARN, to_string(task_.id_) + ": " + error.what());
    }
    return;
  }
  task_.arbiter_.end_waiting(task_.id_);
}

task_context::thread_binding::thread_binding(task_context& task) noexcept
  : previous_(current_task) {
  current_task = &task;
}

task_context::thread_binding::~thread_binding() { current_task = previous_; }

task_context::detached_scope::detached_scope() noexcept : previous_(current_task) {
  current_task = nullptr;
}

task_context::detached_scope::~detached_scope() { current_task = previous_; }

task_context* task_context::current() noexcept { return current_task; }

}  // namespace spillway
