/**
 * @file oom_errors.hpp
 * @brief The two out-of-memory outcomes a task recovers from, and who handles each.
 *
 * - `retry_oom`: roll back to the last spillable point (make the input spillable, free
 *   everything else), wait for memory, and run the same input again. Handled by `with_retry`.
 * - `split_and_retry_oom`: retrying the same input will not help; split it and process the
 *   pieces. Handled by `with_retry` with its split policy.
 * Anything else that derives from `out_of_memory` is final.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/ids.hpp>

#include <cstddef>
#include <string>

namespace spillway {

/**
 * @brief An out-of-memory addressed to one task: it names the task and the failed attempt.
 * Thrown only as one of the two outcomes below.
 */
class task_out_of_memory : public out_of_memory {
 public:
  task_out_of_memory(std::string message,
                     task_id task,
                     std::size_t requested_bytes,
                     std::size_t available_bytes,
                     std::size_t capacity_bytes,
                     std::size_t attempt)
    : out_of_memory(std::move(message), requested_bytes, available_bytes, capacity_bytes),
      task_(task),
      attempt_(attempt) {}
  [[nodiscard]] task_id task() const noexcept { return task_; }
  /** @return the allocation attempt that failed (from 1) */
  [[nodiscard]] std::size_t attempt() const noexcept { return attempt_; }

 private:
  task_id task_;
  std::size_t attempt_;
};

/** @brief Roll back and retry the same input. */
class retry_oom : public task_out_of_memory {
 public:
  using task_out_of_memory::task_out_of_memory;
};

/** @brief Split the input and retry the pieces. */
class split_and_retry_oom : public task_out_of_memory {
 public:
  using task_out_of_memory::task_out_of_memory;
};

}  // namespace spillway
