/**
 * @file arrow_memory_pool.hpp
 * @brief An `arrow::MemoryPool` over a spillway resource, so Arrow's allocations count against
 * the budgets of that resource.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <arrow/memory_pool.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace spillway::detail {

/**
 * @brief Serves Arrow's allocations from `resource`; an allocation the resource refuses is an
 * `arrow::Status::OutOfMemory` naming the size.
 * @note Thread-safe when the resource is. Must outlive everything Arrow allocated from it.
 */
class arrow_memory_pool final : public arrow::MemoryPool {
 public:
  explicit arrow_memory_pool(resource_ref resource) noexcept : resource_(resource) {}

  arrow::Status Allocate(int64_t size, int64_t alignment, uint8_t** out) override;
  arrow::Status Reallocate(int64_t old_size,
                           int64_t new_size,
                           int64_t alignment,
                           uint8_t** pointer) override;
  void Free(uint8_t* buffer, int64_t size, int64_t alignment) override;

  [[nodiscard]] int64_t bytes_allocated() const override { return bytes_allocated_.load(); }
  [[nodiscard]] int64_t max_memory() const override { return max_memory_.load(); }
  [[nodiscard]] int64_t total_bytes_allocated() const override { return total_bytes_.load(); }
  [[nodiscard]] int64_t num_allocations() const override { return num_allocations_.load(); }
  [[nodiscard]] std::string backend_name() const override { return "spillway"; }

 private:
  resource_ref resource_;
  std::atomic<int64_t> bytes_allocated_{0};
  std::atomic<int64_t> max_memory_{0};
  std::atomic<int64_t> total_bytes_{0};
  std::atomic<int64_t> num_allocations_{0};
};

}  // namespace spillway::detail
