/**
 * @file limiting_resource_adaptor.hpp
 * @brief Caps the bytes outstanding through an upstream resource.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <atomic>
#include <cstddef>

namespace spillway {

/**
 * @brief Forwards to `upstream` while the bytes outstanding through it stay within `limit`.
 *
 * A request of exactly the remaining bytes succeeds; one byte more throws `out_of_memory` naming
 * requested, available and limit bytes. Bytes are counted as requested (not rounded).
 * @note Thread-safe. If upstream throws, the count is rolled back.
 */
class limiting_resource_adaptor final : public memory_resource {
 public:
  limiting_resource_adaptor(resource_ref upstream, std::size_t limit) noexcept
    : upstream_(upstream), limit_(limit) {}

  [[nodiscard]] std::size_t limit() const noexcept { return limit_; }
  [[nodiscard]] std::size_t allocated_bytes() const noexcept {
    return allocated_.load(std::memory_order_relaxed);
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
  std::size_t const limit_;
  std::atomic<std::size_t> allocated_{0};
};

}  // namespace spillway
