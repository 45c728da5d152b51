/**
 * @file retry_guards.hpp
 * @brief What the commands need to keep every device allocation under the OOM protocol: input
 * batches copied onto the device inside a retry block, and the report of allocations made outside
 * one (SPILLWAY_RETRY_COVERAGE=1).
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/table/table.hpp>

#include <nlohmann/json.hpp>

#include <cstddef>
#include <memory>
#include <string_view>
#include <vector>

namespace spillway::cli {

/**
 * @brief Copies `batch` (host memory) into `device` for `task` under the OOM protocol: rolled back
 * and retried on retry_oom, cut in halves by rows on split_and_retry_oom.
 * @param counted where the copy's retries and splits are added; may be null
 * @return the batch on the device, as one table or, after splits, its pieces in order
 * @throws spillway::out_of_memory when one row still does not fit
 */
std::vector<std::unique_ptr<table>> copy_to_device(std::unique_ptr<table> batch,
                                                   oom_coordinator& coordinator,
                                                   task_context& task,
                                                   stream_view stream,
                                                   resource_ref device,
                                                   retry_counts* counted = nullptr);

/**
 * @brief With SPILLWAY_RETRY_COVERAGE=1: writes to stderr how many device allocations `command`
 * made outside every retry block, with the task, size and call site of the first few, and adds
 * their count to `summary` (as "unprotected_allocations"). Without it: nothing.
 */
void report_retry_coverage(std::string_view command, nlohmann::ordered_json& summary);

}  // namespace spillway::cli
