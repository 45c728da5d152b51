/**
 * @file retry_coverage.hpp
 * @brief Records allocations made by tasks outside any retry block, with their call site, so that
 * tests can assert that an operator's allocations are all protected.
 *
 * Turned on by `set_retry_coverage(true)` or SPILLWAY_RETRY_COVERAGE=1. Allocations through a
 * `retry_resource_adaptor` made while no `with_retry` block runs on the allocating thread are
 * recorded, with the thread's task (task 0 for a thread bound to none: an out-of-memory there
 * has no task to roll back, so it is as unprotected as any).
 */
#pragma once

#include <spillway/core/ids.hpp>

#include <cstddef>
#include <string>
#include <vector>

namespace spillway {

/** @brief One allocation made outside a retry block. */
struct unprotected_allocation {
  task_id task;
  std::size_t bytes = 0;
  std::string call_site;  ///< the innermost frames of the allocating stack, one per line
};

/** @brief Turns recording on or off. @return the previous state */
bool set_retry_coverage(bool enabled);
/** @return whether recording is on */
bool retry_coverage_enabled();
/** @return what was recorded so far */
std::vector<unprotected_allocation> unprotected_allocations();
/** @brief Forgets what was recorded. */
void clear_unprotected_allocations();

/** @return whether the calling thread is inside a retry block */
bool in_retry_block() noexcept;

/** @brief Marks the calling thread as inside a retry block while alive (nests). */
class retry_block_marker {
 public:
  retry_block_marker() noexcept;
  ~retry_block_marker();
  retry_block_marker(retry_block_marker const&)            = delete;
  retry_block_marker& operator=(retry_block_marker const&) = delete;
  retry_block_marker(retry_block_marker&&)                 = delete;
  retry_block_marker& operator=(retry_block_marker&&)      = delete;
};

namespace detail {
/** @brief Records an allocation if coverage is on and the thread is outside retry blocks. */
void note_allocation_for_coverage(task_id task, std::size_t bytes);
}  // namespace detail

}  // namespace spillway
