// The ops on tables in CUDA device memory, row for row against the CPU on the same rows:
// sorted_order and sort (the device sort is always stable), bounds, the order check and the
// merge. Without a GPU they skip.
#include "ops/parallel_gather.hpp"
#include "ops/reference_order.hpp"
#include "testing/cuda_testing.hpp"
#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#ifdef SPILLWAY_HAS_RMM
#include <spillway/memory/rmm_interop.hpp>

#include <rmm/mr/cuda_async_memory_resource.hpp>
#endif

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_column;
using testing::reference_sorted_order;
using testing::to_vector;

class CudaSortTest : public ::testing::Test {
 protected:
  void SetUp() override {
    SPILLWAY_REQUIRE_CUDA_DEVICE();
    parts_.emplace();
    output_.emplace(parts_->device);
    temporary_.emplace(parts_->device);
  }

  /// The device's sorted order of `keys` (on the host), checked against the CPU's stable sort,
  /// with the resources balanced afterwards.
  void check(table_view const& keys, sort_order const& orders) {
    auto const on_device     = testing::to_device(keys, *parts_);
    std::size_t const before = output_->statistics().current_bytes;
    auto const result        = sorted_order(on_device->view(),
                                     orders,
                                     sort_stability::UNSTABLE,
                                     parts_->stream.view(),
                                     memory_resources{*output_, *temporary_});
    EXPECT_EQ(output_->statistics().current_bytes - before, result->allocated_bytes());
    EXPECT_EQ(temporary_->statistics().current_bytes, 0U) << "scratch was not freed";
    auto const back = testing::to_host(table_view{result->view()}, *parts_, host_);
    ASSERT_EQ(to_vector(back->view().column(0)), reference_sorted_order(keys, orders));
  }

  host_memory_resource host_;
  std::optional<testing::cuda_fixture_parts> parts_;
  std::optional<statistics_resource_adaptor> output_;
  std::optional<statistics_resource_adaptor> temporary_;
  testing::default_resource_guard guard_;
};

std::vector<column_order> every_column_order() {
  return {{order::ASCENDING, null_order::BEFORE},
          {order::ASCENDING, null_order::AFTER},
          {order::DESCENDING, null_order::BEFORE},
          {order::DESCENDING, null_order::AFTER}};
}

TEST_F(CudaSortTest, EveryTypeInEveryOrderWithNulls) {
  for (data_type const type : all_types()) {
    for (double const nulls : {0.0, 0.25}) {
      auto const key = random_column(type, 20000, 11, nulls, host_, 40);
      for (auto const& key_order : every_column_order()) {
        SCOPED_TRACE(to_string(type) + (nulls > 0 ? " with nulls" : ""));
        check(table_view{key->view()}, sort_order{key_order});
      }
    }
  }
}

TEST_F(CudaSortTest, FloatSpecialsTieAndOrderAsOnTheCpu) {
  double const nan = std::numeric_limits<double>::quiet_NaN();
  double const inf = std::numeric_limits<double>::infinity();
  std::vector<double> const values{0.0, -0.0, nan, -nan, inf, -inf, 1.5, -1.5, 0.0, nan, -0.0};
  auto const key = make_fixed_column<double>(data_type{type_id::FLOAT64}, values, {}, host_);
  for (auto const& key_order : every_column_order()) {
    check(table_view{key->view()}, sort_order{key_order});
  }
}

TEST_F(CudaSortTest, StringsWithLongCommonPrefixesAndPrefixesOfEachOther) {
  std::vector<std::optional<std::string>> values;
  std::mt19937_64 random{12};
  std::string const stem(37, 'q');
  for (std::size_t row = 0; row < 5000; ++row) {
    std::size_t const extra = random() % 12;
    std::string value       = stem.substr(0, random() % 38);
    for (std::size_t b = 0; b < extra; ++b) {
      value.push_back(static_cast<char>(random() % 3 == 0 ? '\0' : 'a' + random() % 3));
    }
    if (random() % 17 == 0) {
      values.emplace_back(std::nullopt);
    } else {
      values.emplace_back(value);
    }
  }
  values.emplace_back(std::string{"\xff\xfe", 2});
  values.emplace_back(std::string{});
  auto const key = make_string_column(values, host_);
  for (auto const& key_order : every_column_order()) {
    check(table_view{key->view()}, sort_order{key_order});
  }
}

