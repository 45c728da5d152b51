/**
 * @file failure_callback_resource_adaptor.hpp
 * @brief On out-of-memory, asks a callback to free memory (spill) and retries while it says so.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <atomic>
#include <cstddef>
#include <functional>

namespace spillway {

/**
 * @brief Called when an allocation of `bytes` failed for the `attempt`-th time (from 1).
 * @return true to retry the allocation (the callback freed memory or waited), false to give up
 */
using allocation_failure_callback = std::function<bool(std::size_t bytes, std::size_t attempt)>;

/**
 * @brief Forwards to `upstream`; when it throws `out_of_memory`, calls the callback and retries
 * while the callback returns true. When the callback returns false the last `out_of_memory` is
 * rethrown unchanged.
 * @note Thread-safe if the callback is. The callback may allocate through other resources but
 * must not allocate through this adaptor.
 */
class failure_callback_resource_adaptor final : public memory_resource {
 public:
  failure_callback_resource_adaptor(resource_ref upstream, allocation_failure_callback callback)
    : upstream_(upstream), callback_(std::move(callback)) {}

  /** @return how many times the callback has been called */
  [[nodiscard]] std::size_t callback_calls() const noexcept {
    return callback_calls_.load(std::memory_order_relaxed);
  }
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  resource_ref upstream_;
  allocation_failure_callback callback_;
  std::atomic<std::size_t> callback_calls_{0};
};

}  // namespace spillway
