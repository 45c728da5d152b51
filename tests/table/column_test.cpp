#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/column.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

class Column : public ::testing::Test {
 protected:
  /// Bytes of a mask for `rows`, filled with `value`.
  buffer mask_bytes(std::size_t bytes, std::uint8_t value) {
    buffer mask{bytes, default_stream(), host_};
    if (bytes > 0) {
      std::memset(mask.data(), value, bytes);
    }
    return mask;
  }

  testing::default_resource_guard guard_;
  host_memory_resource host_;
  emulated_device_memory_resource device_;
};

TEST_F(Column, ConstructorAcceptsExactlySizedBuffers) {
  column const fixed{
    data_type{type_id::INT32}, 10, buffer{40, default_stream(), host_}, mask_bytes(2, 0xFF), 0};
  EXPECT_EQ(fixed.size(), 10U);
  EXPECT_TRUE(fixed.nullable());
  column const strings{data_type{type_id::STRING},
                       3,
                       buffer{0, default_stream(), host_},
                       buffer{},
                       0,
                       buffer{32, default_stream(), host_}};
  EXPECT_EQ(strings.size(), 3U);
  EXPECT_FALSE(strings.nullable());
  column const empty{data_type{type_id::FLOAT64}, 0, buffer{}, buffer{}, 0};
  EXPECT_EQ(empty.size(), 0U);
}

TEST_F(Column, ConstructorRejectsTooSmallDataBuffer) {
  EXPECT_THROW(
    (column{data_type{type_id::INT32}, 10, buffer{39, default_stream(), host_}, buffer{}, 0}),
    invalid_argument);
  EXPECT_THROW((column{data_type{type_id::INT64}, 1, buffer{}, buffer{}, 0}), invalid_argument);
  EXPECT_THROW((column{data_type{type_id::TIMESTAMP, time_unit::SECOND},
                       3,
                       buffer{23, default_stream(), host_},
                       buffer{},
                       0}),
               invalid_argument);
}

TEST_F(Column, ConstructorRejectsTooSmallMask) {
  // 17 rows need 3 bytes of mask.
  EXPECT_THROW(
    (column{
      data_type{type_id::UINT8}, 17, buffer{17, default_stream(), host_}, mask_bytes(2, 0xFF), 0}),
    invalid_argument);
  EXPECT_NO_THROW((column{
    data_type{type_id::UINT8}, 17, buffer{17, default_stream(), host_}, mask_bytes(3, 0xFF), 0}));
}

TEST_F(Column, ConstructorRejectsTooSmallStringOffsets) {
  EXPECT_THROW((column{data_type{type_id::STRING},
                       3,
                       buffer{8, default_stream(), host_},
                       buffer{},
                       0,
                       buffer{31, default_stream(), host_}}),
               invalid_argument);
  // Even an empty string column has its one offset.
  EXPECT_THROW((column{data_type{type_id::STRING}, 0, buffer{}, buffer{}, 0, buffer{}}),
               invalid_argument);
}

TEST_F(Column, ConstructorRejectsNullsWithoutMaskOrMoreNullsThanRows) {
  EXPECT_THROW(
    (column{data_type{type_id::INT8}, 4, buffer{4, default_stream(), host_}, buffer{}, 1}),
    invalid_argument);
  EXPECT_THROW(
    (column{
      data_type{type_id::INT8}, 4, buffer{4, default_stream(), host_}, mask_bytes(1, 0x00), 5}),
    invalid_argument);
}

TEST_F(Column, NullCountAndRecount) {
  auto col = make_fixed_column<std::int32_t>(
    type_id::INT32, {1, 2, 3, 4, 5}, {true, false, true, false, false}, host_);
  EXPECT_EQ(col->null_count(), 3U);
  EXPECT_TRUE(col->nullable());
  EXPECT_TRUE(col->view().has_nulls());
  set_bit(col->mutable_null_mask(), 1, true);
  EXPECT_EQ(col->null_count(), 3U);  // not recounted until asked
  col->recount_nulls();
  EXPECT_EQ(col->null_count(), 2U);
  col->set_null_count(0);
  EXPECT_EQ(col->view().null_count(), 0U);

  auto const no_mask = make_fixed_column<std::int32_t>(type_id::INT32, {1, 2}, {}, host_);
  EXPECT_EQ(no_mask->null_count(), 0U);
  EXPECT_FALSE(no_mask->nullable());
  EXPECT_FALSE(no_mask->view().nullable());
}

