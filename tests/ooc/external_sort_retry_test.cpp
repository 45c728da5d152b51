/**
 * The out-of-core sort under the OOM protocol: an out-of-memory injected at every allocation of
 * the sort in turn, of each kind (retry, split, a real allocation failure), gives the same sorted
 * rows as a run without injection.
 */
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/retry_resource_adaptor.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <ostream>
#include <random>
#include <string>

namespace spillway {
namespace {

constexpr std::size_t DEVICE_CAPACITY = 512_KiB;

/// One sort of a fixed input on a fresh device, store, arbiter and protocol.
struct sort_run {
  std::unique_ptr<table> output;       ///< all output rows, on the host
  std::size_t device_allocations = 0;  ///< allocations that reached the device
  std::size_t injected           = 0;
  external_sort_statistics statistics;
};

std::vector<std::unique_ptr<table>> make_input(host_memory_resource& host) {
  std::mt19937_64 engine{17};
  std::vector<std::unique_ptr<table>> batches;
  for (std::size_t batch = 0; batch < 4; ++batch) {
    std::vector<std::int64_t> keys(600);
    std::vector<std::int64_t> payload(600);
    for (std::size_t row = 0; row < keys.size(); ++row) {
      keys[row]    = static_cast<std::int64_t>(engine() % 1000);
      payload[row] = static_cast<std::int64_t>(batch * 1000 + row);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column(data_type{type_id::INT64}, keys, {}, host));
    columns.push_back(testing::make_fixed_column(data_type{type_id::INT64}, payload, {}, host));
    batches.push_back(std::make_unique<table>(std::move(columns)));
  }
  return batches;
}

/// Host memory that outlives every run's output.
host_memory_resource& output_memory() {
  static host_memory_resource resource;
  return resource;
}

sort_run run_sort(std::optional<oom_injection> injection,
                  sort_strategy strategy,
                  std::size_t merge_budget) {
  host_memory_resource& host = output_memory();
  emulated_device_memory_resource device{DEVICE_CAPACITY};
  statistics_resource_adaptor counted{device};
  oom_coordinator coordinator;
  retry_resource_adaptor protected_device{counted, coordinator, DEVICE_CAPACITY};
  auto const root = std::filesystem::temp_directory_path() /
                    ("spillway-ooc-retry-test-" + std::to_string(::getpid()));
  spill_store_options store_options{protected_device, host};
  store_options.host_budget = 4_MiB;
  store_options.spill_root  = root.string();
  sort_run result;
  {
    spill_store store{store_options};
    coordinator.set_spill_function(
      [&store](std::size_t bytes) { return store.spill(bytes, spill_tier::DEVICE); });
    lease_arbiter arbiter{DEVICE_CAPACITY};
    task_context task{arbiter, task_id{7}};
    oom_coordinator::registration const registration{coordinator, task};
    external_sort_options options;
    options.key_columns        = {0};
    options.chunks_per_batch   = 3;
    options.merge_budget_bytes = merge_budget;
    options.output_batch_bytes = 8_KiB;
    options.strategy           = strategy;
    options.coordinator        = &coordinator;
    options.task               = &task;
    external_sorter sorter{store, options, default_stream(), protected_device, host};
    auto batches = make_input(host);
    protected_device.testing_inject_oom(injection);
    for (auto& batch : batches) {
      std::unique_ptr<table> on_device;
      {
        task_context::thread_binding const binding{task};
        // Reading a batch onto the device is outside the sort's protection: not injected.
        protected_device.testing_inject_oom(std::nullopt);
        on_device = copy(batch->view(), default_stream(), protected_device);
        protected_device.testing_inject_oom(injection);
      }
      sorter.push(std::move(on_device));
    }
    sorter.finish();
    std::vector<std::unique_ptr<table>> outputs;
    while (auto batch = sorter.next()) {
      outputs.push_back(copy(batch->view(), default_stream(), host));
    }
    std::vector<table_view> views;
    for (auto const& output : outputs) {
      views.push_back(output->view());
    }
    result.output             = concatenate(views, default_stream(), host);
    result.injected           = protected_device.injected_failures();
    result.statistics         = sorter.statistics();
    result.device_allocations = counted.statistics().total_count;
  }
  std::filesystem::remove_all(root);
  return result;
}

/// Rows in a canonical order (by every column), to compare runs whose equal keys may interleave
/// differently.
std::unique_ptr<table> canonical(table_view const& rows, host_memory_resource& host) {
  return sort(rows, rows, {}, sort_stability::STABLE, default_stream(), host);
}

/// A strategy and a merge budget: 48 KiB makes rounds of single batches, 96 KiB runs of two
/// batches sorted at once; 256 KiB holds one sort of all 2 400 rows.
struct retry_case {
  sort_strategy strategy;
  std::size_t merge_budget;
};

/// Prints e.g. "MERGE, 96 KiB merge budget" (the case in test listings and failures).
void PrintTo(retry_case const& c, std::ostream* os) {
  *os << to_string(c.strategy) << ", " << c.merge_budget / 1_KiB << " KiB merge budget";
}

class ExternalSortRetry : public ::testing::TestWithParam<retry_case> {};

INSTANTIATE_TEST_SUITE_P(Strategies,
                         ExternalSortRetry,
                         ::testing::Values(retry_case{sort_strategy::MERGE, 48_KiB},
                                           retry_case{sort_strategy::SAMPLE, 48_KiB},
                                           retry_case{sort_strategy::MERGE, 96_KiB},
                                           retry_case{sort_strategy::MERGE, 256_KiB}),
                         [](auto const& test_info) {
                           std::size_t const budget = test_info.param.merge_budget;
                           return std::string{to_string(test_info.param.strategy)} +
                                  (budget > 96_KiB   ? "_OneSort"
                                   : budget > 48_KiB ? "_Runs"
                                                     : "");
                         });

TEST_P(ExternalSortRetry, InjectedOomAtEveryAllocationGivesTheSameRows) {
  host_memory_resource host;
  auto const [strategy, budget] = GetParam();
  sort_run const reference      = run_sort(std::nullopt, strategy, budget);
  EXPECT_EQ(reference.statistics.strategy_used, strategy);
  // Without injection the large budget sorts every row at once (no chunks), the middle one two
  // runs of two batches, the small one batch by batch.
  EXPECT_EQ(reference.statistics.chunks_created == 0, budget > 96_KiB);
  EXPECT_EQ(reference.statistics.batch_runs, budget == 96_KiB ? 2U : 0U);
  ASSERT_EQ(reference.output->num_rows(), 2400U);
  auto const expected           = canonical(reference.output->view(), host);
  std::size_t const allocations = reference.device_allocations;
  ASSERT_GT(allocations, 10U);
  for (auto kind : {injected_oom_kind::RETRY, injected_oom_kind::SPLIT, injected_oom_kind::OOM}) {
    // Inject at allocation 0, 1, 2, ... of the task until an index is past its last allocation.
    std::size_t index = 0;
    for (; index <= allocations; ++index) {
      oom_injection injection;
      injection.task     = task_id{7};
      injection.kind     = kind;
      injection.skip     = index;
      injection.count    = 1;
      sort_run const run = run_sort(injection, strategy, budget);
      if (run.injected == 0) {
        break;
      }
      SCOPED_TRACE(to_string(injection));
      // Keys in order, and the same rows as without injection.
      SPILLWAY_EXPECT_TABLES_EQUAL(
        canonical(reference.output->view().select(std::vector<std::size_t>{0}), host)->view(),
        run.output->view().select(std::vector<std::size_t>{0}));
      SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), canonical(run.output->view(), host)->view());
      if (kind != injected_oom_kind::OOM) {
        EXPECT_GT(run.statistics.retries + run.statistics.splits, 0U);
      }
    }
    // The sort makes many protected allocations (one sort of everything: a dozen); every one
    // of them was tried.
    EXPECT_GT(index, budget > 48_KiB ? 8U : 20U) << "kind " << static_cast<int>(kind);
    EXPECT_LE(index, allocations);
  }
}

}  // namespace
}  // namespace spillway
