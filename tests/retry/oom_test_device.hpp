/**
 * @file oom_test_device.hpp
 * @brief A small emulated device wired like production (arbiter, OOM coordinator, retry
 * adaptor), an RAII allocation through any resource, and a minimal retryable input, for the
 * retry suites.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/retry_resource_adaptor.hpp>

#include <cstddef>
#include <utility>

namespace spillway::test {

/**
 * @brief An emulated device of `capacity` bytes behind a retry adaptor, with its coordinator and
 * arbiter. Allocate through `adaptor`; bind threads to tasks to attribute allocations.
 */
struct oom_test_device {
  explicit oom_test_device(std::size_t capacity)
    : device(capacity),
      arbiter(capacity),
      coordinator(&events),
      adaptor(device, coordinator, capacity, &events) {}

  event_log events;
  emulated_device_memory_resource device;
  lease_arbiter arbiter;
  oom_coordinator coordinator;
  retry_resource_adaptor adaptor;
};

/**
 * @brief `bytes` from `resource`, freed on destruction or `reset()` by the thread doing so (whose
 * task binding decides who freed them). Move-only.
 */
class device_allocation {
 public:
  device_allocation() = default;
  device_allocation(memory_resource& resource, std::size_t bytes)
    : resource_(&resource), bytes_(bytes), pointer_(resource.allocate(bytes)) {}
  ~device_allocation() { reset(); }
  device_allocation(device_allocation&& other) noexcept
    : resource_(other.resource_),
      bytes_(std::exchange(other.bytes_, 0)),
      pointer_(std::exchange(other.pointer_, nullptr)) {}
  device_allocation& operator=(device_allocation&& other) noexcept {
    if (this != &other) {
      reset();
      resource_ = other.resource_;
      bytes_    = std::exchange(other.bytes_, 0);
      pointer_  = std::exchange(other.pointer_, nullptr);
    }
    return *this;
  }
  device_allocation(device_allocation const&)            = delete;
  device_allocation& operator=(device_allocation const&) = delete;

  /** @brief Frees now; returns the bytes freed. */
  std::size_t reset() noexcept {
    std::size_t const freed = bytes_;
    if (resource_ != nullptr && (pointer_ != nullptr || bytes_ > 0)) {
      resource_->deallocate(pointer_, bytes_);
    }
    pointer_ = nullptr;
    bytes_   = 0;
    return freed;
  }
  [[nodiscard]] void* get() const noexcept { return pointer_; }
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

 private:
  memory_resource* resource_ = nullptr;
  std::size_t bytes_         = 0;
  void* pointer_             = nullptr;
};

/**
 * @brief A retryable input of rows `[begin, end)` with nothing behind it: `make_spillable` and
 * `materialize` are counted, `split_at` cuts the range.
 */
class range_input {
 public:
  explicit range_input(std::size_t rows) : begin_(0), end_(rows) {}
  range_input(std::size_t begin, std::size_t end) : begin_(begin), end_(end) {}

  [[nodiscard]] std::size_t rows() const noexcept { return end_ - begin_; }
  [[nodiscard]] std::size_t begin() const noexcept { return begin_; }
  [[nodiscard]] std::size_t end() const noexcept { return end_; }
  void make_spillable() noexcept { ++spillable_calls_; }
  void materialize() noexcept { ++materialize_calls_; }
  [[nodiscard]] std::size_t spillable_calls() const noexcept { return spillable_calls_; }
  [[nodiscard]] std::size_t materialize_calls() const noexcept { return materialize_calls_; }
  [[nodiscard]] std::pair<range_input, range_input> split_at(std::size_t row) const {
    return {range_input{begin_, begin_ + row}, range_input{begin_ + row, end_}};
  }

 private:
  std::size_t begin_;
  std::size_t end_;
  std::size_t spillable_calls_   = 0;
  std::size_t materialize_calls_ = 0;
};

}  // namespace spillway::test
