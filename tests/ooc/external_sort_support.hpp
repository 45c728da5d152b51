/**
 * @file external_sort_support.hpp
 * @brief What the external sort's tests share: an environment of a budgeted device, host tier
 * and store; batches of each key distribution; and a sort checked against a stable in-memory sort.
 */
#pragma once

#include "testing/cuda_testing.hpp"
#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <filesystem>
#include <functional>
#include <numeric>
#include <random>
#include <string>
#include <tuple>
#include <utility>

namespace spillway::ooc_testing {

/// A device of `capacity` bytes that spills through the store on failure, a host tier with a
/// budget, and a spill directory of its own. The device is emulated, or (`cuda`) the GPU's
/// stream-ordered memory limited to the capacity. With `emulated_slack` > 1, the emulated device
/// has that many times the capacity and the sort sees a limit of the capacity above it, so that
/// the device's peak shows an allocation that bypassed the limit instead of refusing it.
class sort_environment {
 public:
  sort_environment(std::size_t device_capacity,
                   std::size_t host_budget,
                   bool cuda                  = false,
                   std::size_t emulated_slack = 1)
    : device_(device_capacity * emulated_slack),
      emulated_limit_(device_, device_capacity),
      cuda_device_(cuda ? std::make_unique<cuda_async_memory_resource>() : nullptr),
      cuda_limit_(cuda ? std::make_unique<limiting_resource_adaptor>(*cuda_device_, device_capacity)
                       : nullptr),
      cuda_counted_(cuda ? std::make_unique<statistics_resource_adaptor>(*cuda_limit_) : nullptr),
      device_with_spill_(
        cuda ? resource_ref{*cuda_counted_}
             : (emulated_slack > 1 ? resource_ref{emulated_limit_} : resource_ref{device_}),
        [this](std::size_t bytes, std::size_t attempt) {
          return store_ != nullptr && callback_(bytes, attempt);
        }),
      host_stats_(host_) {
    root_ =
      std::filesystem::temp_directory_path() / ("spillway-ooc-test-" + std::to_string(::getpid()));
    spill_store_options options{device_with_spill_, host_stats_};
    options.host_budget = host_budget;
    options.spill_root  = root_.string();
    store_              = std::make_unique<spill_store>(options);
    callback_           = store_->make_failure_callback();
  }
  ~sort_environment() {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  sort_environment(sort_environment const&)            = delete;
  sort_environment& operator=(sort_environment const&) = delete;
  sort_environment(sort_environment&&)                 = delete;
  sort_environment& operator=(sort_environment&&)      = delete;

  spill_store& store() { return *store_; }
  memory_resource& device() { return device_with_spill_; }
  emulated_device_memory_resource& raw_device() { return device_; }
  /// The most bytes the device (emulated or CUDA) held at once.
  std::size_t device_peak() const {
    return cuda_counted_ != nullptr ? cuda_counted_->statistics().peak_bytes : device_.peak_bytes();
  }
  host_memory_resource& host() { return plain_host_; }
  statistics_resource_adaptor& host_tier() { return host_stats_; }

 private:
  emulated_device_memory_resource device_;
  limiting_resource_adaptor emulated_limit_;
  std::unique_ptr<cuda_async_memory_resource> cuda_device_;
  std::unique_ptr<limiting_resource_adaptor> cuda_limit_;
  std::unique_ptr<statistics_resource_adaptor> cuda_counted_;
  failure_callback_resource_adaptor device_with_spill_;
  host_memory_resource host_;
  statistics_resource_adaptor host_stats_;
  host_memory_resource plain_host_;
  std::filesystem::path root_;
  std::unique_ptr<spill_store> store_;
  allocation_failure_callback callback_;
};

enum class distribution { RANDOM, SORTED, REVERSE, ALL_EQUAL, FEW_DISTINCT, SKEWED_90 };

inline std::unique_ptr<table> make_batch(distribution kind,
                                         std::size_t first_row,
                                         std::size_t rows,
                                         std::uint64_t seed,
                                         resource_ref resource) {
  std::mt19937_64 engine{seed};
  std::vector<std::int64_t> keys(rows);
  std::vector<std::int64_t> payload(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    auto const global = static_cast<std::int64_t>(first_row + row);
    switch (kind) {
      case distribution::RANDOM:
        keys[row] = static_cast<std::int64_t>(engine() >> 1);
        break;
      case distribution::SORTED:
        keys[row] = global;
        break;
      case distribution::REVERSE:
        keys[row] = -global;
        break;
      case distribution::ALL_EQUAL:
        keys[row] = 42;
        break;
      case distribution::FEW_DISTINCT:
        keys[row] = static_cast<std::int64_t>(engine() % 5);
        break;
      case distribution::SKEWED_90:
        keys[row] = engine() % 10 == 0 ? static_cast<std::int64_t>(engine() % 100000) : 7;
        break;
    }
    payload[row] = global;
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_fixed_column(data_type{type_id::INT64}, keys, {}, resource));
  columns.push_back(testing::make_fixed_column(data_type{type_id::INT64}, payload, {}, resource));
  return std::make_unique<table>(std::move(columns));
}

/// `count` batches of `rows` rows of `kind`: batch `i` holds rows [i * rows, (i + 1) * rows) and
/// draws from seed `i + first_seed`.
inline std::vector<std::unique_ptr<table>> make_batches(distribution kind,
                                                        std::size_t count,
                                                        std::size_t rows,
                                                        std::uint64_t first_seed,
                                                        resource_ref resource) {
  std::vector<std::unique_ptr<table>> batches;
  for (std::size_t index = 0; index < count; ++index) {
    batches.push_back(make_batch(kind, index * rows, rows, index + first_seed, resource));
  }
  return batches;
}

/// Options of the small sorts below: key column 0, 4 chunks per batch.
inline external_sort_options key0_options(std::size_t merge_budget,
                                          std::size_t output_batch,
                                          sort_strategy strategy) {
  external_sort_options options;
  options.key_columns        = {0};
  options.chunks_per_batch   = 4;
  options.merge_budget_bytes = merge_budget;
  options.output_batch_bytes = output_batch;
  options.strategy           = strategy;
  return options;
}

/// Sorts `batches` out of core and checks the result against an in-memory sort: keys in order,
/// and the same multiset of rows. Returns the sorter's statistics.
/// `rows` in the order `options` asks for, ties in row order: what the sort must match.
inline std::unique_ptr<table> stably_sorted(table_view const& rows,
                                            external_sort_options const& options,
                                            resource_ref host) {
  return sort(rows,
              rows.select(options.key_columns),
              options.orders,
              sort_stability::STABLE,
              default_stream(),
              host);
}

inline external_sort_statistics sort_and_check(sort_environment& env,
                                               std::vector<std::unique_ptr<table>> batches,
                                               external_sort_options options) {
  memory_resources const device{env.device()};
  std::vector<table_view> inputs;
  for (auto const& batch : batches) {
    inputs.push_back(batch->view());
  }
  auto const all_input = concatenate(inputs, default_stream(), env.host());
  external_sorter sorter{env.store(), options, default_stream(), device, env.host()};
  for (auto& batch : batches) {
    // Batches arrive on the device, as a reader would produce them.
    auto on_device = spillway::copy(batch->view(), default_stream(), device);
    batch.reset();
    sorter.push(std::move(on_device));
  }
  sorter.finish();
  std::vector<std::unique_ptr<table>> outputs;
  auto const limit = static_cast<std::size_t>(static_cast<double>(options.output_batch_bytes) *
                                              (1.0 + options.output_slack));
  while (auto batch = sorter.next()) {
    // Move each output batch off the device at once, as a writer would.
    EXPECT_LE(estimate_size(batch->view()),
              std::max(limit,
                       estimate_row_size(batch->view()) > 0
                         ? static_cast<std::size_t>(estimate_row_size(batch->view())) + 1
                         : limit));
    outputs.push_back(spillway::copy(batch->view(), default_stream(), env.host()));
  }
  std::vector<table_view> output_views;
  for (auto const& output : outputs) {
    output_views.push_back(output->view());
  }
  auto const all_output = concatenate(output_views, default_stream(), env.host());
  EXPECT_EQ(all_output->num_rows(), all_input->num_rows());
  // Keys are in order: equal to the keys of a stable in-memory sort.
  auto const reference = stably_sorted(all_input->view(), options, env.host());
  SPILLWAY_EXPECT_TABLES_EQUAL(reference->view().select(options.key_columns),
                               all_output->view().select(options.key_columns));
  // Same rows: sort both by every column.
  std::vector<std::size_t> every_column(all_input->num_columns());
  std::iota(every_column.begin(), every_column.end(), 0);
  auto const canonical_input = sort(
    all_input->view(), all_input->view(), {}, sort_stability::STABLE, default_stream(), env.host());
  auto const canonical_output = sort(all_output->view(),
                                     all_output->view(),
                                     {},
                                     sort_stability::STABLE,
                                     default_stream(),
                                     env.host());
  SPILLWAY_EXPECT_TABLES_EQUAL(canonical_input->view(), canonical_output->view());
  EXPECT_EQ(sorter.statistics().output_rows, all_input->num_rows());
  return sorter.statistics();
}

}  // namespace spillway::ooc_testing
