/**
 * @file retry_resource_adaptor.hpp
 * @brief The device resource's failure path: failure callback → spill → retry allocation →
 * the OOM protocol (block, retry_oom, split_and_retry_oom), plus OOM injection and retry
 * coverage.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/oom_injection.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <unordered_map>

namespace spillway {

/**
 * @brief Wraps the device resource so that an allocation failure runs the protocol of
 * `oom_coordinator` for the task bound to the allocating thread (`task_context::current()`).
 *
 * It also attributes each allocation to that task: bytes a task allocated and has not freed or
 * handed to the spill store (`release_ownership`) are its unspillable bytes, which decide
 * whether it may block. Failures are injected here (SPILLWAY_INJECT_OOM or
 * `testing_inject_oom`), and allocations outside retry blocks are recorded when retry coverage
 * is on.
 * @note Thread-safe.
 */
class retry_resource_adaptor final : public memory_resource {
 public:
  /**
   * @param upstream the device resource; must outlive the adaptor
   * @param coordinator the device's protocol; must outlive the adaptor
   * @param capacity_bytes the device capacity, for error messages (0 when unknown)
   * @param events where injected failures are recorded (OOM_INJECTED); may be null
   */
  retry_resource_adaptor(resource_ref upstream,
                         oom_coordinator& coordinator,
                         std::size_t capacity_bytes = 0,
                         event_sink* events         = nullptr);
  ~retry_resource_adaptor() override;

  /** @return bytes `task` allocated through this adaptor and still owns */
  [[nodiscard]] std::size_t unspillable_bytes(task_id task) const;
  /** @brief The buffer at `pointer` now belongs to the spill store: it no longer pins its task. */
  void release_ownership(void* pointer) noexcept;
  /** @brief Attributes the buffer at `pointer` to `task` again (it was unspilled and pinned). */
  void take_ownership(void* pointer, task_id task) noexcept;

  /** @brief Injects failures as `injection` says; empty turns injection off. */
  void testing_inject_oom(std::optional<oom_injection> injection);
  /** @return failures injected so far */
  [[nodiscard]] std::size_t injected_failures() const;

 private:
  class injecting_upstream;

  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }
  std::optional<injected_oom_kind> take_injection(task_context const* task);

  struct owner {
    task_id task;
    std::size_t bytes;
    bool owned;
  };

  resource_ref upstream_;
  oom_coordinator& coordinator_;
  std::size_t const capacity_;
  event_sink* const events_;
  std::unique_ptr<injecting_upstream> injector_;
  std::unique_ptr<failure_callback_resource_adaptor> failure_path_;

  mutable mutex mutex_;
  std::unordered_map<void*, owner> owners_ SPILLWAY_GUARDED_BY(mutex_);
  std::unordered_map<task_id, std::size_t> unspillable_ SPILLWAY_GUARDED_BY(mutex_);
  std::optional<oom_injection> injection_ SPILLWAY_GUARDED_BY(mutex_);
  std::unordered_map<task_id, std::size_t> injection_seen_ SPILLWAY_GUARDED_BY(mutex_);
  std::size_t injected_ SPILLWAY_GUARDED_BY(mutex_) = 0;
};

}  // namespace spillway
