#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;

/// The rows of `source` at `indices`, built value by value; an index outside the source (or
/// negative) gives a null row.
std::unique_ptr<table> reference_gather(table_view const& source,
                                        std::vector<std::int64_t> const& indices,
                                        resource_ref resource) {
  auto const in_bounds = [&](std::int64_t index) {
    return index >= 0 && static_cast<std::size_t>(index) < source.num_rows();
  };
  std::vector<std::unique_ptr<column>> columns;
  for (auto const& column : source) {
    std::vector<bool> validity;
    for (std::int64_t const index : indices) {
      validity.push_back(in_bounds(index) && column.is_valid(static_cast<std::size_t>(index)));
    }
    if (!is_fixed_width(column.type())) {
      std::vector<std::optional<std::string>> values;
      for (std::size_t row = 0; row < indices.size(); ++row) {
        if (validity[row]) {
          values.emplace_back(
            std::string{column.string_at(static_cast<std::size_t>(indices[row]))});
        } else {
          values.emplace_back(std::nullopt);
        }
      }
      columns.push_back(column.type().id() == type_id::BINARY
                          ? testing::make_binary_column(values, resource)
                          : make_string_column(values, resource));
      continue;
    }
    columns.push_back(visit_fixed_width(column.type(), [&]<typename T>() {
      std::vector<T> values;
      for (std::size_t row = 0; row < indices.size(); ++row) {
        values.push_back(validity[row] ? column.data<T>()[indices[row]] : T{});
      }
      return make_fixed_column<T>(column.type(), values, validity, resource);
    }));
  }
  return std::make_unique<table>(std::move(columns));
}

/// A gather map of index type `Index` holding `indices`.
template <typename Index>
std::unique_ptr<column> make_map(type_id id,
                                 std::vector<std::int64_t> const& indices,
                                 resource_ref resource) {
  std::vector<Index> values;
  for (std::int64_t const index : indices) {
    values.push_back(static_cast<Index>(index));
  }
  return make_fixed_column<Index>(id, values, {}, resource);
}

class Gather : public ::testing::Test {
 protected:
  testing::default_resource_guard guard_;
  host_memory_resource host_;
  emulated_device_memory_resource device_;
};

/// The same checks for every index type.
template <typename Index>
class GatherIndexType : public Gather {};

struct int32_map {
  using type                  = std::int32_t;
  static constexpr type_id ID = type_id::INT32;
};
struct int64_map {
  using type                  = std::int64_t;
  static constexpr type_id ID = type_id::INT64;
};
struct uint32_map {
  using type                  = std::uint32_t;
  static constexpr type_id ID = type_id::UINT32;
};
struct uint64_map {
  using type                  = std::uint64_t;
  static constexpr type_id ID = type_id::UINT64;
};
using index_types = ::testing::Types<int32_map, int64_map, uint32_map, uint64_map>;
TYPED_TEST_SUITE(GatherIndexType, index_types);

