/**
 * @file external_sort_in_place_test.cpp
 * @brief The one-sort path's output batches made in place: few key runs scattered into the
 * batches they came in, and the cases gathered batch by batch instead.
 */
#include "ooc/external_sort_support.hpp"

#include <gtest/gtest.h>

namespace spillway {
namespace {

using namespace ooc_testing;  // NOLINT(google-build-using-namespace)

/**
 * Batches of a time series: a key of `keys` values drawn at random, the global row (so the
 * stable order is known), a FLOAT64, a string (some null) and a nullable INT32.
 */
std::vector<std::unique_ptr<table>> series_batches(std::size_t batches,
                                                   std::size_t rows,
                                                   std::size_t keys,
                                                   resource_ref host) {
  std::vector<std::unique_ptr<table>> result;
  std::mt19937_64 engine{51};
  for (std::size_t batch = 0; batch < batches; ++batch) {
    std::vector<std::int64_t> key(rows);
    std::vector<std::int64_t> global(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      key[row]    = static_cast<std::int64_t>(engine() % keys);
      global[row] = static_cast<std::int64_t>(batch * rows + row);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column<std::int64_t>(type_id::INT64, key, {}, host));
    columns.push_back(testing::make_fixed_column<std::int64_t>(type_id::INT64, global, {}, host));
    columns.push_back(testing::random_column(type_id::FLOAT64, rows, 52 + batch, 0.0, host));
    columns.push_back(testing::random_column(type_id::STRING, rows, 53 + batch, 0.1, host, 20));
    columns.push_back(testing::random_column(type_id::INT32, rows, 54 + batch, 0.2, host));
    result.push_back(std::make_unique<table>(std::move(columns)));
  }
  return result;
}

/**
 * Sorts copies of `batches` (on the device) by column 0 and checks the output against a stable
 * sort of them, row for row; `between` runs after the first output batch.
 * @return the sort's statistics and each output batch's rows
 */
std::pair<external_sort_statistics, std::vector<std::size_t>> sort_stably_and_check(
  sort_environment& env,
  std::vector<std::unique_ptr<table>> const& batches,
  external_sort_options const& options,
  std::function<void()> const& between = {}) {
  memory_resources const device{env.device()};
  external_sorter sorter{env.store(), options, default_stream(), device, env.host()};
  std::vector<table_view> inputs;
  for (auto const& batch : batches) {
    inputs.push_back(batch->view());
    sorter.push(spillway::copy(batch->view(), default_stream(), device));
  }
  sorter.finish();
  std::vector<std::unique_ptr<table>> outputs;
  std::vector<std::size_t> rows;
  while (auto batch = sorter.next()) {
    rows.push_back(batch->num_rows());
    outputs.push_back(spillway::copy(batch->view(), default_stream(), env.host()));
    if (outputs.size() == 1 && between) {
      between();
    }
  }
  std::vector<table_view> views;
  for (auto const& output : outputs) {
    views.push_back(output->view());
  }
  auto const all_input  = concatenate(inputs, default_stream(), env.host());
  auto const all_output = concatenate(views, default_stream(), env.host());
  auto const reference  = stably_sorted(all_input->view(), options, env.host());
  SPILLWAY_EXPECT_TABLES_EQUAL(reference->view(), all_output->view());
  return {sorter.statistics(), rows};
}

external_sort_options in_place_options() {
  external_sort_options options;
  options.key_columns        = {0};
  options.merge_budget_bytes = 32_MiB;
  options.output_batch_bytes = 1_MiB;
  return options;
}

TEST(ExternalSortInPlace, FewKeyRunsAreMovedInPlaceIntoTheBatchesTheyCameIn) {
  // 100 000 rows whose sorted order walks the input in 50 ascending runs (one a key): the plain
  // columns are scattered in place, the string and nullable columns gathered anew, and the
  // output batches are the input batches, with their row counts.
  sort_environment env{64_MiB, 32_MiB};
  testing::default_resource_guard const guard;
  auto const batches       = series_batches(10, 10000, 50, env.host());
  auto const [stats, rows] = sort_stably_and_check(env, batches, in_place_options());
  EXPECT_EQ(stats.batches_sorted_in_place, 10U);
  EXPECT_EQ(rows, std::vector<std::size_t>(10, 10000));
  EXPECT_EQ(stats.output_batches, 10U);
  EXPECT_EQ(stats.chunks_created, 0U);
  EXPECT_LE(env.raw_device().peak_bytes(), 64_MiB);
}

TEST(ExternalSortInPlace, TwoKeysMoveWithTheOtherPlainColumns) {
  // Two INT64 keys (not decoded from the sort's prefixes: only a single key is) move in place
  // with the other plain column (FLOAT64). Sorted by the row number first, the rows are in order
  // already: nothing to move.
  sort_environment env{64_MiB, 32_MiB};
  testing::default_resource_guard const guard;
  auto const batches = series_batches(10, 10000, 50, env.host());
  for (auto const& keys : {std::vector<std::size_t>{0, 1}, std::vector<std::size_t>{1, 0}}) {
    auto options        = in_place_options();
    options.key_columns = keys;
    // The key column descending, the row number ascending: still 50 ascending runs.
    options.orders = sort_order(keys.size(), {order::ASCENDING, null_order::BEFORE});
    options.orders[keys[0] == 0 ? 0 : 1].direction = order::DESCENDING;
    auto const [stats, rows]                       = sort_stably_and_check(env, batches, options);
    bool const in_order                            = keys.front() == 1;
    EXPECT_EQ(stats.batches_sorted_in_place, in_order ? 0U : 10U);
    EXPECT_EQ(stats.output_rows, 100000U);
  }
}

TEST(ExternalSortInPlace, SpilledSortedBatchesComeBackInOrder) {
  // Every sorted batch not yet handed out is spilled after the first: each comes back from the
  // host tier (a copy) in its place.
  sort_environment env{64_MiB, 32_MiB};
  testing::default_resource_guard const guard;
  auto const batches       = series_batches(10, 10000, 50, env.host());
  std::size_t spilled      = 0;
  auto const [stats, rows] = sort_stably_and_check(env, batches, in_place_options(), [&] {
    spilled = env.store().spill(std::size_t{1} << 40, spill_tier::DEVICE);
  });
  EXPECT_GT(spilled, 0U);
  EXPECT_EQ(stats.batches_sorted_in_place, 10U);
  EXPECT_EQ(rows, std::vector<std::size_t>(10, 10000));
}

TEST(ExternalSortInPlace, ManyRunsOrLargeBatchesAreGatheredBatchByBatch) {
  sort_environment env{64_MiB, 32_MiB};
  testing::default_resource_guard const guard;
  {
    // Keys at random: a run a row or two; gathered.
    auto const batches    = series_batches(10, 10000, std::size_t{1} << 40, env.host());
    auto const [stats, _] = sort_stably_and_check(env, batches, in_place_options());
    EXPECT_EQ(stats.batches_sorted_in_place, 0U);
  }
  {
    // Batches larger than an output batch may be.
    auto options               = in_place_options();
    options.output_batch_bytes = 256_KiB;
    auto const batches         = series_batches(10, 10000, 50, env.host());
    auto const [stats, rows]   = sort_stably_and_check(env, batches, options);
    EXPECT_EQ(stats.batches_sorted_in_place, 0U);
    EXPECT_GT(rows.size(), 10U);
  }
}

}  // namespace
}  // namespace spillway
