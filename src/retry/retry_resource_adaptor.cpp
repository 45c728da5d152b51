#include <spillway/core/logging.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/retry/retry_resource_adaptor.hpp>

#include <cstdint>
#include <cstdlib>
#include <string>

namespace spillway {
namespace {

/// Set by the adaptor when the next upstream attempt on this thread must fail (kind=oom).
thread_local bool fail_next_upstream_attempt = false;
/// Sizes of the last upstream failure on this thread, for the protocol's messages.
thread_local std::size_t last_available = 0;
thread_local std::size_t last_capacity  = 0;
/// The coordinator's free count before the current upstream attempt on this thread.
thread_local std::uint64_t frees_before_attempt = 0;

}  // namespace

/// Below the failure callback: injects `kind=oom` failures and remembers failure sizes.
class retry_resource_adaptor::injecting_upstream final : public memory_resource {
 public:
  injecting_upstream(resource_ref upstream, oom_coordinator& coordinator, std::size_t capacity)
    : upstream_(upstream), coordinator_(coordinator), capacity_(capacity) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    frees_before_attempt = coordinator_.free_count();
    if (fail_next_upstream_attempt) {
      fail_next_upstream_attempt = false;
      last_available             = 0;
      last_capacity              = capacity_;
      throw out_of_memory("injected out of memory: requested " + std::to_string(bytes) + " bytes",
                          bytes,
                          0,
                          capacity_);
    }
    try {
      return upstream_.allocate(bytes, alignment, stream);
    } catch (out_of_memory const& error) {
      last_available = error.available_bytes();
      last_capacity  = error.capacity_bytes() != 0 ? error.capacity_bytes() : capacity_;
      throw;
    }
  }
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    upstream_.deallocate(pointer, bytes, alignment, stream);
  }
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  resource_ref upstream_;
  oom_coordinator& coordinator_;
  std::size_t capacity_;
};

retry_resource_adaptor::retry_resource_adaptor(resource_ref upstream,
                                               oom_coordinator& coordinator,
                                               std::size_t capacity_bytes,
                                               event_sink* events)
  : upstream_(upstream),
    coordinator_(coordinator),
    capacity_(capacity_bytes),
    events_(events),
    injector_(std::make_unique<injecting_upstream>(upstream, coordinator, capacity_bytes)) {
  failure_path_ = std::make_unique<failure_callback_resource_adaptor>(
    *injector_, [this](std::size_t bytes, std::size_t attempt) {
      task_context const* task = task_context::current();
      std::size_t const held   = task != nullptr ? unspillable_bytes(task->id()) : 0;
      return coordinator_.on_allocation_failure(
        task, bytes, attempt, held, last_available, last_capacity, frees_before_attempt);
    });
  if (char const* text = std::getenv("SPILLWAY_INJECT_OOM"); text != nullptr && *text != '\0') {
    injection_ = parse_oom_injection(text);
    log(log_level::WARN, "injecting out-of-memory failures: " + to_string(*injection_));
  }
}

retry_resource_adaptor::~retry_resource_adaptor() = default;

std::optional<injected_oom_kind> retry_resource_adaptor::take_injection(task_context const* task) {
  scoped_lock lock{mutex_};
  if (!injection_) {
    return std::nullopt;
  }
  task_id const id = task != nullptr ? task->id() : task_id{};
  if (injection_->task && *injection_->task != id) {
    return std::nullopt;
  }
  std::size_t const index = injection_seen_[id]++;
  if (index < injection_->skip || index >= injection_->skip + injection_->count) {
    return std::nullopt;
  }
  ++injected_;
  return injection_->kind;
}

