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
#include <mutex>
#include <string>
#include <unordered_map>

namespace spillway::detail {

/**
 * @brief Serves Arrow's allocations from `resource`; an allocation the resource refuses is an
 * `arrow::Status::OutOfMemory` naming the size.
 *
 * A reallocation to a size between half the block's allocated size and all of it stays in the
 * block: Arrow shrinks every builder's buffer to fit when it finishes (each encoded page, each
 * decoded string column), and moving it copied the whole buffer into fresh memory. The block's
 * size is kept aside until it is freed (Arrow then passes the smaller size), and it counts as
 * allocated in full: a buffer shrunk in place holds up to twice its bytes until it goes.
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
  /// The size `block` was allocated with (`size` unless it was reallocated in place).
  [[nodiscard]] int64_t allocated_size(uint8_t* block, int64_t size);
  /// Forgets `block`'s size kept aside and returns the size it was allocated with.
  int64_t take_allocated_size(uint8_t* block, int64_t size) noexcept;

  resource_ref resource_;
  std::mutex kept_mutex_;
  std::unordered_map<uint8_t*, int64_t> kept_;  ///< block reallocated in place -> its size
  std::atomic<std::size_t> kept_count_{0};      ///< kept_.size(), read without the lock
  std::atomic<int64_t> bytes_allocated_{0};
  std::atomic<int64_t> max_memory_{0};
  std::atomic<int64_t> total_bytes_{0};
  std::atomic<int64_t> num_allocations_{0};
};

}  // namespace spillway::detail
