/**
 * @file ids.hpp
 * @brief Identifiers shared by the layers: tasks.
 */
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace spillway {

/**
 * @brief Identifies a task: a unit of work that holds leases, spills and retries as one.
 * @note A plain value; tasks choose their own ids (e.g. a Spark task attempt id).
 */
struct task_id {
  std::uint64_t value = 0;

  friend constexpr bool operator==(task_id, task_id) noexcept  = default;
  friend constexpr auto operator<=>(task_id, task_id) noexcept = default;
};

/** @return "task 17" */
inline std::string to_string(task_id id) { return "task " + std::to_string(id.value); }

}  // namespace spillway

template <>
struct std::hash<spillway::task_id> {
  std::size_t operator()(spillway::task_id id) const noexcept {
    return std::hash<std::uint64_t>{}(id.value);
  }
};
