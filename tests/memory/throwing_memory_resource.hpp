/**
 * @file throwing_memory_resource.hpp
 * @brief A test resource that forwards to an upstream until told to throw `out_of_memory`.
 *
 * Adaptors that count bytes must roll their counts back when upstream throws (STYLE habit 7);
 * this resource makes that path reachable on demand and deterministically.
 */
#pragma once

#include "testing/forwarding_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <atomic>
#include <cstddef>
#include <limits>
#include <string>

namespace spillway::test {

/**
 * @brief Forwards to `upstream`, except that the next `fail_next(count)` allocations throw
 * `out_of_memory("injected out_of_memory #N: requested B bytes", B)`, N counting from 1.
 * @note Thread-safe. The resource must outlive what it hands out, as any resource.
 */
class throwing_memory_resource final : public testing::forwarding_resource {
 public:
  /** @brief Fails every allocation. */
  static constexpr std::size_t ALWAYS = std::numeric_limits<std::size_t>::max();

  /** @param upstream where successful allocations come from */
  explicit throwing_memory_resource(resource_ref upstream) noexcept
    : forwarding_resource(upstream) {}

  /** @brief Makes the next `count` allocations throw (`ALWAYS`: every allocation). */
  void fail_next(std::size_t count) noexcept { to_fail_.store(count, std::memory_order_relaxed); }

  /** @return how many allocations have thrown so far */
  [[nodiscard]] std::size_t failures() const noexcept {
    return failures_.load(std::memory_order_relaxed);
  }

  /** @return the message of the `number`-th injected failure (from 1) for `bytes` */
  [[nodiscard]] static std::string message(std::size_t number, std::size_t bytes) {
    return "injected out_of_memory #" + std::to_string(number) + ": requested " +
           std::to_string(bytes) + " bytes";
  }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    std::size_t remaining = to_fail_.load(std::memory_order_relaxed);
    while (remaining > 0) {
      std::size_t const next = remaining == ALWAYS ? ALWAYS : remaining - 1;
      if (to_fail_.compare_exchange_weak(remaining, next, std::memory_order_relaxed)) {
        std::size_t const number = failures_.fetch_add(1, std::memory_order_relaxed) + 1;
        throw out_of_memory(message(number, bytes), bytes);
      }
    }
    return upstream().allocate(bytes, alignment, stream);
  }

  std::atomic<std::size_t> to_fail_{0};
  std::atomic<std::size_t> failures_{0};
};

}  // namespace spillway::test
