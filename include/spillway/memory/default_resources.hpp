/**
 * @file default_resources.hpp
 * @brief The process-wide current resources and the switch that makes any use of them an error.
 *
 * Public operators default their `memory_resources` argument to `current_resources()`. Internals
 * never call these functions: they use what the caller passed. To prove it, turn on the
 * validation switch (`set_error_on_default_resource(true)` or SPILLWAY_ERROR_ON_DEFAULT_RESOURCE=1
 * in the environment): every call of `get_current_device_resource()`,
 * `get_current_host_resource()` and `current_resources()` then throws, naming the caller, and
 * the process default resources themselves throw on allocation, so that a path which captured a
 * default earlier is caught too.
 */
#pragma once

#include <spillway/core/source_site.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/memory/resource_ref.hpp>

namespace spillway {

/**
 * @return the current device resource
 * @throws spillway::logic_error naming `site` while the validation switch is on
 */
resource_ref get_current_device_resource(source_site site = source_site::current());

/**
 * @brief Makes `resource` the current device resource.
 * @return the previous one
 * @note `resource` must outlive its use as the current resource. Not synchronized with
 * concurrent allocations through the previous resource: set it before starting work.
 */
resource_ref set_current_device_resource(resource_ref resource);

/** @return the current host resource @throws logic_error while the validation switch is on */
resource_ref get_current_host_resource(source_site site = source_site::current());

/** @brief Makes `resource` the current host resource. @return the previous one */
resource_ref set_current_host_resource(resource_ref resource);

/**
 * @return the current device resource in both roles: the default of every public operator
 * @throws spillway::logic_error naming `site` while the validation switch is on
 */
memory_resources current_resources(source_site site = source_site::current());

/** @return the process default device resource (what is current until someone sets another) */
resource_ref process_default_device_resource() noexcept;
/** @return the process default host resource */
resource_ref process_default_host_resource() noexcept;

/** @brief Turns the validation switch on or off. @return the previous state */
bool set_error_on_default_resource(bool enabled) noexcept;

/** @return whether the validation switch is on */
bool error_on_default_resource() noexcept;

}  // namespace spillway
