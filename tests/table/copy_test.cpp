#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/copy.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;

constexpr std::array<memory_kind, 4> EVERY_KIND{
  memory_kind::DEVICE, memory_kind::PINNED_HOST, memory_kind::HOST, memory_kind::DISK};

/// Bytes of values (fixed width) or characters (STRING) of `view`: what `copy` moves with
/// `copy_bytes`.
std::size_t payload_bytes(table_view const& view) {
  std::size_t total = 0;
  for (auto const& column : view) {
    total +=
      is_fixed_width(column.type()) ? column.size() * size_of(column.type()) : column.chars_size();
  }
  return total;
}

/// The change of every counter of `copy_bytes` between two snapshots.
std::size_t counted(copy_counters const& before,
                    copy_counters const& after,
                    memory_kind source,
                    memory_kind destination) {
  return after.between(source, destination) - before.between(source, destination);
}

class Copy : public ::testing::Test {
 protected:
  /// Checks that `result` is a normalized copy of `input` in memory of `kind`.
  static void expect_normalized_copy(table_view const& input,
                                     table_view const& result,
                                     memory_kind kind) {
    SPILLWAY_EXPECT_TABLES_EQUAL(input, result);
    ASSERT_EQ(input.num_columns(), result.num_columns());
    for (std::size_t index = 0; index < result.num_columns(); ++index) {
      column_view const& in  = input.column(index);
      column_view const& out = result.column(index);
      EXPECT_EQ(out.offset(), 0U) << index;
      EXPECT_EQ(out.kind(), kind) << index;
      // A column of 0 rows has a 0-byte mask, which is no mask: only rows carry nullability.
      if (in.size() > 0) {
        EXPECT_EQ(out.nullable(), in.nullable()) << index;
      }
      if (!is_fixed_width(out.type())) {
        EXPECT_EQ(out.offsets()[0], 0) << index;
        EXPECT_EQ(static_cast<std::size_t>(out.offsets()[out.size()]), in.chars_size()) << index;
      }
    }
  }

  testing::default_resource_guard guard_;
  host_memory_resource host_;
  emulated_device_memory_resource device_;
};

TEST_F(Copy, TableToDeviceAndBack) {
  auto const input = random_table(all_types(), 300, 31, 0.3, host_);
  statistics_resource_adaptor device_stats{device_};
  statistics_resource_adaptor host_stats{host_};

  auto const on_device = copy(input->view(), default_stream(), device_stats);
  expect_normalized_copy(*input, *on_device, memory_kind::DEVICE);
  for (std::size_t index = 0; index < on_device->num_columns(); ++index) {
    EXPECT_EQ(on_device->get_column(index).kind(), memory_kind::DEVICE);
  }
  EXPECT_EQ(device_stats.statistics().current_bytes, on_device->allocated_bytes());
  EXPECT_EQ(device_stats.statistics().total_bytes, on_device->allocated_bytes());
  EXPECT_EQ(device_.used_bytes(), on_device->allocated_bytes());

  auto const back = copy(on_device->view(), default_stream(), host_stats);
  expect_normalized_copy(*input, *back, memory_kind::HOST);
  EXPECT_EQ(host_stats.statistics().total_bytes, back->allocated_bytes());
  EXPECT_EQ(device_stats.statistics().total_bytes, on_device->allocated_bytes());
}

TEST_F(Copy, CopyCountersGrowByThePayloadBetweenTheRightKinds) {
  auto const input          = random_table(all_types(), 200, 32, 0.3, host_);
  std::size_t const payload = payload_bytes(*input);
  ASSERT_GT(payload, 0U);

  copy_counters const before_down = copied_bytes();
  auto const on_device            = copy(input->view(), default_stream(), device_);
  copy_counters const after_down  = copied_bytes();
  for (memory_kind const source : EVERY_KIND) {
    for (memory_kind const destination : EVERY_KIND) {
      std::size_t const expected =
        source == memory_kind::HOST && destination == memory_kind::DEVICE ? payload : 0;
      EXPECT_EQ(counted(before_down, after_down, source, destination), expected)
        << to_string(source) << " -> " << to_string(destination);
    }
  }

  copy_counters const before_up = copied_bytes();
  auto const back               = copy(on_device->view(), default_stream(), host_);
  copy_counters const after_up  = copied_bytes();
  for (memory_kind const source : EVERY_KIND) {
    for (memory_kind const destination : EVERY_KIND) {
      std::size_t const expected =
        source == memory_kind::DEVICE && destination == memory_kind::HOST ? payload : 0;
      EXPECT_EQ(counted(before_up, after_up, source, destination), expected)
        << to_string(source) << " -> " << to_string(destination);
    }
  }
  SPILLWAY_EXPECT_TABLES_EQUAL(*input, *back);
}

