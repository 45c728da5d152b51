/**
 * @file sort_tasks_test.cpp
 * @brief The tasks of `spillway sort` on one device: a task takes its next input batch only once
 * it holds the device, so that tasks waiting for the device hold no batch on the host.
 */
#include "sort_tasks.hpp"

#include <spillway/core/units.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/table/column.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <vector>

namespace spillway::cli {
namespace {

constexpr std::size_t BATCH_ROWS = 4096;
constexpr std::size_t BATCHES    = 40;

TEST(SortTasks, ConcurrentTasksWaitingForTheDeviceHoldNoBatchOnTheHost) {
  device_environment_options options;
  options.device_memory = 16_MiB;
  options.host_memory   = 16_MiB;
  device_environment environment{options};
  // The input batches come from here at once, as a read-ahead reader's ready batches do: its peak
  // is the most batches the tasks held on the host at a time.
  statistics_resource_adaptor batches{environment.host()};
  external_sort_options sort;
  sort.key_columns              = {0};
  sort.merge_budget_bytes       = 8_MiB;
  sort.output_batch_bytes       = 1_MiB;
  std::size_t const batch_bytes = BATCH_ROWS * sizeof(std::int64_t);
  for (std::size_t const device_tasks : {std::size_t{1}, std::size_t{2}}) {
    SCOPED_TRACE("device tasks " + std::to_string(device_tasks));
    batches.reset_peaks();
    std::size_t made = 0;
    std::atomic<std::size_t> rows{0};  // counted from the tasks' threads
    {
      sort_tasks tasks{
        environment, sort, 8, device_tasks, batch_bytes, environment.budgeted_host()};
      tasks.run(
        [&]() -> std::unique_ptr<table> {
          if (made == BATCHES) {
            return nullptr;
          }
          auto keys = make_fixed_width_column(
            type_id::INT64, BATCH_ROWS, mask_state::UNALLOCATED, environment.stream(), batches);
          auto* values = keys->mutable_data<std::int64_t>();
          for (std::size_t row = 0; row < BATCH_ROWS; ++row) {
            values[row] = static_cast<std::int64_t>((row * 7919 + made * 104729) % 100003);
          }
          ++made;
          std::vector<std::unique_ptr<column>> columns;
          columns.push_back(std::move(keys));
          return std::make_unique<table>(std::move(columns));
        },
        [&](std::size_t piece_rows, std::size_t) { rows += piece_rows; });
      task_context::thread_binding const binding{tasks.merging_task()};
      std::int64_t last  = INT64_MIN;
      std::size_t merged = 0;
      while (auto batch = tasks.merged().next()) {
        auto const* values = batch->view().column(0).data<std::int64_t>();
        for (std::size_t row = 0; row < batch->num_rows(); ++row) {
          ASSERT_LE(last, values[row]);
          last = values[row];
        }
        merged += batch->num_rows();
      }
      EXPECT_EQ(merged, BATCHES * BATCH_ROWS);
    }
    EXPECT_EQ(rows.load(), BATCHES * BATCH_ROWS);
    // At most one batch per task holding the device: the 8 tasks took one each at once when a
    // task took its batch before it waited for the device.
    EXPECT_LE(batches.statistics().peak_bytes, device_tasks * batch_bytes);
    EXPECT_EQ(batches.statistics().current_bytes, 0U);
  }
}

}  // namespace
}  // namespace spillway::cli
