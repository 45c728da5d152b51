/**
 * @file retry_pipeline_test.cpp
 * @brief A small pipeline under with_retry, with its output allocated through the retry adaptor,
 * gives exactly the output it gives without failures when an OOM of each kind is injected at
 * every allocation index in turn, and leaks nothing.
 */
#include "lease/watchdog.hpp"
#include "retry/oom_test_device.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/lease/task_context.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/retry/oom_injection.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t CAPACITY = 1 << 22;

std::string name_of(injected_oom_kind kind) {
  return to_string(oom_injection{std::nullopt, kind, 0, 1});
}

class RetryPipeline : public ::testing::Test {
 protected:
  RetryPipeline()
    : source_(testing::random_table({data_type{type_id::INT32},
                                     data_type{type_id::STRING},
                                     data_type{type_id::FLOAT64},
                                     data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}},
                                    24,
                                    7,
                                    0.2,
                                    host_)) {}

  /**
   * @brief Per piece: gather every row twice ([r0, r0, r1, r1, ...]) and copy the result, both
   * into `output` (the retry adaptor, through a counter); then concatenate the pieces' results
   * into host memory. Any split of the input gives the same final table.
   */
  std::unique_ptr<table> run_pipeline(test::oom_test_device& d,
                                      task_context& task,
                                      memory_resource& output) {
    auto pieces = with_retry(d.coordinator, task, table_input{source_}, [&](table_input& piece) {
      table_view const rows = piece.materialize();
      std::vector<std::int32_t> indices;
      for (std::size_t row = 0; row < rows.num_rows(); ++row) {
        indices.push_back(static_cast<std::int32_t>(row));
        indices.push_back(static_cast<std::int32_t>(row));
      }
      auto const map =
        testing::make_fixed_column<std::int32_t>(data_type{type_id::INT32}, indices, {}, output);
      auto const doubled =
        gather(rows, map->view(), out_of_bounds_policy::FAIL, default_stream(), output);
      return copy(doubled->view(), default_stream(), output);
    });
    std::vector<table_view> views;
    for (auto const& piece : pieces) {
      views.push_back(piece->view());
    }
    return concatenate(views, default_stream(), host_);
  }

  host_memory_resource host_;
  std::shared_ptr<table const> source_;
};

TEST_F(RetryPipeline, OomInjectedAtEveryAllocationGivesTheSameOutput) {
  std::size_t allocations_seen = 0;
  test::run_with_watchdog([&] {
    std::unique_ptr<table> baseline;
    std::size_t allocations = 0;
    {
      test::oom_test_device d{CAPACITY};
      task_context task{d.arbiter, task_id{1}};
      oom_coordinator::registration const registered{d.coordinator, task};
      statistics_resource_adaptor counted{d.adaptor};
      baseline    = run_pipeline(d, task, counted);
      allocations = counted.statistics().total_count;
      EXPECT_EQ(d.device.used_bytes(), 0U);
    }
    ASSERT_GT(allocations, 0U);
    allocations_seen = allocations;
    {
      // The pipeline is what it claims to be: every row twice, in order.
      std::vector<std::int32_t> indices;
      for (std::int32_t row = 0; row < 24; ++row) {
        indices.push_back(row);
        indices.push_back(row);
      }
      auto const map =
        testing::make_fixed_column<std::int32_t>(data_type{type_id::INT32}, indices, {}, host_);
      auto const expected =
        gather(source_->view(), map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
      SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), baseline->view());
    }

    for (auto const kind :
         {injected_oom_kind::RETRY, injected_oom_kind::SPLIT, injected_oom_kind::OOM}) {
      for (std::size_t index = 0; index < allocations; ++index) {
        SCOPED_TRACE(name_of(kind) + " at allocation " + std::to_string(index) + " of " +
                     std::to_string(allocations));
        test::oom_test_device d{CAPACITY};
        task_context task{d.arbiter, task_id{1}};
        oom_coordinator::registration const registered{d.coordinator, task};
        statistics_resource_adaptor counted{d.adaptor};
        d.adaptor.testing_inject_oom(oom_injection{task.id(), kind, index, 1});
        auto const output = run_pipeline(d, task, counted);
        SPILLWAY_EXPECT_TABLES_EQUAL(baseline->view(), output->view());
        EXPECT_EQ(d.adaptor.injected_failures(), 1U);
        EXPECT_EQ(d.device.used_bytes(), 0U) << "a failed attempt leaked device memory";
        EXPECT_EQ(d.adaptor.unspillable_bytes(task.id()), 0U);
      }
    }
  });
  RecordProperty("allocations", static_cast<int>(allocations_seen));
}

TEST_F(RetryPipeline, RetryAndSplitInjectedOutsideTheProtocolGiveTheSameOutput) {
  // A task not registered with the coordinator retries the same input at once after a roll back.
  test::run_with_watchdog([&] {
    test::oom_test_device reference{CAPACITY};
    task_context reference_task{reference.arbiter, task_id{1}};
    statistics_resource_adaptor reference_counted{reference.adaptor};
    auto const baseline           = run_pipeline(reference, reference_task, reference_counted);
    std::size_t const allocations = reference_counted.statistics().total_count;
    for (auto const kind : {injected_oom_kind::RETRY, injected_oom_kind::SPLIT}) {
      for (std::size_t index = 0; index < allocations; ++index) {
        SCOPED_TRACE(name_of(kind) + " at allocation " + std::to_string(index));
        test::oom_test_device d{CAPACITY};
        task_context task{d.arbiter, task_id{1}};
        statistics_resource_adaptor counted{d.adaptor};
        d.adaptor.testing_inject_oom(oom_injection{std::nullopt, kind, index, 1});
        auto const output = run_pipeline(d, task, counted);
        SPILLWAY_EXPECT_TABLES_EQUAL(baseline->view(), output->view());
        EXPECT_EQ(d.adaptor.injected_failures(), 1U);
        EXPECT_EQ(d.device.used_bytes(), 0U);
      }
    }
  });
}

}  // namespace
}  // namespace spillway
