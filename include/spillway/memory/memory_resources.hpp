/**
 * @file memory_resources.hpp
 * @brief The pair of resources every operator takes: one for its output, one for its scratch.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <concepts>
#include <optional>

namespace spillway {

/**
 * @brief Where an operator allocates: `output` for what it returns, `temporary` for what it frees
 * before returning.
 *
 * Built implicitly from one resource (both roles share it), explicitly from two, or by the
 * builder, which later members extend without new constructors:
 * @code
 * sort(input, keys, stream, pool);                                      // one resource
 * sort(input, keys, stream, memory_resources{output_mr, scratch_mr});   // two
 * sort(input, keys, stream,
 *      memory_resources::builder{}.output(output_mr).temporary(scratch_mr).build());
 * @endcode
 * @note A value type; copies refer to the same resources.
 */
class memory_resources {
 public:
  class builder;

  /** @brief Both roles use `resource`. */
  memory_resources(resource_ref resource) noexcept  // NOLINT(google-explicit-constructor)
    : output_(resource), temporary_(resource) {}

  /** @brief Both roles use `resource` (one implicit step from any resource at the call site). */
  template <typename Resource>
  requires std::derived_from<Resource, memory_resource> memory_resources(Resource& resource)
  noexcept  // NOLINT(google-explicit-constructor)
    : output_(resource), temporary_(resource) {}

  /** @brief Output from `output`, scratch from `temporary`. */
  explicit memory_resources(resource_ref output, resource_ref temporary) noexcept
    : output_(output), temporary_(temporary) {}

  /** @return the resource for memory handed back to the caller */
  [[nodiscard]] resource_ref output() const noexcept { return output_; }
  /** @return the resource for memory freed before the operator returns */
  [[nodiscard]] resource_ref temporary() const noexcept { return temporary_; }

  /** @return a copy whose output is `resource` */
  [[nodiscard]] memory_resources with_output(resource_ref resource) const noexcept {
    return memory_resources{resource, temporary_};
  }
  /** @return a copy whose temporary is `resource` */
  [[nodiscard]] memory_resources with_temporary(resource_ref resource) const noexcept {
    return memory_resources{output_, resource};
  }

 private:
  resource_ref output_;
  resource_ref temporary_;
};

/**
 * @brief Names each resource; a role left unset takes the output resource.
 */
class memory_resources::builder {
 public:
  builder& output(resource_ref resource) noexcept {
    output_ = resource;
    return *this;
  }
  builder& temporary(resource_ref resource) noexcept {
    temporary_ = resource;
    return *this;
  }
  /**
   * @return the resources
   * @throws spillway::invalid_argument when no output resource was given
   */
  [[nodiscard]] memory_resources build() const;

 private:
  std::optional<resource_ref> output_;
  std::optional<resource_ref> temporary_;
};

}  // namespace spillway