TEST_F(Column, ViewExposesTheBuffers) {
  auto col =
    make_fixed_column<std::int16_t>(type_id::INT16, {7, -8, 9}, {true, true, false}, host_);
  column_view const view = col->view();
  EXPECT_EQ(view.type(), data_type{type_id::INT16});
  EXPECT_EQ(view.size(), 3U);
  EXPECT_EQ(view.offset(), 0U);
  EXPECT_EQ(view.null_count(), 1U);
  EXPECT_EQ(view.head(), col->mutable_data<std::int16_t>());
  EXPECT_EQ(view.null_mask(), col->mutable_null_mask());
  EXPECT_EQ(view.offsets(), nullptr);
  EXPECT_EQ(view.data<std::int16_t>()[1], -8);
  EXPECT_TRUE(view.is_valid(1));
  EXPECT_TRUE(view.is_null(2));
  EXPECT_EQ(view.kind(), memory_kind::HOST);

  auto strings                   = make_string_column({"ab", std::nullopt, "", "xyz"}, host_);
  column_view const strings_view = *strings;  // the implicit conversion
  EXPECT_EQ(strings_view.offsets(), strings->mutable_offsets());
  EXPECT_EQ(strings_view.chars(), strings->mutable_chars());
  EXPECT_EQ(strings_view.string_at(0), "ab");
  EXPECT_EQ(strings_view.string_at(2), "");
  EXPECT_EQ(strings_view.string_at(3), "xyz");
  EXPECT_TRUE(strings_view.is_null(1));
  EXPECT_EQ(strings_view.chars_size(), 5U);
}

TEST_F(Column, SliceRecountsNullsAndKeepsBuffers) {
  std::vector<std::int32_t> values(20);
  std::vector<bool> validity(20);
  for (std::size_t row = 0; row < 20; ++row) {
    values[row]   = static_cast<std::int32_t>(row * 10);
    validity[row] = row % 3 != 0;  // rows 0, 3, 6, 9, 12, 15, 18 are null
  }
  auto const col         = make_fixed_column(type_id::INT32, values, validity, host_);
  column_view const full = col->view();
  ASSERT_EQ(full.null_count(), 7U);

  column_view const sliced = slice(full, 4, 16);  // nulls at 6, 9, 12, 15
  EXPECT_EQ(sliced.size(), 12U);
  EXPECT_EQ(sliced.offset(), 4U);
  EXPECT_EQ(sliced.null_count(), 4U);
  EXPECT_EQ(sliced.head(), full.head());
  EXPECT_EQ(sliced.null_mask(), full.null_mask());
  for (std::size_t row = 0; row < sliced.size(); ++row) {
    EXPECT_EQ(sliced.data<std::int32_t>()[row], static_cast<std::int32_t>((row + 4) * 10));
    EXPECT_EQ(sliced.is_valid(row), (row + 4) % 3 != 0) << row;
  }

  column_view const nested = slice(sliced, 3, 9);  // rows 7..12: nulls at 9, 12
  EXPECT_EQ(nested.offset(), 7U);
  EXPECT_EQ(nested.size(), 6U);
  EXPECT_EQ(nested.null_count(), 2U);
  EXPECT_EQ(nested.data<std::int32_t>()[0], 70);

  column_view const empty = slice(full, 20, 20);
  EXPECT_EQ(empty.size(), 0U);
  EXPECT_EQ(empty.null_count(), 0U);
  EXPECT_TRUE(empty.is_empty());

  auto const no_mask = make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3}, {}, host_);
  EXPECT_EQ(slice(no_mask->view(), 1, 3).null_count(), 0U);
  EXPECT_FALSE(slice(no_mask->view(), 1, 3).nullable());
}

TEST_F(Column, SliceOutsideTheColumnThrows) {
  auto const col = make_fixed_column<std::int8_t>(type_id::INT8, {1, 2, 3}, {}, host_);
  EXPECT_THROW((void)slice(col->view(), 0, 4), invalid_argument);
  EXPECT_THROW((void)slice(col->view(), 2, 1), invalid_argument);
  EXPECT_THROW((void)slice(col->view(), 4, 4), invalid_argument);
  column_view const sliced = slice(col->view(), 1, 3);
  EXPECT_THROW((void)slice(sliced, 0, 3), invalid_argument);
  EXPECT_NO_THROW((void)slice(sliced, 2, 2));
}

