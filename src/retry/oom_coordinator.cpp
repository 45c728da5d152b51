#include <spillway/core/units.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/oom_errors.hpp>

#include <string>

namespace spillway {

char const* to_string(oom_state state) noexcept {
  switch (state) {
    case oom_state::RUNNING:
      return "running";
    case oom_state::BLOCKED:
      return "blocked";
    case oom_state::BUFN_THROW:
      return "bufn_throw";
    case oom_state::BUFN_WAIT:
      return "bufn_wait";
    case oom_state::RETRYING:
      return "retrying";
    case oom_state::SPLIT_THROW:
      return "split_throw";
  }
  return "unknown";
}

oom_coordinator::oom_coordinator(event_sink* events) : events_(events) {}

oom_coordinator::~oom_coordinator() = default;

void oom_coordinator::set_spill_function(spill_function spill) {
  scoped_lock lock{mutex_};
  spill_ = std::move(spill);
}

oom_coordinator::registration::registration(oom_coordinator& coordinator, task_context& task)
  : coordinator_(coordinator), task_(task) {
  coordinator_.register_task(task_);
  observer_ = task_.add_blocking_observer(
    [this](bool waiting) { coordinator_.set_waiting_elsewhere(task_.id(), waiting); });
}

oom_coordinator::registration::~registration() {
  task_.remove_blocking_observer(observer_);
  coordinator_.unregister_task(task_.id());
}

void oom_coordinator::register_task(task_context& task) {
  scoped_lock lock{mutex_};
  task_entry entry;
  entry.priority    = task.priority();
  tasks_[task.id()] = entry;
}

void oom_coordinator::unregister_task(task_id task) {
  scoped_lock lock{mutex_};
  tasks_.erase(task);
  resolve_deadlock();
  changed_.notify_all();
}

void oom_coordinator::set_waiting_elsewhere(task_id task, bool waiting) {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  if (found == tasks_.end()) {
    return;
  }
  found->second.waiting_elsewhere = waiting;
  if (waiting) {
    resolve_deadlock();
  }
}

void oom_coordinator::record(event_kind kind, task_id task, std::size_t bytes) {
  record_event(events_,
               event{std::chrono::steady_clock::now(), kind, task, task_id{}, bytes, 0, {}});
}

bool oom_coordinator::is_highest_priority(task_id task) const {
  auto const& mine = tasks_.at(task);
  for (auto const& [id, entry] : tasks_) {
    if (id == task || entry.waiting_elsewhere) {
      continue;
    }
    if (entry.priority > mine.priority || (entry.priority == mine.priority && id < task)) {
      return false;
    }
  }
  return true;
}

void oom_coordinator::resolve_deadlock() {
  task_id chosen{};
  task_entry* victim = nullptr;
  for (auto& [id, entry] : tasks_) {
    if (entry.waiting_elsewhere) {
      continue;
    }
    if (entry.state != oom_state::BLOCKED && entry.state != oom_state::BUFN_WAIT) {
      return;
    }
  }
  // Every task is BLOCKED, BUFN_WAIT or waiting elsewhere: nobody will free memory on their own.
  for (auto& [id, entry] : tasks_) {
    if (entry.state != oom_state::BLOCKED) {
      continue;
    }
    // The lowest priority, then the newest (largest id), rolls back.
    if (victim == nullptr || entry.priority < victim->priority ||
        (entry.priority == victim->priority && id > chosen)) {
      victim = &entry;
      chosen = id;
    }
  }
  if (victim != nullptr) {
    // Rolling back lets the victim's input spill. A victim that already rolled back with no
    // success anywhere since, with nobody of higher priority left to run, gains nothing from
    // another roll back: like a failing task holding unspillable bytes, it splits.
    bool const split = victim->rolled_back && victim->success_epoch_at_rollback == success_epoch_ &&
                       is_highest_priority(chosen);
    victim->state = split ? oom_state::SPLIT_THROW : oom_state::BUFN_THROW;
    ++stats_.deadlocks;
    changed_.notify_all();
    return;
  }
  for (auto& [id, entry] : tasks_) {
    if (entry.state != oom_state::BUFN_WAIT) {
      continue;
    }
    // Everyone rolled back: the highest priority, then the oldest (smallest id), splits.
    if (victim == nullptr || entry.priority > victim->priority ||
        (entry.priority == victim->priority && id < chosen)) {
      victim = &entry;
      chosen = id;
    }
  }
  if (victim != nullptr) {
    // Its first roll back since a success anywhere: nothing has tried to allocate since it freed
    // what it held and let its input spill, so it runs again once before it splits.
    victim->state      = victim->retry_owed ? oom_state::RETRYING : oom_state::SPLIT_THROW;
    victim->retry_owed = false;
    ++stats_.deadlocks;
    changed_.notify_all();
  }
}

bool oom_coordinator::on_allocation_failure(task_context const* task,
                                            std::size_t bytes,
                                            std::size_t attempt,
                                            std::size_t unspillable_bytes,
                                            std::size_t available_bytes,
                                            std::size_t capacity_bytes,
                                            std::optional<std::uint64_t> frees_before_attempt) {
  spill_function spill;
  {
    scoped_lock lock{mutex_};
    ++stats_.failures;
    spill = spill_;
  }
  task_id const id = task != nullptr ? task->id() : task_id{};
  if (spill) {
    std::size_t const freed = spill(bytes);
    if (freed > 0) {
      scoped_lock lock{mutex_};
      ++stats_.spills;
      stats_.spilled_bytes += freed;
      record(event_kind::OOM_SPILLED, id, freed);
      return true;
    }
  }
  if (task == nullptr) {
    return false;
  }
  scoped_lock lock{mutex_};
  auto found = tasks_.find(id);
  if (found == tasks_.end()) {
    return false;
  }
  if (frees_before_attempt && frees_.load() != *frees_before_attempt) {
    // Memory was freed after the failed attempt started (while it failed, or while we spilled):
    // that free's wake-up is already gone, so retry now rather than block or roll back for it.
    return true;
  }
  auto const sizes = [&] {
    return "requested " + std::to_string(bytes) + " bytes (" + format_bytes(bytes) +
           "), available " + std::to_string(available_bytes) + " bytes, capacity " +
           std::to_string(capacity_bytes) + " bytes, attempt " + std::to_string(attempt);
  };
  // Leaves this task's allocation with `Outcome` (retry_oom or split_and_retry_oom).
  auto const throw_outcome =
    [&]<typename Outcome>(
      task_entry& entry, std::size_t& counter, event_kind kind, char const* what) {
      entry.state         = oom_state::RUNNING;
      entry.foreign_frees = 0;
      ++counter;
      record(kind, id, bytes);
      throw Outcome(to_string(id) + ": out of device memory, " + what + ": " + sizes(),
                    id,
                    bytes,
                    available_bytes,
                    capacity_bytes,
                    attempt);
    };
  auto const throw_retry = [&](task_entry& entry) {
    throw_outcome.template operator()<retry_oom>(
      entry, stats_.retries, event_kind::OOM_RETRY, "roll back and retry");
  };
  auto const throw_split = [&](task_entry& entry) {
    throw_outcome.template operator()<split_and_retry_oom>(
      entry, stats_.splits, event_kind::OOM_SPLIT, "split the input");
  };
  task_entry& entry = found->second;
  if (unspillable_bytes > 0) {
    // Rolled back already, and no attempt anywhere succeeded since: another roll back may only
    // let the others fail in turn (two tasks whose inputs do not fit the device together take
    // turns forever). The oldest (highest priority) such task splits; the others roll back.
    if (is_highest_priority(id) && entry.rolled_back &&
        entry.success_epoch_at_rollback == success_epoch_) {
      throw_split(entry);
    }
    throw_retry(entry);
  }
  entry.resume_state =
    entry.state == oom_state::RETRYING ? oom_state::RETRYING : oom_state::RUNNING;
  entry.state         = oom_state::BLOCKED;
  entry.foreign_frees = 0;
  ++stats_.blocks;
  record(event_kind::OOM_BLOCKED, id, bytes);
  resolve_deadlock();
  while (true) {
    task_entry& current = tasks_.at(id);
    if (current.state == oom_state::BUFN_THROW) {
      throw_retry(current);
    }
    if (current.state == oom_state::SPLIT_THROW) {
      throw_split(current);
    }
    // Woken (back to RUNNING or RETRYING) by a free or a roll back: retry the allocation.
    if (current.state != oom_state::BLOCKED) {
      return true;
    }
    ++sleepers_;
    changed_.wait(lock.native());
    --sleepers_;
  }
}

void oom_coordinator::on_deallocation(std::size_t, task_context const* freer) {
  scoped_lock lock{mutex_};
  frees_.fetch_add(1);
  if (tasks_.empty()) {
    return;
  }
  task_id const freer_id = freer != nullptr ? freer->id() : task_id{};
  bool any_blocked       = false;
  task_entry* best       = nullptr;
  task_id best_id{};
  for (auto& [id, entry] : tasks_) {
    if (freer != nullptr && id == freer_id) {
      continue;
    }
    ++entry.foreign_frees;
    if (entry.state == oom_state::BLOCKED) {
      // Woken now, not when its thread runs: until then no deadlock may pick it as a victim.
      entry.state = entry.resume_state;
      any_blocked = true;
    }
    if (entry.state == oom_state::BUFN_WAIT &&
        (best == nullptr || entry.priority > best->priority ||
         (entry.priority == best->priority && id < best_id))) {
      best    = &entry;
      best_id = id;
    }
  }
  if (!any_blocked && best != nullptr) {
    best->state = oom_state::RETRYING;
  }
  if (sleepers_ > 0 && (any_blocked || best != nullptr)) {
    changed_.notify_all();
  }
}

resume_action oom_coordinator::wait_after_rollback(task_id task) {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  if (found == tasks_.end()) {
    return resume_action::RETRY;
  }
  task_entry& entry = found->second;
  entry.retry_owed  = !entry.rolled_back || entry.success_epoch_at_rollback != success_epoch_;
  entry.rolled_back = true;
  entry.success_epoch_at_rollback = success_epoch_;
  // The roll back made this task's input spillable: BLOCKED tasks retry their allocations, whose
  // spill can now free it, before anybody is chosen to roll back in turn.
  bool woke = false;
  for (auto& [id, other] : tasks_) {
    if (id != task && other.state == oom_state::BLOCKED) {
      other.state = other.resume_state;
      woke        = true;
    }
  }
  if (woke) {
    changed_.notify_all();
  }
  if (entry.foreign_frees > 0) {
    // Another task freed memory since this one failed: try again at once.
    entry.state = oom_state::RETRYING;
    return resume_action::RETRY;
  }
  entry.state = oom_state::BUFN_WAIT;
  resolve_deadlock();
  while (true) {
    task_entry& current = tasks_.at(task);
    if (current.state == oom_state::RETRYING) {
      return resume_action::RETRY;
    }
    if (current.state == oom_state::SPLIT_THROW) {
      current.state = oom_state::RUNNING;
      ++stats_.splits;
      record(event_kind::OOM_SPLIT, task, 0);
      return resume_action::SPLIT;
    }
    ++sleepers_;
    changed_.wait(lock.native());
    --sleepers_;
  }
}

void oom_coordinator::attempt_succeeded(task_id task) {
  scoped_lock lock{mutex_};
  ++success_epoch_;
  auto found = tasks_.find(task);
  if (found == tasks_.end()) {
    return;
  }
  found->second.rolled_back = false;
  found->second.state       = oom_state::RUNNING;
}

oom_state oom_coordinator::state(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found == tasks_.end() ? oom_state::RUNNING : found->second.state;
}

std::uint64_t oom_coordinator::free_count() const noexcept { return frees_.load(); }

oom_statistics oom_coordinator::statistics() const {
  scoped_lock lock{mutex_};
  return stats_;
}

void oom_coordinator::testing_wait_for_state(task_id task, oom_state wanted) const {
  scoped_lock lock{mutex_};
  while (true) {
    auto found = tasks_.find(task);
    if (found != tasks_.end() && found->second.state == wanted) {
      return;
    }
    ++sleepers_;
    changed_.wait_for(lock.native(), std::chrono::milliseconds{5});
    --sleepers_;
  }
}

}  // namespace spillway