TYPED_TEST(GatherIndexType, EveryTypeWithRepeatedAndReversedIndices) {
  using index_type  = typename TypeParam::type;
  auto const source = random_table(all_types(), 50, 51, 0.3, this->host_);
  std::vector<std::vector<std::int64_t>> maps{
    {0, 49, 7, 7, 3, 0, 7},  // repeated
    {},                      // empty
    {25},
  };
  std::vector<std::int64_t> reversed;
  for (std::int64_t row = 49; row >= 0; --row) {
    reversed.push_back(row);
  }
  maps.push_back(reversed);
  for (auto const& indices : maps) {
    SCOPED_TRACE(std::to_string(indices.size()) + " indices");
    auto const map = make_map<index_type>(TypeParam::ID, indices, this->host_);
    statistics_resource_adaptor stats{this->device_};
    auto const result =
      gather(*source, map->view(), out_of_bounds_policy::FAIL, default_stream(), stats);
    auto const expected = reference_gather(*source, indices, this->host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(*expected, *result);
    EXPECT_EQ(result->num_rows(), indices.size());
    EXPECT_EQ(result->num_columns(), all_types().size());
    EXPECT_EQ(stats.statistics().total_bytes, result->allocated_bytes());
    for (auto const& column : result->view()) {
      EXPECT_EQ(column.kind(), memory_kind::DEVICE);
    }
  }
}

TYPED_TEST(GatherIndexType, FailPolicyThrowsBeforeAllocating) {
  using index_type  = typename TypeParam::type;
  auto const source = random_table(all_types(), 20, 52, 0.3, this->host_);
  std::vector<std::vector<std::int64_t>> bad_maps{{0, 20}, {20}, {5, 3, 1000}};
  if constexpr (std::is_signed_v<index_type>) {
    bad_maps.push_back({0, -1, 2});
    bad_maps.push_back({std::numeric_limits<index_type>::min()});
  } else {
    bad_maps.push_back({0, static_cast<std::int64_t>(std::numeric_limits<std::int32_t>::max())});
  }
  for (auto const& indices : bad_maps) {
    auto const map = make_map<index_type>(TypeParam::ID, indices, this->host_);
    statistics_resource_adaptor stats{this->host_};
    EXPECT_THROW(
      (void)gather(*source, map->view(), out_of_bounds_policy::FAIL, default_stream(), stats),
      invalid_argument);
    EXPECT_EQ(stats.statistics().total_count, 0U);
  }
}

TYPED_TEST(GatherIndexType, NullifyPolicyGivesNullRows) {
  using index_type  = typename TypeParam::type;
  auto const source = random_table(all_types(), 30, 53, 0.3, this->host_);
  std::vector<std::int64_t> indices{3, 30, 0, 29, 1000, 3};
  if constexpr (std::is_signed_v<index_type>) {
    indices.push_back(-1);
  }
  auto const map = make_map<index_type>(TypeParam::ID, indices, this->host_);
  auto const result =
    gather(*source, map->view(), out_of_bounds_policy::NULLIFY, default_stream(), this->host_);
  std::vector<std::int64_t> reference_indices = indices;
  auto const expected = reference_gather(*source, reference_indices, this->host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(*expected, *result);
  for (auto const& column : result->view()) {
    EXPECT_TRUE(column.nullable());
    EXPECT_TRUE(column.is_null(1));
    EXPECT_TRUE(column.is_null(4));
  }
}

TEST_F(Gather, NullifyOfAColumnWithoutNulls) {
  auto const numbers = make_fixed_column<std::int16_t>(type_id::INT16, {10, 20, 30}, {}, host_);
  auto const text    = make_string_column({"a", "bb", "ccc"}, host_);
  table_view const source{numbers->view(), text->view()};
  auto const map = make_fixed_column<std::int64_t>(type_id::INT64, {2, 5, 0, -3}, {}, host_);
  auto const result =
    gather(source, map->view(), out_of_bounds_policy::NULLIFY, default_stream(), host_);
  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(make_fixed_column<std::int16_t>(
    type_id::INT16, {30, 0, 10, 0}, {true, false, true, false}, host_));
  expected_columns.push_back(make_string_column({"ccc", std::nullopt, "a", std::nullopt}, host_));
  table const expected{std::move(expected_columns)};
  SPILLWAY_EXPECT_TABLES_EQUAL(expected.view(), *result);
  EXPECT_EQ(result->view().column(0).null_count(), 2U);
  EXPECT_EQ(result->view().column(1).null_count(), 2U);
  std::vector<std::int64_t> const offsets(result->view().column(1).offsets(),
                                          result->view().column(1).offsets() + 5);
  EXPECT_EQ(offsets, (std::vector<std::int64_t>{0, 3, 3, 4, 4}));

  // Without out-of-bounds rows and without source nulls there is no mask.
  auto const in_bounds = make_fixed_column<std::int64_t>(type_id::INT64, {1, 1}, {}, host_);
  auto const plain =
    gather(source, in_bounds->view(), out_of_bounds_policy::NULLIFY, default_stream(), host_);
  EXPECT_FALSE(plain->view().column(0).nullable());
  EXPECT_FALSE(plain->view().column(1).nullable());
  EXPECT_EQ(plain->view().column(1).string_at(1), "bb");
}

TEST_F(Gather, KnownValuesWithNulls) {
  auto const numbers = make_fixed_column<std::uint64_t>(
    type_id::UINT64, {100, 200, 300, 400}, {true, false, true, true}, host_);
  auto const text = make_string_column({"zero", std::nullopt, "", "three"}, host_);
  table_view const source{numbers->view(), text->view()};
  auto const map = make_fixed_column<std::uint32_t>(type_id::UINT32, {3, 1, 2, 0, 3}, {}, host_);
  auto const result =
    gather(source, map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(make_fixed_column<std::uint64_t>(
    type_id::UINT64, {400, 0, 300, 100, 400}, {true, false, true, true, true}, host_));
  expected_columns.push_back(
    make_string_column({"three", std::nullopt, "", "zero", "three"}, host_));
  table const expected{std::move(expected_columns)};
  SPILLWAY_EXPECT_TABLES_EQUAL(expected.view(), *result);
}

TEST_F(Gather, SlicedSourceAndSlicedMap) {
  auto const source       = random_table(all_types(), 100, 54, 0.3, host_);
  table_view const sliced = slice(*source, 13, 77);  // 64 rows
  std::vector<std::int32_t> map_values;
  for (std::int32_t row = 0; row < 90; ++row) {
    map_values.push_back((row * 37) % 64);
  }
  auto const map_column = make_fixed_column(type_id::INT32, map_values, {}, host_);
  column_view const map = slice(map_column->view(), 5, 85);
  auto const result     = gather(sliced, map, out_of_bounds_policy::FAIL, default_stream(), host_);
  std::vector<std::int64_t> indices(map_values.begin() + 5, map_values.begin() + 85);
  auto const expected = reference_gather(sliced, indices, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(*expected, *result);
}

TEST_F(Gather, MapWithNullsThrows) {
  auto const source = random_table(all_types(), 10, 55, 0.0, host_);
  auto const map =
    make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3}, {true, false, true}, host_);
  statistics_resource_adaptor stats{host_};
  EXPECT_THROW(
    (void)gather(*source, map->view(), out_of_bounds_policy::NULLIFY, default_stream(), stats),
    invalid_argument);
  EXPECT_EQ(stats.statistics().total_count, 0U);
  // A mask without nulls is fine; so is a slice that leaves the null out.
  auto const masked =
    make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3}, {true, true, true}, host_);
  EXPECT_NO_THROW(
    (void)gather(*source, masked->view(), out_of_bounds_policy::FAIL, default_stream(), stats));
  EXPECT_NO_THROW((void)gather(
    *source, slice(map->view(), 2, 3), out_of_bounds_policy::FAIL, default_stream(), stats));
}

