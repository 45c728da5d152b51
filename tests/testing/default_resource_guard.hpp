/**
 * @file default_resource_guard.hpp
 * @brief Turns the default-resource validation switch on for a scope and restores it after.
 */
#pragma once

#include <spillway/memory/default_resources.hpp>

namespace spillway::testing {

/** @brief While alive, any use of a process default resource throws. */
class default_resource_guard {
 public:
  explicit default_resource_guard(bool enabled = true)
    : previous_(set_error_on_default_resource(enabled)) {}
  ~default_resource_guard() { set_error_on_default_resource(previous_); }
  default_resource_guard(default_resource_guard const&)            = delete;
  default_resource_guard& operator=(default_resource_guard const&) = delete;
  default_resource_guard(default_resource_guard&&)                 = delete;
  default_resource_guard& operator=(default_resource_guard&&)      = delete;

 private:
  bool previous_;
};

}  // namespace spillway::testing