TEST_F(Column, StringAtOnSlicedStrings) {
  auto const col =
    make_string_column({"zero", std::nullopt, "two", "", "four", std::nullopt, "six"}, host_);
  column_view const sliced = slice(col->view(), 2, 6);
  ASSERT_EQ(sliced.size(), 4U);
  EXPECT_EQ(sliced.null_count(), 1U);
  EXPECT_EQ(sliced.string_at(0), "two");
  EXPECT_EQ(sliced.string_at(1), "");
  EXPECT_EQ(sliced.string_at(2), "four");
  EXPECT_TRUE(sliced.is_null(3));
  EXPECT_EQ(sliced.chars_size(), 7U);  // "two" + "" + "four" + null
  column_view const tail = slice(sliced, 2, 4);
  EXPECT_EQ(tail.string_at(0), "four");
  EXPECT_EQ(tail.chars_size(), 4U);
  EXPECT_EQ(slice(sliced, 1, 1).chars_size(), 0U);
}

TEST_F(Column, ReleaseHandsOverTheBuffers) {
  auto col                    = make_string_column({"abc", std::nullopt, "de"}, host_);
  void const* chars           = col->mutable_chars();
  void const* offsets         = col->mutable_offsets();
  void const* mask            = col->mutable_null_mask();
  std::size_t const allocated = col->allocated_bytes();
  EXPECT_EQ(allocated, 5U + 4 * sizeof(std::int64_t) + bitmask_allocation_size(3));

  column::contents contents = col->release();
  EXPECT_EQ(contents.data.data(), chars);
  EXPECT_EQ(contents.data.size(), 5U);
  EXPECT_EQ(contents.offsets.data(), offsets);
  EXPECT_EQ(contents.offsets.size(), 4 * sizeof(std::int64_t));
  EXPECT_EQ(contents.null_mask.data(), mask);
  EXPECT_EQ(contents.null_mask.size(), bitmask_allocation_size(3));
  EXPECT_EQ(col->size(), 0U);
  EXPECT_EQ(col->null_count(), 0U);
  EXPECT_FALSE(col->nullable());
  EXPECT_EQ(col->allocated_bytes(), 0U);
  EXPECT_EQ(static_cast<std::int64_t const*>(contents.offsets.data())[3], 5);
}

TEST_F(Column, MakeFixedWidthColumnInEveryMaskState) {
  statistics_resource_adaptor stats{host_};
  constexpr std::size_t ROWS = 100;
  struct expectation {
    mask_state state;
    bool nullable;
    std::size_t null_count;
    int fill;  // expected value of every mask byte, or -1 when unspecified
  };
  for (auto const& expected : {expectation{mask_state::UNALLOCATED, false, 0, -1},
                               expectation{mask_state::UNINITIALIZED, true, 0, -1},
                               expectation{mask_state::ALL_VALID, true, 0, 0xFF},
                               expectation{mask_state::ALL_NULL, true, ROWS, 0x00}}) {
    auto const before = stats.statistics().total_bytes;
    auto col          = make_fixed_width_column(
      data_type{type_id::UINT16}, ROWS, expected.state, default_stream(), stats);
    std::size_t const mask_size = expected.nullable ? bitmask_allocation_size(ROWS) : 0;
    EXPECT_EQ(col->type(), data_type{type_id::UINT16});
    EXPECT_EQ(col->size(), ROWS);
    EXPECT_EQ(col->nullable(), expected.nullable);
    EXPECT_EQ(col->null_count(), expected.null_count);
    EXPECT_EQ(col->allocated_bytes(), ROWS * 2 + mask_size);
    EXPECT_EQ(stats.statistics().total_bytes - before, ROWS * 2 + mask_size);
    if (expected.fill >= 0) {
      auto const* mask = col->mutable_null_mask();
      for (std::size_t byte = 0; byte < mask_size; ++byte) {
        ASSERT_EQ(mask[byte], expected.fill) << "byte " << byte;
      }
      EXPECT_EQ(count_unset_bits(mask, 0, ROWS), expected.null_count);
    }
  }
  EXPECT_EQ(stats.statistics().current_bytes, 0U);
}

TEST_F(Column, MakeFixedWidthColumnRejectsString) {
  statistics_resource_adaptor stats{host_};
  EXPECT_THROW((void)make_fixed_width_column(
                 data_type{type_id::STRING}, 4, mask_state::UNALLOCATED, default_stream(), stats),
               invalid_argument);
  EXPECT_EQ(stats.statistics().total_count, 0U);
}

