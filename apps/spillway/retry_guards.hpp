/**
 * @file retry_guards.hpp
 * @brief The commands' report of device allocations made outside every retry block
 * (SPILLWAY_RETRY_COVERAGE=1).
 */
#pragma once

#include <nlohmann/json.hpp>

#include <string_view>

namespace spillway::cli {

/**
 * @brief With SPILLWAY_RETRY_COVERAGE=1: writes to stderr how many device allocations `command`
 * made outside every retry block, with the task, size and call site of the first few, and adds
 * their count to `summary` (as "unprotected_allocations"). Without it: nothing.
 */
void report_retry_coverage(std::string_view command, nlohmann::ordered_json& summary);

}  // namespace spillway::cli
