/**
 * @file copy_to_device.hpp
 * @brief An input batch copied onto the device under the OOM protocol, as every operator's input
 * should arrive there.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/table/table.hpp>

#include <memory>
#include <vector>

namespace spillway {

/**
 * @brief Copies the rows of `batch` into `device` for `task` inside a retry block: rolled back and
 * retried on retry_oom, cut in halves by rows on split_and_retry_oom (or when the protocol picks
 * this task to split).
 * @param batch the rows (host memory, or anywhere `copy` reads from); see `table_input` for who
 * keeps them alive
 * @param counted where the copy's retries and splits are added; may be null
 * @return the rows on the device, as one table or, after splits, its pieces in order
 * @throws spillway::out_of_memory when one row still does not fit
 */
std::vector<std::unique_ptr<table>> copy_to_device(table_input batch,
                                                   oom_coordinator& coordinator,
                                                   task_context& task,
                                                   stream_view stream,
                                                   resource_ref device,
                                                   retry_counts* counted = nullptr);

/** @brief As above, for a batch the copy takes over (it is freed when the copy is done). */
std::vector<std::unique_ptr<table>> copy_to_device(std::unique_ptr<table> batch,
                                                   oom_coordinator& coordinator,
                                                   task_context& task,
                                                   stream_view stream,
                                                   resource_ref device,
                                                   retry_counts* counted = nullptr);

}  // namespace spillway
