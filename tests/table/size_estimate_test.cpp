#include "testing/default_resource_guard.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/size_estimate.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;

class SizeEstimate : public ::testing::Test {
 protected:
  testing::default_resource_guard guard_;
  host_memory_resource host_;
};

TEST_F(SizeEstimate, FixedWidthIsRowsTimesWidth) {
  auto const int32s =
    make_fixed_column<std::int32_t>(type_id::INT32, std::vector<std::int32_t>(100), {}, host_);
  EXPECT_EQ(estimate_size(int32s->view()), 400U);
  auto const doubles =
    make_fixed_column<double>(type_id::FLOAT64, std::vector<double>(3), {}, host_);
  EXPECT_EQ(estimate_size(doubles->view()), 24U);
  for (data_type const type : all_types()) {
    if (!is_fixed_width(type)) {
      continue;
    }
    auto const col =
      make_fixed_width_column(type, 37, mask_state::UNALLOCATED, default_stream(), host_);
    EXPECT_EQ(estimate_size(col->view()), 37 * size_of(type)) << to_string(type);
  }
}

TEST_F(SizeEstimate, NullableAddsOneBitPerRowRoundedToBytes) {
  auto const int64s = make_fixed_width_column(
    data_type{type_id::INT64}, 100, mask_state::ALL_VALID, default_stream(), host_);
  EXPECT_EQ(estimate_size(int64s->view()), 800U + 13);  // no padding of the mask counted
  auto const bools = make_fixed_width_column(
    data_type{type_id::BOOL8}, 9, mask_state::ALL_NULL, default_stream(), host_);
  EXPECT_EQ(estimate_size(bools->view()), 9U + 2);
  auto const eight = make_fixed_width_column(
    data_type{type_id::INT16}, 8, mask_state::ALL_VALID, default_stream(), host_);
  EXPECT_EQ(estimate_size(eight->view()), 16U + 1);
}

TEST_F(SizeEstimate, StringsCountOffsetsAndCharacters) {
  auto const plain = make_string_column({"ab", "", "cde"}, host_);
  EXPECT_EQ(estimate_size(plain->view()), 4U * 8 + 5);
  auto const nullable = make_string_column({"ab", "", "cde", std::nullopt}, host_);
  EXPECT_EQ(estimate_size(nullable->view()), 1U + 5 * 8 + 5);
  auto const empties = make_string_column({"", "", ""}, host_);
  EXPECT_EQ(estimate_size(empties->view()), 4U * 8);
}

TEST_F(SizeEstimate, TableIsTheSumOfItsColumns) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int32_t>(
    type_id::INT32, {1, 2, 3, 4}, {true, false, true, true}, host_));
  columns.push_back(make_string_column({"one", "two", "three", std::nullopt}, host_));
  table const input{std::move(columns)};
  // int32: 16 + 1 mask byte; strings: 5 offsets * 8 + 11 characters + 1 mask byte.
  EXPECT_EQ(estimate_size(input.view()), 17U + 52);
  EXPECT_EQ(estimate_size(table_view{}), 0U);
  EXPECT_DOUBLE_EQ(estimate_row_size(input.view()), 69.0 / 4);
}

TEST_F(SizeEstimate, RowRangeOfStringsIsExact) {
  auto const strings = make_string_column({"ab", "", "cde", std::nullopt, "fghij"}, host_);
  table_view const view{strings->view()};
  EXPECT_EQ(estimate_size(view, 1, 3), 1U + 3 * 8 + 3);   // "", "cde"
  EXPECT_EQ(estimate_size(view, 3, 5), 1U + 3 * 8 + 5);   // null, "fghij"
  EXPECT_EQ(estimate_size(view, 0, 5), 1U + 6 * 8 + 10);  // everything
  EXPECT_EQ(estimate_size(view, 2, 2), 0U);
}

TEST_F(SizeEstimate, RowRangeEqualsTheEstimateOfTheSlice) {
  auto const source      = random_table(all_types(), 150, 21, 0.3, host_);
  table_view const whole = *source;
  for (table_view const& view : {whole, slice(whole, 7, 143)}) {
    for (std::size_t begin = 0; begin <= view.num_rows(); begin += 3) {
      for (std::size_t end = begin; end <= view.num_rows(); end += 5) {
        ASSERT_EQ(estimate_size(view, begin, end), estimate_size(slice(view, begin, end)))
          << "rows [" << begin << ", " << end << ") of a view at offset "
          << view.column(0).offset();
      }
    }
    EXPECT_EQ(estimate_size(view, 0, view.num_rows()), estimate_size(view));
  }
}

TEST_F(SizeEstimate, SlicedColumnCountsOnlyItsRows) {
  auto const strings       = make_string_column({"aaaa", "bb", "c", "", "dddddd"}, host_);
  column_view const sliced = slice(strings->view(), 1, 4);  // "bb", "c", ""
  EXPECT_EQ(estimate_size(sliced), 4U * 8 + 3);
  std::vector<std::int32_t> values(64);
  auto const int32s =
    make_fixed_column<std::int32_t>(type_id::INT32, values, std::vector<bool>(64, true), host_);
  EXPECT_EQ(estimate_size(slice(int32s->view(), 3, 20)), 17U * 4 + 3);
}

TEST_F(SizeEstimate, RangeOutsideTheTableThrows) {
  auto const source     = random_table(all_types(), 10, 22, 0.0, host_);
  table_view const view = *source;
  EXPECT_THROW((void)estimate_size(view, 0, 11), invalid_argument);
  EXPECT_THROW((void)estimate_size(view, 5, 4), invalid_argument);
  EXPECT_THROW((void)estimate_size(view, 11, 11), invalid_argument);
  EXPECT_THROW((void)estimate_size(table_view{}, 0, 1), invalid_argument);
  EXPECT_NO_THROW((void)estimate_size(view, 10, 10));
}

TEST_F(SizeEstimate, RowSize) {
  EXPECT_EQ(estimate_row_size(table_view{}), 0.0);
  auto const empty = random_table(all_types(), 0, 23, 0.0, host_);
  EXPECT_EQ(estimate_row_size(*empty), 0.0);
  auto const fixed =
    random_table({data_type{type_id::INT32}, data_type{type_id::FLOAT64}}, 10, 24, 0.0, host_);
  EXPECT_DOUBLE_EQ(estimate_row_size(*fixed), 12.0);
}

}  // namespace
}  // namespace spillway