TEST_F(Copy, CopyCountersOfASlicedColumnCountOnlyItsRows) {
  auto const strings = make_string_column({"aaaa", "bb", std::nullopt, "ccc", "dddddddd"}, host_);
  column_view const sliced   = slice(strings->view(), 1, 4);  // "bb", null, "ccc"
  copy_counters const before = copied_bytes();
  auto const result          = copy(sliced, default_stream(), device_);
  copy_counters const after  = copied_bytes();
  EXPECT_EQ(counted(before, after, memory_kind::HOST, memory_kind::DEVICE), 5U);
  EXPECT_EQ(result->allocated_bytes(), 5U + 4 * 8 + bitmask_allocation_size(3));

  auto const numbers =
    make_fixed_column<std::uint16_t>(type_id::UINT16, {1, 2, 3, 4, 5, 6}, {}, host_);
  copy_counters const before_numbers = copied_bytes();
  auto const copied_numbers          = copy(slice(numbers->view(), 2, 5), default_stream(), host_);
  copy_counters const after_numbers  = copied_bytes();
  EXPECT_EQ(counted(before_numbers, after_numbers, memory_kind::HOST, memory_kind::HOST), 6U);
  EXPECT_EQ(counted(before_numbers, after_numbers, memory_kind::HOST, memory_kind::DEVICE), 0U);
}

TEST_F(Copy, SlicedInputsAreNormalized) {
  auto const source = random_table(all_types(), 400, 33, 0.3, host_);
  for (auto const& [begin, end] :
       {std::pair<std::size_t, std::size_t>{1, 399}, {5, 250}, {63, 64}, {100, 100}, {399, 400}}) {
    SCOPED_TRACE("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
    table_view const sliced = slice(*source, begin, end);
    auto const on_device    = copy(sliced, default_stream(), device_);
    expect_normalized_copy(sliced, *on_device, memory_kind::DEVICE);
    for (std::size_t index = 0; index < sliced.num_columns(); ++index) {
      EXPECT_EQ(on_device->view().column(index).null_count(), sliced.column(index).null_count());
    }
  }
}

TEST_F(Copy, SlicedStringsStartAtZero) {
  auto const strings    = make_string_column({"xyz", "", "ab", std::nullopt, "c"}, host_);
  auto const result     = copy(slice(strings->view(), 2, 5), default_stream(), host_);
  column_view const out = result->view();
  ASSERT_EQ(out.size(), 3U);
  std::vector<std::int64_t> const offsets(out.offsets(), out.offsets() + 4);
  EXPECT_EQ(offsets, (std::vector<std::int64_t>{0, 2, 2, 3}));
  EXPECT_EQ(out.string_at(0), "ab");
  EXPECT_TRUE(out.is_null(1));
  EXPECT_EQ(out.string_at(2), "c");
  EXPECT_EQ(out.null_count(), 1U);
  EXPECT_TRUE(bit_is_set(out.null_mask(), 0));
  EXPECT_FALSE(bit_is_set(out.null_mask(), 1));
  EXPECT_TRUE(bit_is_set(out.null_mask(), 2));
}

TEST_F(Copy, MaskOnlyWhenTheInputHasOne) {
  auto const no_mask = make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3}, {}, host_);
  EXPECT_FALSE(copy(no_mask->view(), default_stream(), host_)->nullable());
  // A mask without nulls is kept: the copy mirrors the input's layout.
  auto const mask_without_nulls =
    make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3}, {true, true, true}, host_);
  auto const kept = copy(mask_without_nulls->view(), default_stream(), host_);
  EXPECT_TRUE(kept->nullable());
  EXPECT_EQ(kept->null_count(), 0U);
  auto const strings = make_string_column({"a", "b"}, host_, true);
  EXPECT_TRUE(copy(strings->view(), default_stream(), host_)->nullable());
}

TEST_F(Copy, EmptyColumnsAndTables) {
  auto const empty  = random_table(all_types(), 0, 34, 0.0, host_);
  auto const result = copy(empty->view(), default_stream(), device_);
  EXPECT_EQ(result->num_rows(), 0U);
  EXPECT_EQ(result->num_columns(), all_types().size());
  expect_normalized_copy(*empty, *result, memory_kind::DEVICE);

  auto const none = copy(table_view{}, default_stream(), device_);
  EXPECT_EQ(none->num_columns(), 0U);
  EXPECT_EQ(none->num_rows(), 0U);

  auto const strings    = make_string_column({"abc", "de"}, host_);
  auto const empty_part = copy(slice(strings->view(), 1, 1), default_stream(), host_);
  EXPECT_EQ(empty_part->size(), 0U);
  EXPECT_EQ(empty_part->view().offsets()[0], 0);
  EXPECT_EQ(empty_part->view().chars_size(), 0U);
}

TEST_F(Copy, ColumnCopyIsDeep) {
  auto source =
    make_fixed_column<std::int64_t>(type_id::INT64, {10, 20, 30}, {true, false, true}, host_);
  auto const copied = copy(source->view(), default_stream(), host_);
  EXPECT_NE(copied->view().head(), source->view().head());
  EXPECT_NE(copied->view().null_mask(), source->view().null_mask());
  source->mutable_data<std::int64_t>()[0] = 99;
  set_bit(source->mutable_null_mask(), 1, true);
  EXPECT_EQ(copied->view().data<std::int64_t>()[0], 10);
  EXPECT_TRUE(copied->view().is_null(1));
  EXPECT_EQ(copied->null_count(), 1U);
}

}  // namespace
}  // namespace spillway
