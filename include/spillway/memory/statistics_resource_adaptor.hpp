/**
 * @file statistics_resource_adaptor.hpp
 * @brief Counts bytes and allocations through an upstream resource: current, peak and total.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace spillway {

/** @brief A snapshot of a statistics adaptor's counters. */
struct allocation_statistics {
  std::size_t current_bytes = 0;  ///< bytes outstanding now
  std::size_t peak_bytes    = 0;  ///< the most bytes outstanding at any instant
  std::size_t total_bytes   = 0;  ///< bytes ever allocated
  std::size_t current_count = 0;  ///< allocations outstanding now
  std::size_t peak_count    = 0;  ///< the most allocations outstanding at any instant
  std::size_t total_count   = 0;  ///< allocations ever made
};

/**
 * @brief Records current, peak and total bytes and counts of successful allocations.
 *
 * The counters are exact under concurrency: each allocation adds to the current value with one
 * atomic step and raises the peak to the value that step produced, so the peak is the maximum of
 * the sequence of values the counter actually took. The count rises after the upstream allocated
 * and falls before it frees, so it is never above the upstream's outstanding bytes: the peak of
 * a bounded upstream is never above its capacity.
 * @note Thread-safe. A failed upstream allocation is not counted.
 */
class statistics_resource_adaptor final : public memory_resource {
 public:
  explicit statistics_resource_adaptor(resource_ref upstream) noexcept : upstream_(upstream) {}

  /** @return the counters now; each field is exact, the fields are read one after another */
  [[nodiscard]] allocation_statistics statistics() const noexcept;
  /** @brief Sets the peaks to the current values. */
  void reset_peaks() noexcept;
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  resource_ref upstream_;
  std::atomic<std::size_t> current_bytes_{0};
  std::atomic<std::size_t> peak_bytes_{0};
  std::atomic<std::size_t> total_bytes_{0};
  std::atomic<std::size_t> current_count_{0};
  std::atomic<std::size_t> peak_count_{0};
  std::atomic<std::size_t> total_count_{0};
};

}  // namespace spillway
