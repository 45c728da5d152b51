/**
 * @file resource_ref.hpp
 * @brief A non-owning, copyable reference to a memory resource.
 */
#pragma once

#include <spillway/memory/memory_resource.hpp>

#include <concepts>
#include <cstddef>

namespace spillway {

/**
 * @brief Refers to a `memory_resource` without owning it.
 *
 * Implicitly constructible from any resource, so a function taking `resource_ref` accepts a pool,
 * an adaptor or another ref. Never null.
 * @note The referenced resource must outlive every ref and every allocation made through it.
 */
class resource_ref {
 public:
  /** @brief Refers to `resource`. */
  template <typename Resource>
  requires std::derived_from<Resource, memory_resource> resource_ref(Resource& resource)
  noexcept  // NOLINT(google-explicit-constructor)
    : resource_(&resource) {}

  /** @see memory_resource::allocate */
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = DEFAULT_ALIGNMENT,
                               stream_view stream    = default_stream()) const {
    return resource_->allocate(bytes, alignment, stream);
  }

  /** @see memory_resource::allocate */
  [[nodiscard]] void* allocate(std::size_t bytes, stream_view stream) const {
    return resource_->allocate(bytes, DEFAULT_ALIGNMENT, stream);
  }

  /** @see memory_resource::deallocate */
  void deallocate(void* pointer,
                  std::size_t bytes,
                  std::size_t alignment = DEFAULT_ALIGNMENT,
                  stream_view stream    = default_stream()) const noexcept {
    resource_->deallocate(pointer, bytes, alignment, stream);
  }

  /** @see memory_resource::deallocate */
  void deallocate(void* pointer, std::size_t bytes, stream_view stream) const noexcept {
    resource_->deallocate(pointer, bytes, DEFAULT_ALIGNMENT, stream);
  }

  [[nodiscard]] memory_kind kind() const noexcept { return resource_->kind(); }

  /** @return the referenced resource */
  [[nodiscard]] memory_resource& get() const noexcept { return *resource_; }

  /** @brief Refs are equal when their resources are (memory from one can go to the other). */
  friend bool operator==(resource_ref lhs, resource_ref rhs) noexcept {
    return lhs.resource_->is_equal(*rhs.resource_);
  }

 private:
  memory_resource* resource_;
};

}  // namespace spillway
