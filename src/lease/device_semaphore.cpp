#include <spillway/core/error.hpp>
#include <spillway/lease/device_semaphore.hpp>

#include <algorithm>
#include <chrono>
#include <string>

namespace spillway {

device_semaphore::device_semaphore(lease_arbiter& arbiter,
                                   std::size_t max_tasks,
                                   std::size_t base_lease_bytes,
                                   event_sink* events)
  : arbiter_(arbiter), max_tasks_(max_tasks), base_lease_bytes_(base_lease_bytes), events_(events) {
  SPILLWAY_EXPECTS(max_tasks_ > 0, "device_semaphore needs at least one slot", invalid_argument);
}

device_semaphore::~device_semaphore() = default;

void device_semaphore::acquire(task_context& task) {
  task_id const id = task.id();
  auto const start = std::chrono::steady_clock::now();
  {
    scoped_lock lock{mutex_};
    if (auto found = holders_.find(id); found != holders_.end()) {
      ++found->second.count;
      return;
    }
  }
  bool slot_taken = false;
  try {
    // Waiting for a slot is waiting on something other than the arbiter.
    task_context::blocking_scope const waiting{task};
    scoped_lock lock{mutex_};
    std::uint64_t const ticket = next_ticket_++;
    queue_.push_back(ticket);
    while (!(queue_.front() == ticket && slots_taken_ < max_tasks_)) {
      // Ask the arbiter without holding our mutex: the semaphore never nests the arbiter's lock
      // inside its own (the arbiter calls out, to loggers and event sinks, under its lock).
      lock.unlock();
      bool const cancelled = arbiter_.is_cancelled(id);
      lock.lock();
      if (cancelled) {
        queue_.erase(std::find(queue_.begin(), queue_.end(), ticket));
        changed_.notify_all();
        throw cancelled_error(to_string(id) + " cancelled while waiting for the device semaphore");
      }
      // The slot may have been freed while we asked (its notification is gone).
      if (queue_.front() == ticket && slots_taken_ < max_tasks_) {
        break;
      }
      // The timed wait only lets a cancelled task notice; it never decides who goes next.
      changed_.wait_for(lock.native(), std::chrono::milliseconds{20});
    }
    queue_.pop_front();
    ++slots_taken_;
    holders_[id].count = 1;
    slot_taken         = true;
    changed_.notify_all();
  } catch (...) {
    // Leaving the scope takes lent bytes back first, and that wait fails when the task is
    // cancelled: the slot taken just before must not stay taken.
    if (slot_taken) {
      give_up_slot(id);
    }
    throw;
  }
  memory_lease base;
  try {
    lease_request_options options;
    options.is_base = true;
    base            = arbiter_.request_lease(id, base_lease_bytes_, options);
  } catch (...) {
    give_up_slot(id);
    throw;
  }
  {
    scoped_lock lock{mutex_};
    holders_[id].base = std::move(base);
  }
  task.semaphore_ = this;
  record_event(events_,
               event{std::chrono::steady_clock::now(),
                     event_kind::SEMAPHORE_ACQUIRED,
                     id,
                     task_id{},
                     base_lease_bytes_,
                     0,
                     std::chrono::steady_clock::now() - start});
}

void device_semaphore::give_up_slot(task_id task) {
  scoped_lock lock{mutex_};
  holders_.erase(task);
  --slots_taken_;
  changed_.notify_all();
}

void device_semaphore::release(task_context& task) {
  task_id const id = task.id();
  memory_lease base;
  {
    scoped_lock lock{mutex_};
    auto found = holders_.find(id);
    SPILLWAY_EXPECTS(found != holders_.end(),
                     to_string(id) + " released the device semaphore it does not hold",
                     logic_error);
    if (--found->second.count > 0) {
      return;
    }
    base = std::move(found->second.base);
    holders_.erase(found);
    --slots_taken_;
    changed_.notify_all();
  }
  task.semaphore_ = nullptr;
  base.close();
  record_event(
    events_,
    event{
      std::chrono::steady_clock::now(), event_kind::SEMAPHORE_RELEASED, id, task_id{}, 0, 0, {}});
}

std::size_t device_semaphore::holders() const {
  scoped_lock lock{mutex_};
  return slots_taken_;
}

std::size_t device_semaphore::waiters() const {
  scoped_lock lock{mutex_};
  return queue_.size();
}

std::size_t device_semaphore::hold_count(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = holders_.find(task);
  return found == holders_.end() ? 0 : found->second.count;
}

}  // namespace spillway