TEST_F(Gather, MapOfAnotherTypeThrows) {
  auto const source = random_table(all_types(), 10, 56, 0.0, host_);
  statistics_resource_adaptor stats{host_};
  auto const floats  = make_fixed_column<float>(type_id::FLOAT32, {1.0F, 2.0F}, {}, host_);
  auto const doubles = make_fixed_column<double>(type_id::FLOAT64, {1.0, 2.0}, {}, host_);
  auto const int16s  = make_fixed_column<std::int16_t>(type_id::INT16, {1, 2}, {}, host_);
  auto const uint8s  = make_fixed_column<std::uint8_t>(type_id::UINT8, {1, 2}, {}, host_);
  auto const stamps  = make_fixed_column<std::int64_t>(type_id::TIMESTAMP, {1, 2}, {}, host_);
  auto const text    = make_string_column({"1", "2"}, host_);
  for (column_view const map : {floats->view(),
                                doubles->view(),
                                int16s->view(),
                                uint8s->view(),
                                stamps->view(),
                                text->view()}) {
    EXPECT_THROW((void)gather(*source, map, out_of_bounds_policy::FAIL, default_stream(), stats),
                 invalid_argument)
      << to_string(map.type());
  }
  EXPECT_EQ(stats.statistics().total_count, 0U);
}

TEST_F(Gather, OutOfBoundsMessageNamesTheIndex) {
  auto const source = random_table({data_type{type_id::INT32}}, 10, 57, 0.0, host_);
  auto const map    = make_fixed_column<std::uint64_t>(
    type_id::UINT64, {1, std::numeric_limits<std::uint64_t>::max()}, {}, host_);
  try {
    (void)gather(*source, map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
    FAIL() << "expected invalid_argument";
  } catch (invalid_argument const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("row 1"), std::string::npos) << what;
    EXPECT_NE(what.find("18446744073709551615"), std::string::npos) << what;
  }
  auto const negative = make_fixed_column<std::int32_t>(type_id::INT32, {-7}, {}, host_);
  try {
    (void)gather(*source, negative->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
    FAIL() << "expected invalid_argument";
  } catch (invalid_argument const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("-7"), std::string::npos) << what;
  }
}

TEST_F(Gather, EmptySourceAndZeroColumns) {
  auto const empty = random_table(all_types(), 0, 58, 0.0, host_);
  auto const none  = make_fixed_column<std::int32_t>(type_id::INT32, {}, {}, host_);
  auto const result =
    gather(*empty, none->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
  EXPECT_EQ(result->num_rows(), 0U);
  EXPECT_EQ(result->num_columns(), all_types().size());
  for (auto const& column : result->view()) {
    if (!is_fixed_width(column.type())) {
      EXPECT_EQ(column.offsets()[0], 0);
    }
  }
  auto const one = make_fixed_column<std::int32_t>(type_id::INT32, {0}, {}, host_);
  EXPECT_THROW(
    (void)gather(*empty, one->view(), out_of_bounds_policy::FAIL, default_stream(), host_),
    invalid_argument);
  auto const nulls =
    gather(*empty, one->view(), out_of_bounds_policy::NULLIFY, default_stream(), host_);
  EXPECT_EQ(nulls->num_rows(), 1U);
  for (auto const& column : nulls->view()) {
    EXPECT_TRUE(column.is_null(0));
  }
}

}  // namespace
}  // namespace spillway
