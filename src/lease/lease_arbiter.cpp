#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/lease_arbiter.hpp>

#include <algorithm>
#include <string>
#include <vector>

namespace spillway {

lease_arbiter::lease_arbiter(std::size_t capacity, event_sink* events)
  : capacity_(capacity), events_(events) {}

lease_arbiter::~lease_arbiter() = default;

lease_arbiter::task_state& lease_arbiter::state_of(task_id task) {
  auto [found, inserted] = tasks_.try_emplace(task);
  // Epochs are unique over the arbiter's life, so that a lease of an earlier task with the same
  // id (unregistered since) never matches the new task's leases.
  if (inserted) {
    found->second.epoch = next_epoch_++;
  }
  return found->second;
}

void lease_arbiter::notify() {
  if (sleepers_ > 0) {
    changed_.notify_all();
  }
}

void lease_arbiter::register_task(task_id task, int priority, spill_hook hook) {
  scoped_lock lock{mutex_};
  auto& state    = state_of(task);
  state.priority = priority;
  state.hook     = std::move(hook);
  notify();
}

void lease_arbiter::set_spill_hook(task_id task, spill_hook hook) {
  scoped_lock lock{mutex_};
  state_of(task).hook = std::move(hook);
  notify();
}

void lease_arbiter::unregister_task(task_id task) {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  if (found == tasks_.end()) {
    return;
  }
  auto& state = found->second;
  drop_all_leases(task, state);
  if (state.waiting > 0) {
    // A thread of the task still waits here: fail it rather than pull the state from under it.
    state.cancelled = true;
  } else {
    tasks_.erase(found);
  }
  changed_.notify_all();
}

bool lease_arbiter::can_bypass_queue(int priority) const {
  // The head has the highest priority of every waiter, reclaims included.
  return queue_.empty() || queue_.begin()->first.negated_priority > -priority;
}

memory_lease lease_arbiter::grant(task_id task,
                                  task_state& state,
                                  std::size_t bytes,
                                  bool is_base,
                                  std::chrono::nanoseconds waited) {
  used_ += bytes + state.lent;
  if (state.lent > 0) {
    record_event(events_,
                 event{std::chrono::steady_clock::now(),
                       event_kind::LEASE_RECLAIMED,
                       task,
                       task_id{},
                       state.lent,
                       0,
                       {}});
    state.lent = 0;
  }
  peak_used_ = std::max(peak_used_, used_);
  state.leased += bytes;
  if (is_base) {
    state.base += bytes;
  }
  state.stats.granted_bytes += bytes;
  ++state.stats.grants;
  totals_.granted_bytes += bytes;
  ++totals_.grants;
  if (events_ != nullptr) {
    events_->record(event{std::chrono::steady_clock::now(),
                          event_kind::LEASE_GRANTED,
                          task,
                          task_id{},
                          bytes,
                          0,
                          waited});
  }
  return memory_lease{this, task, bytes, state.epoch, is_base};
}

std::optional<memory_lease> lease_arbiter::try_request_lease(task_id task, std::size_t bytes) {
  scoped_lock lock{mutex_};
  auto& state = state_of(task);
  if (state.cancelled || bytes > capacity_) {
    return std::nullopt;
  }
  if (bytes + state.lent > capacity_ - used_ || !can_bypass_queue(state.priority)) {
    return std::nullopt;
  }
  return grant(task, state, bytes, false, std::chrono::nanoseconds{0});
}

memory_lease lease_arbiter::request_lease(task_id task,
                                          std::size_t bytes,
                                          lease_request_options const& options) {
  scoped_lock lock{mutex_};
  auto& state = state_of(task);
  if (state.cancelled) {
    ++state.stats.cancelled;
    ++totals_.cancelled;
    throw cancelled_error("lease request of " + std::to_string(bytes) + " bytes by " +
                          to_string(task) + " refused: the task is cancelled");
  }
  std::size_t granted   = bytes;
  std::size_t const own = state.leased - state.lent;
  if (bytes > capacity_ || own + bytes > capacity_) {
    granted = capacity_ - std::min(own, capacity_);
    ++state.stats.whole_device;
    ++totals_.whole_device;
    log(log_level::WARN,
        to_string(task) + " requested a lease of " + std::to_string(bytes) + " bytes (" +
          format_bytes(bytes) + "), more than the device capacity of " + std::to_string(capacity_) +
          " bytes allows with the " + std::to_string(own) +
          " bytes it holds; treating it as a whole-device request: granting " +
          std::to_string(granted) + " bytes when the device is otherwise free of leases");
    record_event(events_,
                 event{std::chrono::steady_clock::now(),
                       event_kind::LEASE_WHOLE_DEVICE,
                       task,
                       task_id{},
                       bytes,
                       static_cast<std::int64_t>(granted),
                       {}});
  }
  if (granted + state.lent <= capacity_ - used_ && can_bypass_queue(state.priority)) {
    return grant(task, state, granted, options.is_base, std::chrono::nanoseconds{0});
  }
  auto const start = std::chrono::steady_clock::now();
  std::optional<std::chrono::steady_clock::time_point> deadline;
  if (options.timeout) {
    deadline = start + *options.timeout;
  }
  queue_key const key{-state.priority, 1, next_arrival_++};
  queue_.emplace(key, waiter{task, granted});
  ++state.stats.waits;
  ++totals_.waits;
  record_event(events_, event{start, event_kind::LEASE_WAIT_BEGIN, task, task_id{}, bytes, 0, {}});
  wait_in_queue(task, key, granted, deadline, bytes, lock);
  auto const waited   = std::chrono::steady_clock::now() - start;
  auto& granted_state = state_of(task);
  granted_state.stats.wait_time += waited;
  totals_.wait_time += waited;
  memory_lease lease = grant(task, granted_state, granted, options.is_base, waited);
  notify();
  return lease;
}

void lease_arbiter::wait_in_queue(task_id task,
                                  queue_key key,
                                  std::size_t need,
                                  std::optional<std::chrono::steady_clock::time_point> deadline,
                                  std::size_t requested,
                                  scoped_lock& lock) {
  ++state_of(task).waiting;
  notify();  // the head may now borrow from this task
  while (true) {
    auto& state = state_of(task);
    if (state.draining) {
      // A borrower runs this task's spill hook: what it frees is lent when the hook returns.
      // Leaving now (granted, cancelled or timed out) would let the task run on with bytes lent
      // behind its back. lend_to notifies when the hook is done.
      ++sleepers_;
      changed_.wait(lock.native());
      --sleepers_;
      continue;
    }
    if (state.cancelled) {
      queue_.erase(key);
      --state.waiting;
      ++state.stats.cancelled;
      ++totals_.cancelled;
      record_event(events_,
                   event{std::chrono::steady_clock::now(),
                         event_kind::LEASE_CANCELLED,
                         task,
                         task_id{},
                         requested,
                         0,
                         {}});
      notify();
      throw cancelled_error("lease request of " + std::to_string(requested) + " bytes by " +
                            to_string(task) + " cancelled while waiting");
    }
    if (deadline && std::chrono::steady_clock::now() >= *deadline) {
      queue_.erase(key);
      --state.waiting;
      ++state.stats.timed_out;
      ++totals_.timed_out;
      record_event(events_,
                   event{std::chrono::steady_clock::now(),
                         event_kind::LEASE_TIMED_OUT,
                         task,
                         task_id{},
                         requested,
                         0,
                         {}});
      notify();
      // The task stops waiting: bytes it lent meanwhile come back before it runs on.
      if (state.waiting == 0) {
        reclaim_lent(task, lock);
      }
      throw timeout_error("lease request of " + std::to_string(requested) + " bytes by " +
                          to_string(task) + " timed out; " + std::to_string(capacity_ - used_) +
                          " of " + std::to_string(capacity_) + " bytes free");
    }
    if (queue_.begin()->first == key) {
      std::size_t const wanted    = need + state.lent;
      std::size_t const available = capacity_ - used_;
      if (wanted <= available) {
        queue_.erase(key);
        --state.waiting;
        return;
      }
      if (lend_to(task, wanted - available, lock)) {
        continue;
      }
    }
    ++sleepers_;
    if (deadline) {
      changed_.wait_until(lock.native(), *deadline);
    } else {
      changed_.wait(lock.native());
    }
    --sleepers_;
  }
}

bool lease_arbiter::lend_to(task_id borrower, std::size_t shortfall, scoped_lock& lock) {
  struct candidate {
    task_id task;
    int priority;
  };
  // Never downward: a lender whose wait ends before the borrower returns waits for the borrower,
  // and a task must never wait on one of lower priority.
  int const borrower_priority = state_of(borrower).priority;
  auto const may_lend         = [&](task_id task, task_state const& state) {
    return task != borrower && state.priority <= borrower_priority && state.waiting > 0 &&
           !state.draining && state.hook && state.leased > state.lent;
  };
  std::vector<candidate> candidates;
  for (auto const& [task, state] : tasks_) {
    if (may_lend(task, state)) {
      candidates.push_back({task, state.priority});
    }
  }
  // Lowest priority first, then the newest (largest id) first.
  std::sort(candidates.begin(), candidates.end(), [](candidate const& a, candidate const& b) {
    return a.priority != b.priority ? a.priority < b.priority : b.task < a.task;
  });
  bool lent_any = false;
  for (auto const& [task, priority] : candidates) {
    if (shortfall == 0) {
      break;
    }
    auto found = tasks_.find(task);
    if (found == tasks_.end()) {
      continue;
    }
    auto& state = found->second;
    if (!may_lend(task, state)) {
      continue;
    }
    std::size_t const ask = std::min(shortfall, state.leased - state.lent);
    spill_hook const hook = state.hook;
    state.draining        = true;
    lock.unlock();
    std::size_t freed = 0;
    try {
      freed = hook(ask);
    } catch (std::exception const& error) {
      log(log_level::ERROR,
          "spill hook of " + to_string(task) + " failed while lending: " + error.what());
    }
    lock.lock();
    found = tasks_.find(task);
    if (found == tasks_.end()) {
      continue;
    }
    auto& after    = found->second;
    after.draining = false;
    freed          = std::min({freed, ask, after.leased - after.lent});
    if (freed > 0) {
      after.lent += freed;
      used_ -= freed;
      after.stats.lent_bytes += freed;
      totals_.lent_bytes += freed;
      state_of(borrower).stats.borrowed_bytes += freed;
      totals_.borrowed_bytes += freed;
      record_event(
        events_,
        event{
          std::chrono::steady_clock::now(), event_kind::LEASE_LENT, task, borrower, freed, 0, {}});
      shortfall -= std::min(shortfall, freed);
      lent_any = true;
    }
  }
  // Lenders that finished waiting during their hook block in end_waiting on `draining`.
  changed_.notify_all();
  return lent_any;
}

void lease_arbiter::release(task_id task,
                            std::size_t bytes,
                            std::uint64_t epoch,
                            bool is_base) noexcept {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  if (found == tasks_.end() || found->second.epoch != epoch) {
    return;
  }
  auto& state                = found->second;
  bytes                      = std::min(bytes, state.leased);
  std::size_t const physical = std::min(bytes, state.leased - state.lent);
  state.leased -= bytes;
  state.lent = std::min(state.lent, state.leased);
  if (is_base) {
    state.base -= std::min(state.base, bytes);
  }
  used_ -= physical;
  record_event(
    events_,
    event{
      std::chrono::steady_clock::now(), event_kind::LEASE_RETURNED, task, task_id{}, bytes, 0, {}});
  notify();
}

std::size_t lease_arbiter::total_lease(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found == tasks_.end() ? 0 : found->second.leased;
}

std::size_t lease_arbiter::base_lease(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found == tasks_.end() ? 0 : found->second.base;
}

std::size_t lease_arbiter::lent_bytes(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found == tasks_.end() ? 0 : found->second.lent;
}

void lease_arbiter::return_all_leases(task_id task) {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  if (found == tasks_.end()) {
    return;
  }
  drop_all_leases(task, found->second);
  notify();
}

void lease_arbiter::drop_all_leases(task_id task, task_state& state) {
  used_ -= state.leased - state.lent;
  if (state.leased > 0) {
    record_event(events_,
                 event{std::chrono::steady_clock::now(),
                       event_kind::LEASE_RETURNED,
                       task,
                       task_id{},
                       state.leased,
                       0,
                       {}});
  }
  state.leased = state.lent = state.base = 0;
  state.epoch                            = next_epoch_++;  // living leases become inert
}

void lease_arbiter::cancel(task_id task) {
  scoped_lock lock{mutex_};
  state_of(task).cancelled = true;
  changed_.notify_all();
}

bool lease_arbiter::is_cancelled(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found != tasks_.end() && found->second.cancelled;
}

void lease_arbiter::begin_waiting(task_id task) {
  scoped_lock lock{mutex_};
  ++state_of(task).waiting;
  notify();
}

void lease_arbiter::end_waiting(task_id task) {
  scoped_lock lock{mutex_};
  while (state_of(task).draining) {
    ++sleepers_;
    changed_.wait(lock.native());
    --sleepers_;
  }
  auto& state = state_of(task);
  if (state.waiting == 1) {
    // The last wait ends: take lent bytes back before the task computes again. The reclaim
    // itself waits, so the task still counts as waiting meanwhile.
    try {
      reclaim_lent(task, lock);
    } catch (...) {
      --state_of(task).waiting;
      throw;
    }
  }
  --state_of(task).waiting;
}

void lease_arbiter::reclaim_lent(task_id task, scoped_lock& lock) {
  auto& state = state_of(task);
  if (state.lent == 0 || state.cancelled) {
    return;
  }
  // Ahead of every request of its priority: the lender waits for its own bytes only. Requests of
  // higher priorities go first: the lender lent only to such tasks, and one that waits here for
  // more while it holds the lender's bytes borrows from the lender rather than wait behind it.
  queue_key const key{-state.priority, 0, next_arrival_++};
  queue_.emplace(key, waiter{task, 0});
  wait_in_queue(task, key, 0, std::nullopt, state.lent, lock);
  auto& after = state_of(task);
  used_ += after.lent;
  peak_used_ = std::max(peak_used_, used_);
  record_event(events_,
               event{std::chrono::steady_clock::now(),
                     event_kind::LEASE_RECLAIMED,
                     task,
                     task_id{},
                     after.lent,
                     0,
                     {}});
  after.lent = 0;
  notify();
}

std::size_t lease_arbiter::used_bytes() const {
  scoped_lock lock{mutex_};
  return used_;
}

std::size_t lease_arbiter::peak_used_bytes() const {
  scoped_lock lock{mutex_};
  return peak_used_;
}

std::size_t lease_arbiter::waiting_requests() const {
  scoped_lock lock{mutex_};
  return queue_.size();
}

std::size_t lease_arbiter::base_lease_for(std::size_t batch_bytes,
                                          std::size_t holders) const noexcept {
  std::size_t const share = capacity_ / std::max<std::size_t>(holders, 1);
  std::size_t const want =
    batch_bytes > share / BASE_LEASE_BATCHES ? share : BASE_LEASE_BATCHES * batch_bytes;
  return std::max<std::size_t>(1, std::min(share, want));
}

lease_statistics lease_arbiter::statistics(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = tasks_.find(task);
  return found == tasks_.end() ? lease_statistics{} : found->second.stats;
}

lease_statistics lease_arbiter::total_statistics() const {
  scoped_lock lock{mutex_};
  return totals_;
}

}  // namespace spillway