void* retry_resource_adaptor::do_allocate(std::size_t bytes,
                                          std::size_t alignment,
                                          stream_view stream) {
  task_context const* task = task_context::current();
  task_id const id         = task != nullptr ? task->id() : task_id{};
  // A thread of no task is outside every retry block too (recorded as task 0).
  detail::note_allocation_for_coverage(id, bytes);
  if (auto const injected = take_injection(task)) {
    record_event(events_,
                 event{std::chrono::steady_clock::now(),
                       event_kind::OOM_INJECTED,
                       id,
                       task_id{},
                       bytes,
                       static_cast<std::int64_t>(*injected),
                       {}});
    switch (*injected) {
      case injected_oom_kind::RETRY:
        throw retry_oom("injected retry_oom for " + to_string(id) + ": requested " +
                          std::to_string(bytes) + " bytes",
                        id,
                        bytes,
                        0,
                        capacity_,
                        1);
      case injected_oom_kind::SPLIT:
        throw split_and_retry_oom("injected split_and_retry_oom for " + to_string(id) +
                                    ": requested " + std::to_string(bytes) + " bytes",
                                  id,
                                  bytes,
                                  0,
                                  capacity_,
                                  1);
      case injected_oom_kind::OOM:
        fail_next_upstream_attempt = true;
        break;
    }
  }
  void* pointer = nullptr;
  try {
    pointer = failure_path_->allocate(bytes, alignment, stream);
  } catch (...) {
    fail_next_upstream_attempt = false;
    throw;
  }
  if (pointer != nullptr && task != nullptr) {
    try {
      scoped_lock lock{mutex_};
      owners_.emplace(pointer, owner{id, bytes, true});
      unspillable_[id] += bytes;
    } catch (...) {
      failure_path_->deallocate(pointer, bytes, alignment, stream);
      throw;
    }
  }
  return pointer;
}

void retry_resource_adaptor::do_deallocate(void* pointer,
                                           std::size_t bytes,
                                           std::size_t alignment,
                                           stream_view stream) noexcept {
  if (pointer != nullptr) {
    // Forget the owner before the memory goes back: once it is back, another thread may be
    // handed the same address, and its record must not meet (or be erased as) this stale one.
    scoped_lock lock{mutex_};
    auto found = owners_.find(pointer);
    if (found != owners_.end()) {
      if (found->second.owned) {
        auto& held = unspillable_[found->second.task];
        held -= std::min(held, found->second.bytes);
      }
      owners_.erase(found);
    }
  }
  failure_path_->deallocate(pointer, bytes, alignment, stream);
  // Freeing nothing frees no memory: it must not wake blocked tasks or release rolled-back ones.
  if (pointer != nullptr && bytes > 0) {
    coordinator_.on_deallocation(bytes, task_context::current());
  }
}

std::size_t retry_resource_adaptor::unspillable_bytes(task_id task) const {
  scoped_lock lock{mutex_};
  auto found = unspillable_.find(task);
  return found == unspillable_.end() ? 0 : found->second;
}

void retry_resource_adaptor::release_ownership(void* pointer) noexcept {
  scoped_lock lock{mutex_};
  auto found = owners_.find(pointer);
  if (found == owners_.end() || !found->second.owned) {
    return;
  }
  auto& held = unspillable_[found->second.task];
  held -= std::min(held, found->second.bytes);
  found->second.owned = false;
}

void retry_resource_adaptor::take_ownership(void* pointer, task_id task) noexcept {
  scoped_lock lock{mutex_};
  auto found = owners_.find(pointer);
  if (found == owners_.end()) {
    return;
  }
  if (found->second.owned) {
    auto& held = unspillable_[found->second.task];
    held -= std::min(held, found->second.bytes);
  }
  found->second.task  = task;
  found->second.owned = true;
  unspillable_[task] += found->second.bytes;
}

void retry_resource_adaptor::testing_inject_oom(std::optional<oom_injection> injection) {
  scoped_lock lock{mutex_};
  injection_ = injection;
  injection_seen_.clear();
}

std::size_t retry_resource_adaptor::injected_failures() const {
  scoped_lock lock{mutex_};
  return injected_;
}

}  // namespace spillway