TEST_F(CudaSortTest, SeveralKeysInMixedDirections) {
  auto const few    = random_column(data_type{type_id::INT8}, 30000, 13, 0.1, host_);
  auto const text   = random_column(data_type{type_id::STRING}, 30000, 14, 0.05, host_, 3);
  auto const floats = random_column(data_type{type_id::FLOAT32}, 30000, 15, 0.0, host_);
  table_view const keys{few->view(), text->view(), floats->view()};
  check(keys,
        {{order::DESCENDING, null_order::AFTER},
         {order::ASCENDING, null_order::BEFORE},
         {order::DESCENDING, null_order::BEFORE}});
}

TEST_F(CudaSortTest, AllEqualSortedAndSmallInputsKeepInputOrder) {
  std::vector<std::int64_t> const same(70000, 42);
  auto const equal = make_fixed_column<std::int64_t>(data_type{type_id::INT64}, same, {}, host_);
  check(table_view{equal->view()}, {});
  std::vector<std::int64_t> ascending(70000);
  for (std::size_t row = 0; row < ascending.size(); ++row) {
    ascending[row] = static_cast<std::int64_t>(row) - 35000;
  }
  auto const sorted =
    make_fixed_column<std::int64_t>(data_type{type_id::INT64}, ascending, {}, host_);
  check(table_view{sorted->view()}, {{order::DESCENDING, null_order::BEFORE}});
  for (std::size_t rows : {0U, 1U, 2U}) {
    auto const small = random_column(data_type{type_id::INT32}, rows, 16, 0.0, host_);
    check(table_view{small->view()}, {});
  }
}