TEST_F(Column, MakeStringsColumnInEveryMaskState) {
  statistics_resource_adaptor stats{host_};
  for (auto const state : {mask_state::UNALLOCATED,
                           mask_state::UNINITIALIZED,
                           mask_state::ALL_VALID,
                           mask_state::ALL_NULL}) {
    auto const before   = stats.statistics().total_bytes;
    auto col            = make_strings_column(9, 123, state, default_stream(), stats);
    bool const nullable = state != mask_state::UNALLOCATED;
    std::size_t const expected_bytes =
      123 + 10 * sizeof(std::int64_t) + (nullable ? bitmask_allocation_size(9) : 0);
    EXPECT_EQ(col->type(), data_type{type_id::STRING});
    EXPECT_EQ(col->size(), 9U);
    EXPECT_EQ(col->nullable(), nullable);
    EXPECT_EQ(col->null_count(), state == mask_state::ALL_NULL ? 9U : 0U);
    EXPECT_EQ(col->allocated_bytes(), expected_bytes);
    EXPECT_EQ(stats.statistics().total_bytes - before, expected_bytes);
    EXPECT_NE(col->mutable_offsets(), nullptr);
  }
}

TEST_F(Column, MakeNullMaskInEveryState) {
  statistics_resource_adaptor stats{host_};
  buffer const none = make_null_mask(70, mask_state::UNALLOCATED, default_stream(), stats);
  EXPECT_TRUE(none.empty());
  EXPECT_EQ(none.resource(), nullptr);
  EXPECT_EQ(stats.statistics().total_count, 0U);

  buffer const uninitialized =
    make_null_mask(70, mask_state::UNINITIALIZED, default_stream(), stats);
  EXPECT_EQ(uninitialized.size(), 64U);
  EXPECT_EQ(uninitialized.resource(), &stats);

  for (auto const state : {mask_state::ALL_VALID, mask_state::ALL_NULL}) {
    buffer const mask = make_null_mask(700, state, default_stream(), stats);
    ASSERT_EQ(mask.size(), bitmask_allocation_size(700));
    auto const* bytes = static_cast<std::uint8_t const*>(mask.data());
    for (std::size_t byte = 0; byte < mask.size(); ++byte) {
      ASSERT_EQ(bytes[byte], state == mask_state::ALL_VALID ? 0xFF : 0x00) << byte;
    }
  }
  EXPECT_EQ(stats.statistics().total_count, 3U);
  EXPECT_EQ(stats.statistics().total_bytes, 64U + 2 * bitmask_allocation_size(700));
}

TEST_F(Column, KindReportsTheResourceMemoryKind) {
  auto const on_device = make_fixed_width_column(
    data_type{type_id::INT64}, 8, mask_state::ALL_VALID, default_stream(), device_);
  EXPECT_EQ(on_device->kind(), memory_kind::DEVICE);
  EXPECT_EQ(on_device->view().kind(), memory_kind::DEVICE);
  EXPECT_EQ(slice(on_device->view(), 2, 5).kind(), memory_kind::DEVICE);
  EXPECT_EQ(device_.used_bytes(), 8 * 8 + bitmask_allocation_size(8));

  auto const on_host = make_fixed_width_column(
    data_type{type_id::INT64}, 8, mask_state::UNALLOCATED, default_stream(), host_);
  EXPECT_EQ(on_host->kind(), memory_kind::HOST);
  EXPECT_EQ(on_host->view().kind(), memory_kind::HOST);

  auto const strings_on_device =
    make_strings_column(3, 10, mask_state::UNALLOCATED, default_stream(), device_);
  EXPECT_EQ(strings_on_device->kind(), memory_kind::DEVICE);
  EXPECT_EQ(strings_on_device->view().kind(), memory_kind::DEVICE);
  // No characters at all: the kind still comes from the resource.
  auto const empty_strings_on_device =
    make_strings_column(3, 0, mask_state::UNALLOCATED, default_stream(), device_);
  EXPECT_EQ(empty_strings_on_device->kind(), memory_kind::DEVICE);
  EXPECT_EQ(empty_strings_on_device->view().kind(), memory_kind::DEVICE);
  auto const empty_on_device = make_fixed_width_column(
    data_type{type_id::INT8}, 0, mask_state::UNALLOCATED, default_stream(), device_);
  EXPECT_EQ(empty_on_device->kind(), memory_kind::DEVICE);
}

TEST_F(Column, ColumnMovesWithoutCopyingBuffers) {
  auto source      = make_fixed_column<std::uint32_t>(type_id::UINT32, {5, 6, 7}, {}, host_);
  void const* data = source->mutable_data<std::uint32_t>();
  column moved     = std::move(*source);
  EXPECT_EQ(moved.view().head(), data);
  EXPECT_EQ(moved.view().data<std::uint32_t>()[2], 7U);
  auto const expected = make_fixed_column<std::uint32_t>(type_id::UINT32, {5, 6, 7}, {}, host_);
  SPILLWAY_EXPECT_COLUMNS_EQUAL(expected->view(), moved.view());
}

}  // namespace
}  // namespace spillway
