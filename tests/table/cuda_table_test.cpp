// Copies and gathers of tables in CUDA device memory, against the CPU's results on the same
// rows. Without a GPU they skip, and the checks that host and emulated device tables stay on the
// CPU path run.
#include "table/cuda/device_table.hpp"
#include "testing/cuda_testing.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::random_table;

TEST(CudaTable, HostAndEmulatedDeviceTablesStayOnTheCpuPath) {
  host_memory_resource host;
  emulated_device_memory_resource emulated{64_MiB};
  auto const on_host     = random_table(all_types(), 100, 1, 0.1, host);
  auto const on_emulated = copy(on_host->view(), default_stream(), memory_resources{emulated});
  EXPECT_FALSE(detail::cuda::on_device(on_host->view()));
  EXPECT_FALSE(detail::cuda::on_device(on_emulated->view()));
  EXPECT_EQ(on_emulated->view().column(0).kind(), memory_kind::DEVICE);
  auto const back = copy(on_emulated->view(), default_stream(), memory_resources{host});
  SPILLWAY_EXPECT_TABLES_EQUAL(on_host->view(), back->view());
}

TEST(CudaTable, CopiesEveryTypeToAndFromTheDeviceFromAnyOffset) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  host_memory_resource host;
  testing::cuda_fixture_parts parts;
  auto const source = random_table(all_types(), 5000, 2, 0.2, host);
  // Offsets 0, 8 and 3: whole mask bytes, and bits that must be realigned.
  for (std::size_t begin : {0U, 8U, 3U}) {
    SCOPED_TRACE("rows from " + std::to_string(begin));
    table_view const rows = slice(source->view(), begin, 4990);
    auto const on_device  = testing::to_device(rows, parts);
    EXPECT_TRUE(detail::cuda::on_device(on_device->view()));
    // Device to device, from an unaligned offset again, then back.
    table_view const inner = slice(on_device->view(), 5, on_device->num_rows());
    auto const device_copy = testing::to_device(inner, parts);
    auto const back        = testing::to_host(device_copy->view(), parts, host);
    auto const expected    = copy(slice(rows, 5, rows.num_rows()), default_stream(), host);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  }
}

TEST(CudaTable, CopiesEmptyTablesAndEmptyStrings) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  host_memory_resource host;
  testing::cuda_fixture_parts parts;
  auto const empty     = random_table(all_types(), 0, 3, 0.0, host);
  auto const on_device = testing::to_device(empty->view(), parts);
  auto const back      = testing::to_host(on_device->view(), parts, host);
  SPILLWAY_EXPECT_TABLES_EQUAL(empty->view(), back->view());
  auto const blanks = testing::make_string_column({"", "", std::nullopt, ""}, host);
  auto const blanks_device =
    testing::to_device(table_view{std::vector<column_view>{blanks->view()}}, parts);
  auto const blanks_back = testing::to_host(blanks_device->view(), parts, host);
  SPILLWAY_EXPECT_TABLES_EQUAL(table_view{std::vector<column_view>{blanks->view()}},
                               blanks_back->view());
}

/// The same gather on the CPU and on the device, for a map of every index type.
TEST(CudaTable, GatherMatchesTheCpuForEveryTypeAndMapType) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  host_memory_resource host;
  testing::cuda_fixture_parts parts;
  auto const source     = random_table(all_types(), 3000, 4, 0.15, host);
  auto const on_device  = testing::to_device(slice(source->view(), 3, 3000), parts);
  table_view const rows = slice(source->view(), 3, 3000);
  std::mt19937_64 random{5};
  std::vector<std::int64_t> indices(7001);
  for (auto& index : indices) {
    index = static_cast<std::int64_t>(random() % rows.num_rows());
  }
  std::vector<std::uint32_t> const narrow(indices.begin(), indices.end());
  auto const map64 = make_fixed_column<std::int64_t>(data_type{type_id::INT64}, indices, {}, host);
  auto const map32 = make_fixed_column<std::uint32_t>(data_type{type_id::UINT32}, narrow, {}, host);
  auto const expected =
    gather(rows, *map64, out_of_bounds_policy::FAIL, default_stream(), memory_resources{host});
  for (column const* map : {map64.get(), map32.get()}) {
    SCOPED_TRACE(to_string(map->type()));
    // The map from the host, and from the device.
    auto const map_device =
      testing::to_device(table_view{std::vector<column_view>{map->view()}}, parts);
    for (column_view const view : {map->view(), map_device->view().column(0)}) {
      auto const result = gather(on_device->view(),
                                 view,
                                 out_of_bounds_policy::FAIL,
                                 parts.stream.view(),
                                 memory_resources{parts.device, parts.device});
      EXPECT_TRUE(detail::cuda::on_device(result->view()));
      auto const back = testing::to_host(result->view(), parts, host);
      SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
    }
  }
}

TEST(CudaTable, GatherOutOfBoundsFailsNamingTheRowOrNullifies) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  host_memory_resource host;
  testing::cuda_fixture_parts parts;
  auto const source    = random_table(all_types(), 50, 6, 0.0, host);
  auto const on_device = testing::to_device(source->view(), parts);
  std::vector<std::int64_t> const indices{4, 49, -1, 50, 0};
  auto const map = make_fixed_column<std::int64_t>(data_type{type_id::INT64}, indices, {}, host);
  try {
    (void)gather(on_device->view(),
                 *map,
                 out_of_bounds_policy::FAIL,
                 parts.stream.view(),
                 memory_resources{parts.device, parts.device});
    FAIL() << "gathered an index out of bounds";
  } catch (invalid_argument const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("row 2 is out of bounds: index -1, source rows 50"), std::string::npos)
      << what;
  }
  auto const expected =
    gather(source->view(), *map, out_of_bounds_policy::NULLIFY, default_stream(), host);
  auto const result = gather(on_device->view(),
                             *map,
                             out_of_bounds_policy::NULLIFY,
                             parts.stream.view(),
                             memory_resources{parts.device, parts.device});
  auto const back   = testing::to_host(result->view(), parts, host);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  EXPECT_EQ(back->view().column(0).null_count(), 2U);
}

TEST(CudaTable, ConcatenateMatchesTheCpuFromAnyOffsets) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  host_memory_resource host;
  testing::cuda_fixture_parts parts;
  auto const with_nulls    = random_table(all_types(), 1000, 7, 0.3, host);
  auto const without_nulls = random_table(all_types(), 700, 8, 0.0, host);
  // Pieces that start and end inside mask bytes, an empty one, and one without a mask.
  std::vector<table_view> const pieces{slice(with_nulls->view(), 3, 500),
                                       slice(without_nulls->view(), 0, 0),
                                       slice(without_nulls->view(), 5, 700),
                                       slice(with_nulls->view(), 501, 998)};
  std::vector<std::unique_ptr<table>> on_device;
  std::vector<table_view> device_views;
  for (auto const& piece : pieces) {
    on_device.push_back(testing::to_device(piece, parts));
    device_views.push_back(on_device.back()->view());
  }
  auto const expected = concatenate(pieces, default_stream(), host);
  auto const result =
    concatenate(device_views, parts.stream.view(), memory_resources{parts.device});
  EXPECT_TRUE(detail::cuda::on_device(result->view()));
  auto const back = testing::to_host(result->view(), parts, host);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
}

}  // namespace
}  // namespace spillway
