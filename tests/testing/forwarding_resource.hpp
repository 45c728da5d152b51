/**
 * @file forwarding_resource.hpp
 * @brief The base of test resources that change one call and hand the rest to an upstream.
 */
#pragma once

#include <spillway/memory/memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>

namespace spillway::testing {

/**
 * @brief Forwards allocations, deallocations and the memory kind to `upstream`; a test resource
 * derives from it and overrides what it changes (usually `do_allocate`, calling `upstream()`).
 * @note Thread-safe as far as the upstream is.
 */
class forwarding_resource : public memory_resource {
 public:
  explicit forwarding_resource(resource_ref upstream) noexcept : upstream_(upstream) {}

 protected:
  /** @return where the memory comes from */
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    return upstream_.allocate(bytes, alignment, stream);
  }
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    upstream_.deallocate(pointer, bytes, alignment, stream);
  }
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

 private:
  resource_ref upstream_;
};

}  // namespace spillway::testing
