/**
 * @file sorter_absorb_test.cpp
 * @brief Tasks that sort side by side into sorters of their own, then one sorter absorbing the
 * others: the output is the sort of every batch, whatever the number of tasks.
 */
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/lease/task_context.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t BATCHES = 24;
constexpr std::size_t ROWS    = 2000;  // per batch

/// Batches of a unique int64 key (a shuffled 0..n), a string and a nullable double, on the host.
std::vector<std::unique_ptr<table>> make_batches(resource_ref host) {
  std::vector<std::int64_t> keys(BATCHES * ROWS);
  std::iota(keys.begin(), keys.end(), -static_cast<std::int64_t>(keys.size() / 2));
  std::shuffle(keys.begin(), keys.end(), std::mt19937_64{7});
  std::vector<std::unique_ptr<table>> batches;
  for (std::size_t b = 0; b < BATCHES; ++b) {
    std::vector<std::int64_t> part(keys.begin() + static_cast<std::ptrdiff_t>(b * ROWS),
                                   keys.begin() + static_cast<std::ptrdiff_t>((b + 1) * ROWS));
    auto payload = testing::random_table(
      {data_type{type_id::STRING}, data_type{type_id::FLOAT64}}, ROWS, 100 + b, 0.1, host);
    auto columns = payload->release();
    columns.insert(columns.begin(),
                   testing::make_fixed_column(data_type{type_id::INT64}, part, {}, host));
    batches.push_back(std::make_unique<table>(std::move(columns)));
  }
  return batches;
}

struct absorb_case {
  std::size_t tasks;
  sort_strategy strategy;
  sort_order orders;
};

/// The sort of `batches` by column 0 with `tasks` tasks, each on a thread of its own, into `out`.
std::unique_ptr<table> sort_with_tasks(std::vector<std::unique_ptr<table>> const& batches,
                                       absorb_case const& c,
                                       std::filesystem::path const& spill_root,
                                       resource_ref result) {
  device_environment_options environment_options;
  environment_options.device_memory = 2_MiB;
  environment_options.host_memory   = 1_MiB;
  environment_options.spill_root    = spill_root.string();
  device_environment environment{environment_options};
  auto const options_for = [&](task_context& task) {
    external_sort_options options;
    options.key_columns        = {0};
    options.orders             = c.orders;
    options.strategy           = c.strategy;
    options.merge_budget_bytes = 1_MiB;
    options.output_batch_bytes = 128_KiB;
    options.coordinator        = &environment.coordinator();
    options.task               = &task;
    return options;
  };
  std::vector<std::unique_ptr<device_task>> tasks;
  std::vector<std::unique_ptr<external_sorter>> sorters;
  for (std::size_t t = 0; t < c.tasks; ++t) {
    tasks.push_back(std::make_unique<device_task>(environment, task_id{t + 1}));
    sorters.push_back(std::make_unique<external_sorter>(environment.store(),
                                                        options_for(tasks.back()->context()),
                                                        environment.stream(),
                                                        memory_resources{environment.device()},
                                                        environment.host()));
  }
  std::atomic<std::size_t> next{0};
  std::vector<std::thread> threads;
  for (std::size_t t = 0; t < c.tasks; ++t) {
    threads.emplace_back([&, t] {
      task_context::thread_binding const binding{tasks[t]->context()};
      for (std::size_t b = next++; b < batches.size(); b = next++) {
        // Onto the device under the OOM protocol, as the tasks of `spillway sort` do: the tasks
        // share a device too small for all of them.
        std::shared_ptr<table const> const host_batch{batches[b].get(), [](table const*) {}};
        auto pieces = with_retry(environment.coordinator(),
                                 tasks[t]->context(),
                                 table_input{host_batch},
                                 [&](table_input& piece) {
                                   return spillway::copy(piece.materialize(),
                                                         environment.stream(),
                                                         memory_resources{environment.device()});
                                 });
        for (auto& piece : pieces) {
          sorters[t]->push(std::move(piece));
        }
      }
      sorters[t]->seal();
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  task_context::thread_binding const binding{tasks[0]->context()};
  for (std::size_t t = 1; t < c.tasks; ++t) {
    sorters[0]->absorb(*sorters[t]);
    EXPECT_EQ(sorters[t]->next(), nullptr) << "an absorbed sorter keeps nothing";
  }
  sorters[0]->finish();
  std::vector<std::unique_ptr<table>> out;
  while (auto batch = sorters[0]->next()) {
    out.push_back(
      spillway::copy(batch->view(), environment.stream(), memory_resources{environment.host()}));
  }
  EXPECT_EQ(sorters[0]->statistics().input_rows, BATCHES * ROWS);
  std::vector<table_view> views;
  for (auto const& batch : out) {
    views.push_back(batch->view());
  }
  return spillway::concatenate(views, default_stream(), memory_resources{result});
}

TEST(SorterAbsorb, SortersOfManyTasksMergeAsOneSortOfEveryBatch) {
  host_memory_resource host;
  auto const batches = make_batches(host);
  std::vector<table_view> views;
  for (auto const& batch : batches) {
    views.push_back(batch->view());
  }
  auto const all = spillway::concatenate(views, default_stream(), memory_resources{host});
  auto const root =
    std::filesystem::temp_directory_path() / ("spillway-absorb-" + std::to_string(::getpid()));
  for (auto const strategy : {sort_strategy::MERGE, sort_strategy::SAMPLE, sort_strategy::AUTO}) {
    for (auto const direction : {order::ASCENDING, order::DESCENDING}) {
      sort_order const orders{{direction, null_order::BEFORE}};
      auto const expected = spillway::sort(all->view(),
                                           all->view().select(std::vector<std::size_t>{0}),
                                           orders,
                                           sort_stability::STABLE,
                                           default_stream(),
                                           memory_resources{host});
      for (std::size_t const tasks : {std::size_t{1}, std::size_t{2}, std::size_t{4}}) {
        SCOPED_TRACE(std::string{to_string(strategy)} + ", " + std::to_string(tasks) + " tasks" +
                     (direction == order::ASCENDING ? ", ascending" : ", descending"));
        auto const sorted = sort_with_tasks(batches, {tasks, strategy, orders}, root, host);
        SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), sorted->view());
      }
    }
  }
  std::filesystem::remove_all(root);
}

TEST(SorterAbsorb, RefusesAnUnsealedOrUnlikeSorter) {
  device_environment environment{device_environment_options{}};
  device_task task{environment, task_id{1}};
  external_sort_options options;
  options.key_columns = {0};
  auto const make     = [&](external_sort_options const& o) {
    return std::make_unique<external_sorter>(environment.store(),
                                             o,
                                             environment.stream(),
                                             memory_resources{environment.device()},
                                             environment.host());
  };
  auto first  = make(options);
  auto second = make(options);
  EXPECT_THROW(first->absorb(*second), logic_error) << "not sealed";
  second->seal();
  EXPECT_THROW(second->push(nullptr), logic_error) << "push after seal";
  auto other_keys        = options;
  other_keys.key_columns = {1};
  auto third             = make(other_keys);
  third->seal();
  EXPECT_THROW(first->absorb(*third), invalid_argument);
  first->absorb(*second);
  EXPECT_THROW(first->absorb(*second), logic_error) << "absorbed twice";
}

}  // namespace
}  // namespace spillway
