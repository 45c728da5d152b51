/**
 * @file emulated_device_memory_resource.hpp
 * @brief The CPU backend's device: host memory behind a hard capacity.
 */
#pragma once

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_resource.hpp>

#include <atomic>
#include <cstddef>
#include <limits>
#include <memory>

namespace spillway {
namespace detail {
class block_cache;
}  // namespace detail

/**
 * @brief Serves `memory_kind::DEVICE` from host memory, never more than `capacity` bytes at once.
 *
 * Every policy that guards a real accelerator (leases, spilling, retry) runs against it on any
 * machine. An allocation that would exceed the capacity throws `out_of_memory` naming the
 * requested, available and capacity bytes; nothing is allocated in that case. Freed blocks of
 * 64 KiB and more stay mapped, up to twice the capacity or MAX_CACHED_BYTES (the smaller), and
 * are handed out again, so that reused memory is not cleared by the kernel each time, as on a
 * device: the host memory behind it is the live bytes plus at most that much (with a host
 * resource's cache shared, the two resources' live bytes plus the shared cache). Twice, not once:
 * a device that is full keeps handing out blocks of other sizes than the ones it freed (an
 * out-of-core sort of 50M string keys on a 512 MiB device took half the page faults and 7.5-7.6
 * instead of 8.3-8.5 s, for 0.23 GB more resident memory; 7843efc:docs/BENCHMARKS.md, "Eighth
 * run").
 * @note Thread-safe; the capacity check and the count are one atomic step.
 */
class emulated_device_memory_resource final : public memory_resource {
 public:
  /// The most bytes of freed blocks kept mapped for reuse (reuse of what an in-memory sort of
  /// 20M rows freed made it 5% faster with 4 GiB than with 1 GiB).
  static constexpr std::size_t MAX_CACHED_BYTES = std::size_t{4} << 30;

  /** @param capacity the most bytes outstanding at once; the default is unbounded */
  explicit emulated_device_memory_resource(
    std::size_t capacity = std::numeric_limits<std::size_t>::max());
  /**
   * @brief A device whose freed blocks and `host`'s go to one cache, which keeps as much as the
   * two caches would have kept apart (at most MAX_CACHED_BYTES). Both are the same host memory
   * here: a block one of them frees, the other takes without the kernel clearing its pages, such
   * as the scratch of a Parquet decode on the host for the next shards on the device, or a device
   * block spilled to the host tier for the next spill. Each still counts only its own live bytes.
   * @param host a resource with a cache (`cached_bytes` of both then report the shared cache)
   * @throws invalid_argument when `host` has no cache
   */
  emulated_device_memory_resource(std::size_t capacity, host_memory_resource& host);
  ~emulated_device_memory_resource() override;
  emulated_device_memory_resource(emulated_device_memory_resource const&)            = delete;
  emulated_device_memory_resource& operator=(emulated_device_memory_resource const&) = delete;

  [[nodiscard]] std::size_t capacity() const noexcept { return capacity_; }
  /** @return bytes outstanding now */
  [[nodiscard]] std::size_t used_bytes() const noexcept {
    return used_.load(std::memory_order_relaxed);
  }
  /** @return the most bytes ever outstanding at once */
  [[nodiscard]] std::size_t peak_bytes() const noexcept {
    return peak_.load(std::memory_order_relaxed);
  }
  /** @return bytes of freed blocks kept for reuse */
  [[nodiscard]] std::size_t cached_bytes() const;
  /** @return capacity minus used bytes */
  [[nodiscard]] std::size_t available_bytes() const noexcept { return capacity_ - used_bytes(); }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::DEVICE; }

  std::size_t const capacity_;
  /// Freed large blocks kept mapped, as a device keeps its memory.
  std::shared_ptr<detail::block_cache> cache_;
  std::atomic<std::size_t> used_{0};
  std::atomic<std::size_t> peak_{0};
};

}  // namespace spillway