TEST_F(CudaSortTest, SortGathersEveryColumnOnTheDevice) {
  auto const values    = testing::random_table(all_types(), 40000, 17, 0.1, host_);
  auto const on_device = testing::to_device(values->view(), *parts_);
  table_view const keys{values->view().column(4), values->view().column(12)};
  sort_order const orders{{order::ASCENDING, null_order::AFTER},
                          {order::DESCENDING, null_order::BEFORE}};
  auto const expected = sort(values->view(),
                             keys,
                             orders,
                             sort_stability::STABLE,
                             default_stream(),
                             memory_resources{host_});
  table_view const device_keys{on_device->view().column(4), on_device->view().column(12)};
  auto const result = sort(on_device->view(),
                           device_keys,
                           orders,
                           sort_stability::STABLE,
                           parts_->stream.view(),
                           memory_resources{*output_, *temporary_});
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
  auto const back = testing::to_host(result->view(), *parts_, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
}

TEST_F(CudaSortTest, IsSortedAgreesWithTheCpu) {
  auto const key = random_column(data_type{type_id::STRING}, 3000, 18, 0.1, host_, 6);
  sort_order const orders{{order::DESCENDING, null_order::AFTER}};
  auto const sorted          = sort(table_view{key->view()},
                           table_view{key->view()},
                           orders,
                           sort_stability::STABLE,
                           default_stream(),
                           memory_resources{host_});
  auto const unsorted_device = testing::to_device(table_view{key->view()}, *parts_);
  auto const sorted_device   = testing::to_device(sorted->view(), *parts_);
  EXPECT_FALSE(is_sorted(unsorted_device->view(), orders));
  EXPECT_TRUE(is_sorted(sorted_device->view(), orders));
  EXPECT_FALSE(is_sorted(sorted_device->view(), {{order::ASCENDING, null_order::AFTER}}));
}

TEST_F(CudaSortTest, BoundsMatchTheCpuWithNeedlesOnTheHostOrTheDevice) {
  auto const values = testing::random_table(all_types(), 5000, 19, 0.1, host_);
  table_view const keys{values->view().column(3), values->view().column(12)};
  sort_order const orders{{order::ASCENDING, null_order::AFTER},
                          {order::DESCENDING, null_order::BEFORE}};
  auto const haystack =
    sort(keys, keys, orders, sort_stability::STABLE, default_stream(), memory_resources{host_});
  // Needles: rows of the haystack itself (exact hits) and other rows.
  auto const others = testing::random_table(all_types(), 700, 20, 0.1, host_);
  table_view const hits{slice(haystack->view(), 100, 900)};
  table_view const misses{others->view().column(3), others->view().column(12)};
  auto const on_device = testing::to_device(haystack->view(), *parts_);
  for (table_view const& needles : {hits, misses}) {
    auto const needles_device = testing::to_device(needles, *parts_);
    for (bool upper : {false, true}) {
      auto const expected =
        upper ? upper_bound(haystack->view(), needles, orders, default_stream(), host_)
              : lower_bound(haystack->view(), needles, orders, default_stream(), host_);
      for (table_view const& probe : {needles, needles_device->view()}) {
        memory_resources const mrs{*output_, *temporary_};
        auto const actual =
          upper ? upper_bound(on_device->view(), probe, orders, parts_->stream.view(), mrs)
                : lower_bound(on_device->view(), probe, orders, parts_->stream.view(), mrs);
        EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
        auto const back = testing::to_host(table_view{actual->view()}, *parts_, host_);
        EXPECT_EQ(to_vector(back->view().column(0)), to_vector(expected->view()))
          << (upper ? "upper" : "lower");
      }
    }
  }
}

TEST_F(CudaSortTest, MergeAndMergeOrderMatchTheCpu) {
  std::vector<std::size_t> const key_columns{4, 12};
  sort_order const orders{{order::DESCENDING, null_order::BEFORE},
                          {order::ASCENDING, null_order::AFTER}};
  std::vector<std::unique_ptr<table>> pieces;
  std::vector<std::unique_ptr<table>> device_pieces;
  std::vector<table_view> views;
  std::vector<table_view> device_views;
  for (std::size_t piece = 0; piece < 5; ++piece) {
    auto const rows   = piece == 2 ? 0 : 1000 + 37 * piece;
    auto const values = testing::random_table(all_types(), rows, 30 + piece, 0.1, host_);
    pieces.push_back(sort(values->view(),
                          values->view().select(key_columns),
                          orders,
                          sort_stability::STABLE,
                          default_stream(),
                          memory_resources{host_}));
    device_pieces.push_back(testing::to_device(pieces.back()->view(), *parts_));
    views.push_back(pieces.back()->view());
    device_views.push_back(device_pieces.back()->view());
  }
  auto const expected = merge(views, key_columns, orders, default_stream(), host_);
  auto const merged   = merge(device_views,
                            key_columns,
                            orders,
                            parts_->stream.view(),
                            memory_resources{*output_, *temporary_});
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
  auto const back = testing::to_host(merged->view(), *parts_, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());

  auto const expected_order =
    detail::merge_order(views, key_columns, orders, default_stream(), host_);
  auto const order      = detail::merge_order(device_views,
                                         key_columns,
                                         orders,
                                         parts_->stream.view(),
                                         memory_resources{*output_, *temporary_});
  auto const order_back = testing::to_host(table_view{order->view()}, *parts_, host_);
  EXPECT_EQ(to_vector(order_back->view().column(0)), to_vector(expected_order->view()));

  // An input in host memory beside device ones is refused, not read by the kernel.
  std::vector<table_view> const mixed{device_views[0], views[1]};
  EXPECT_THROW(
    (void)detail::merge_order(
      mixed, key_columns, orders, parts_->stream.view(), memory_resources{*output_, *temporary_}),
    invalid_argument);
}

TEST_F(CudaSortTest, HashRowsAndPartitionsMatchTheCpu) {
  auto const values    = testing::random_table(all_types(), 20000, 40, 0.1, host_);
  auto const on_device = testing::to_device(values->view(), *parts_);
  std::vector<std::size_t> const key_columns{4, 12, 9};
  memory_resources const mrs{*output_, *temporary_};
  auto const expected_hashes =
    hash_rows(values->view().select(key_columns), 17, default_stream(), memory_resources{host_});
  auto const hashes =
    hash_rows(on_device->view().select(key_columns), 17, parts_->stream.view(), mrs);
  auto const hashes_back = testing::to_host(table_view{hashes->view()}, *parts_, host_);
  EXPECT_EQ(to_vector(hashes_back->view().column(0)), to_vector(expected_hashes->view()));
  for (std::size_t partitions : {1U, 7U, 64U, 1000U}) {
    SCOPED_TRACE(std::to_string(partitions) + " partitions");
    auto const expected = hash_partition(
      values->view(), key_columns, partitions, 17, default_stream(), memory_resources{host_});
    auto const result =
      hash_partition(on_device->view(), key_columns, partitions, 17, parts_->stream.view(), mrs);
    EXPECT_EQ(result.offsets, expected.offsets);
    auto const back = testing::to_host(result.rows->view(), *parts_, host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected.rows->view(), back->view());
  }
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
}

TEST_F(CudaSortTest, RangePartitionMatchesTheCpu) {
  auto const values    = testing::random_table(all_types(), 20000, 41, 0.1, host_);
  auto const on_device = testing::to_device(values->view(), *parts_);
  std::vector<std::size_t> const key_columns{12, 3};
  sort_order const orders{{order::DESCENDING, null_order::AFTER}, {}};
  // Splitters: every 1000th row of the sorted keys, on the host and on the device.
  table_view const keys = values->view().select(key_columns);
  auto const sorted =
    sort(keys, keys, orders, sort_stability::STABLE, default_stream(), memory_resources{host_});
  std::vector<std::int64_t> picks;
  for (std::int64_t row = 999; row < 20000; row += 1000) {
    picks.push_back(row);
  }
  auto const pick_map =
    make_fixed_column<std::int64_t>(data_type{type_id::INT64}, picks, {}, host_);
  auto const splitters =
    gather(sorted->view(), *pick_map, out_of_bounds_policy::FAIL, default_stream(), host_);
  auto const splitters_device = testing::to_device(splitters->view(), *parts_);
  auto const expected         = range_partition(
    values->view(), key_columns, splitters->view(), orders, default_stream(), host_);
  for (table_view const& cuts : {splitters->view(), splitters_device->view()}) {
    auto const result = range_partition(on_device->view(),
                                        key_columns,
                                        cuts,
                                        orders,
                                        parts_->stream.view(),
                                        memory_resources{*output_, *temporary_});
    EXPECT_EQ(result.offsets, expected.offsets);
    auto const back = testing::to_host(result.rows->view(), *parts_, host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected.rows->view(), back->view());
  }
  // Splitters out of order are refused.
  auto const reversed = sort(splitters->view(),
                             splitters->view(),
                             {{order::ASCENDING, null_order::BEFORE}, {}},
                             sort_stability::STABLE,
                             default_stream(),
                             host_);
  EXPECT_THROW((void)range_partition(on_device->view(),
                                     key_columns,
                                     reversed->view(),
                                     orders,
                                     parts_->stream.view(),
                                     memory_resources{*output_, *temporary_}),
               invalid_argument);
}

TEST_F(CudaSortTest, SampleAndSplittersPickTheRowsTheCpuPicks) {
  auto const values    = testing::random_table(all_types(), 9000, 42, 0.1, host_);
  auto const on_device = testing::to_device(values->view(), *parts_);
  memory_resources const mrs{*output_, *temporary_};
  // Floyd's algorithm (few samples) and selection sampling (many).
  for (std::size_t samples : {50U, 5000U}) {
    auto const expected = sample(values->view(), samples, 9, default_stream(), host_);
    auto const result   = sample(on_device->view(), samples, 9, parts_->stream.view(), mrs);
    auto const back     = testing::to_host(result->view(), *parts_, host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  }
  auto const expected = quantile_splitters(values->view(), 16, default_stream(), host_);
  auto const result   = quantile_splitters(on_device->view(), 16, parts_->stream.view(), mrs);
  auto const back     = testing::to_host(result->view(), *parts_, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
}

TEST_F(CudaSortTest, GatherPiecesFromSeveralInputsMatchesTheCpu) {
  std::vector<std::unique_ptr<table>> inputs;
  std::vector<std::unique_ptr<table>> device_inputs;
  std::vector<table_view> views;
  std::vector<table_view> device_views;
  for (std::size_t input = 0; input < 3; ++input) {
    inputs.push_back(testing::random_table(all_types(), 700 + 300 * input, 50 + input, 0.2, host_));
    // From an unaligned offset, so that masks and offsets are read where the views start.
    views.push_back(slice(inputs.back()->view(), 3, inputs.back()->num_rows()));
    device_inputs.push_back(testing::to_device(inputs.back()->view(), *parts_));
    device_views.push_back(
      slice(device_inputs.back()->view(), 3, device_inputs.back()->num_rows()));
  }
  std::mt19937_64 random{51};
  std::vector<std::uint64_t> ids(2500);
  for (auto& id : ids) {
    std::uint64_t const input = random() % 3;
    id = (input << detail::SOURCE_ROW_BITS) | (random() % views[input].num_rows());
  }
  std::vector<std::size_t> const starts{0, 1000, 1000, 2500};
  auto const expected = detail::gather_pieces_in_parallel(
    views, ids.data(), starts, detail::SOURCE_ROW_BITS, default_stream(), host_);
  memory_resources const mrs{*output_, *temporary_};
  auto const ids_device = testing::to_device(
    table_view{
      make_fixed_column<std::uint64_t>(data_type{type_id::UINT64}, ids, {}, host_)->view()},
    *parts_);
  // The ids from the host and from the device.
  for (std::uint64_t const* source : {static_cast<std::uint64_t const*>(ids.data()),
                                      ids_device->view().column(0).data<std::uint64_t>()}) {
    auto const pieces = detail::gather_pieces_in_parallel(
      device_views, source, starts, detail::SOURCE_ROW_BITS, parts_->stream.view(), mrs);
    ASSERT_EQ(pieces.size(), expected.size());
    for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
      auto const back = testing::to_host(pieces[piece]->view(), *parts_, host_);
      SPILLWAY_EXPECT_TABLES_EQUAL(expected[piece]->view(), back->view());
    }
  }
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
}

TEST_F(CudaSortTest, SortedSourcesIsTheStableOrderOfTheStackedKeys) {
  std::vector<std::unique_ptr<table>> keys;
  std::vector<std::unique_ptr<table>> device_keys;
  std::vector<table_view> views;
  std::vector<table_view> device_views;
  for (std::size_t input = 0; input < 4; ++input) {
    keys.push_back(testing::random_table(
      {data_type{type_id::INT32}, data_type{type_id::INT64}}, 900, 60 + input, 0.1, host_));
    device_keys.push_back(testing::to_device(keys.back()->view(), *parts_));
    views.push_back(keys.back()->view());
    device_views.push_back(device_keys.back()->view());
  }
  sort_order const orders{{order::DESCENDING, null_order::AFTER}, {}};
  auto const expected = detail::sorted_sources(views, orders, default_stream(), host_);
  std::vector<std::unique_ptr<column>> decoded;  // one null entry per key column comes back
  decoded.push_back(make_fixed_column<std::int64_t>(data_type{type_id::INT64}, {1}, {}, host_));
  auto const result = detail::sorted_sources(
    device_views, orders, parts_->stream.view(), memory_resources{*output_, *temporary_}, &decoded);
  ASSERT_EQ(decoded.size(), 2U);
  EXPECT_EQ(decoded[0], nullptr);
  EXPECT_EQ(decoded[1], nullptr);
  auto const back = testing::to_host(table_view{result->view()}, *parts_, host_);
  EXPECT_EQ(to_vector(back->view().column(0)), to_vector(expected->view()));
}

/// The bytes of a packed partition's frame, wherever it lives.
std::vector<std::uint8_t> frame_bytes(packed_partition const& part) {
  std::vector<std::uint8_t> bytes(part.frame.size());
  if (!bytes.empty()) {
    copy_bytes(bytes.data(),
               memory_kind::HOST,
               part.frame.data(),
               part.frame.kind(),
               bytes.size(),
               default_stream());
  }
  return bytes;
}

TEST_F(CudaSortTest, PartitionAndPackMakesTheCpusFramesByteForByte) {
  auto const values     = testing::random_table(all_types(), 12000, 43, 0.15, host_);
  auto const on_device  = testing::to_device(slice(values->view(), 5, 12000), *parts_);
  table_view const rows = slice(values->view(), 5, 12000);
  std::vector<std::size_t> const key_columns{2, 12};
  memory_resources const mrs{*output_, *temporary_};
  auto const compare = [&](std::vector<packed_partition> const& expected,
                           std::vector<packed_partition> const& actual) {
    ASSERT_EQ(actual.size(), expected.size());
    for (std::size_t partition = 0; partition < actual.size(); ++partition) {
      EXPECT_EQ(actual[partition].num_rows, expected[partition].num_rows);
      EXPECT_EQ(actual[partition].metadata, expected[partition].metadata);
      EXPECT_TRUE(is_cuda_device_pointer(actual[partition].frame.data()) ||
                  actual[partition].frame.size() == 0);
      EXPECT_EQ(frame_bytes(actual[partition]), frame_bytes(expected[partition]))
        << "partition " << partition;
    }
  };
  compare(hash_partition_and_pack(rows, key_columns, 13, 5, 128, default_stream(), host_),
          hash_partition_and_pack(
            on_device->view(), key_columns, 13, 5, 128, parts_->stream.view(), mrs));
  // Splitters from the sorted keys, kept on the host as a shuffle keeps them.
  table_view const keys = rows.select(key_columns);
  auto const sorted =
    sort(keys, keys, {}, sort_stability::STABLE, default_stream(), memory_resources{host_});
  auto const splitters = quantile_splitters(sorted->view(), 9, default_stream(), host_);
  compare(
    range_partition_and_pack(rows, key_columns, splitters->view(), {}, 64, default_stream(), host_),
    range_partition_and_pack(
      on_device->view(), key_columns, splitters->view(), {}, 64, parts_->stream.view(), mrs));
  EXPECT_EQ(temporary_->statistics().current_bytes, 0U);
}

#ifdef SPILLWAY_HAS_RMM
TEST(CudaRmmInterop, SortWithOutputAndScratchFromAnRmmPool) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  // An engine's own RMM resource feeds the device sort: output and scratch both come from it.
  testing::cuda_fixture_parts parts;
  rmm::mr::cuda_async_memory_resource pool;
  rmm_device_resource device{rmm::device_async_resource_ref{pool}};
  statistics_resource_adaptor output{device};
  statistics_resource_adaptor temporary{device};
  host_memory_resource host;
  auto const key    = random_column(data_type{type_id::INT64}, 100000, 5, 0.1, host, 1000);
  auto const values = random_column(data_type{type_id::STRING}, 100000, 6, 0.1, host, 40);
  std::vector<column_view> const columns{key->view(), values->view()};
  table_view const in{columns};
  std::vector<std::size_t> const key_index{0};
  auto const on_device = copy(in, parts.stream.view(), memory_resources{device, device});
  sort_order const orders{{order::ASCENDING, null_order::AFTER}};
  auto const sorted = sort(on_device->view(),
                           on_device->view().select(key_index),
                           orders,
                           sort_stability::STABLE,
                           parts.stream.view(),
                           memory_resources{output, temporary});
  EXPECT_EQ(temporary.statistics().current_bytes, 0U);
  EXPECT_EQ(output.statistics().current_bytes, sorted->allocated_bytes());
  auto const back     = testing::to_host(sorted->view(), parts, host);
  auto const expected = sort(in,
                             in.select(key_index),
                             orders,
                             sort_stability::STABLE,
                             default_stream(),
                             memory_resources{host, host});
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
}
#endif

}  // namespace
}  // namespace spillway
