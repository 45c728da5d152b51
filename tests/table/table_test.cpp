#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/table.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

class Table : public ::testing::Test {
 protected:
  /// Ten rows: int32 0..9 with nulls at 2 and 7, and strings "s0".."s9" with a null at 4.
  std::unique_ptr<table> make_ten_rows() {
    std::vector<std::int32_t> numbers;
    std::vector<bool> validity;
    std::vector<std::optional<std::string>> strings;
    for (int row = 0; row < 10; ++row) {
      numbers.push_back(row);
      validity.push_back(row != 2 && row != 7);
      strings.emplace_back(row == 4 ? std::nullopt : std::optional{"s" + std::to_string(row)});
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column(type_id::INT32, numbers, validity, host_));
    columns.push_back(make_string_column(strings, host_));
    return std::make_unique<table>(std::move(columns));
  }

  testing::default_resource_guard guard_;
  host_memory_resource host_;
};

TEST_F(Table, TableViewOfMismatchedLengthsThrows) {
  auto const three = make_fixed_column<std::int8_t>(type_id::INT8, {1, 2, 3}, {}, host_);
  auto const two   = make_fixed_column<std::int8_t>(type_id::INT8, {1, 2}, {}, host_);
  EXPECT_THROW((table_view{three->view(), two->view()}), invalid_argument);
  EXPECT_THROW((table_view{std::vector<column_view>{three->view(), three->view(), two->view()}}),
               invalid_argument);
  try {
    table_view const view{three->view(), three->view(), two->view()};
    FAIL() << "expected invalid_argument";
  } catch (invalid_argument const& error) {
    EXPECT_NE(std::string{error.what()}.find("column 2"), std::string::npos) << error.what();
  }
  table_view const same{three->view(), three->view()};
  EXPECT_EQ(same.num_rows(), 3U);
  EXPECT_EQ(same.num_columns(), 2U);
}

TEST_F(Table, EmptyTableViewHasNoRows) {
  table_view const empty;
  EXPECT_EQ(empty.num_rows(), 0U);
  EXPECT_EQ(empty.num_columns(), 0U);
  EXPECT_THROW((void)empty.column(0), std::out_of_range);
}

TEST_F(Table, TableConstructorValidatesColumns) {
  std::vector<std::unique_ptr<column>> mismatched;
  mismatched.push_back(make_fixed_column<std::int8_t>(type_id::INT8, {1, 2, 3}, {}, host_));
  mismatched.push_back(make_fixed_column<std::int8_t>(type_id::INT8, {1}, {}, host_));
  EXPECT_THROW((table{std::move(mismatched)}), invalid_argument);

  std::vector<std::unique_ptr<column>> with_null;
  with_null.push_back(make_fixed_column<std::int8_t>(type_id::INT8, {1}, {}, host_));
  with_null.push_back(nullptr);
  EXPECT_THROW((table{std::move(with_null)}), invalid_argument);
}

TEST_F(Table, SelectPicksColumnsInOrder) {
  auto const source     = make_ten_rows();
  table_view const view = *source;
  std::vector<std::size_t> const order{1, 0, 1};
  table_view const selected = view.select(order);
  ASSERT_EQ(selected.num_columns(), 3U);
  EXPECT_EQ(selected.num_rows(), 10U);
  EXPECT_EQ(selected.column(0).type(), data_type{type_id::STRING});
  EXPECT_EQ(selected.column(1).type(), data_type{type_id::INT32});
  EXPECT_EQ(selected.column(0).head(), view.column(1).head());
  EXPECT_EQ(selected.column(1).head(), view.column(0).head());
  EXPECT_EQ(selected.column(2).string_at(3), "s3");

  std::vector<std::size_t> const none;
  EXPECT_EQ(view.select(none).num_columns(), 0U);
  EXPECT_EQ(view.select(none).num_rows(), 0U);

  std::vector<std::size_t> const out_of_range{0, 2};
  EXPECT_THROW((void)view.select(out_of_range), invalid_argument);
}

TEST_F(Table, SliceSlicesEveryColumn) {
  auto const source     = make_ten_rows();
  table_view const view = *source;
  table_view const rows = slice(view, 3, 8);  // int nulls at 7, string null at 4
  ASSERT_EQ(rows.num_rows(), 5U);
  ASSERT_EQ(rows.num_columns(), 2U);
  EXPECT_EQ(rows.column(0).offset(), 3U);
  EXPECT_EQ(rows.column(0).null_count(), 1U);
  EXPECT_EQ(rows.column(1).null_count(), 1U);
  EXPECT_EQ(rows.column(0).data<std::int32_t>()[0], 3);
  EXPECT_EQ(rows.column(1).string_at(0), "s3");
  EXPECT_EQ(rows.column(1).string_at(4), "s7");

  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(make_fixed_column<std::int32_t>(
    type_id::INT32, {3, 4, 5, 6, 7}, {true, true, true, true, false}, host_));
  expected_columns.push_back(make_string_column({"s3", std::nullopt, "s5", "s6", "s7"}, host_));
  table const expected{std::move(expected_columns)};
  SPILLWAY_EXPECT_TABLES_EQUAL(expected.view(), rows);

  EXPECT_THROW((void)slice(view, 0, 11), invalid_argument);
  EXPECT_THROW((void)slice(view, 6, 5), invalid_argument);
  EXPECT_EQ(slice(view, 10, 10).num_rows(), 0U);
  EXPECT_EQ(slice(view, 10, 10).num_columns(), 2U);
}

TEST_F(Table, SplitCutsAtAscendingPoints) {
  auto const source     = make_ten_rows();
  table_view const view = *source;
  std::vector<std::size_t> const splits{0, 3, 3, 9, 10};
  std::vector<table_view> const pieces = split(view, splits);
  ASSERT_EQ(pieces.size(), 6U);
  std::vector<std::size_t> const sizes{0, 3, 0, 6, 1, 0};
  std::size_t begin = 0;
  for (std::size_t piece = 0; piece < pieces.size(); ++piece) {
    EXPECT_EQ(pieces[piece].num_rows(), sizes[piece]) << piece;
    EXPECT_EQ(pieces[piece].num_columns(), 2U);
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(view, begin, begin + sizes[piece]), pieces[piece]);
    begin += sizes[piece];
  }
  EXPECT_EQ(pieces[3].column(0).null_count(), 1U);  // row 7
  EXPECT_EQ(pieces[3].column(1).null_count(), 1U);  // row 4

  std::vector<std::size_t> const no_splits;
  std::vector<table_view> const whole = split(view, no_splits);
  ASSERT_EQ(whole.size(), 1U);
  SPILLWAY_EXPECT_TABLES_EQUAL(view, whole[0]);
}

TEST_F(Table, SplitRejectsDescendingOrOutOfRangePoints) {
  auto const source     = make_ten_rows();
  table_view const view = *source;
  for (std::vector<std::size_t> const& splits : {std::vector<std::size_t>{5, 3},
                                                 std::vector<std::size_t>{11},
                                                 std::vector<std::size_t>{2, 10, 11},
                                                 std::vector<std::size_t>{4, 4, 1}}) {
    EXPECT_THROW((void)split(view, splits), invalid_argument) << splits.size();
  }
}

TEST_F(Table, ReleaseHandsOverTheColumns) {
  auto source                                  = make_ten_rows();
  void const* first_data                       = source->view().column(0).head();
  std::vector<std::unique_ptr<column>> columns = source->release();
  EXPECT_EQ(source->num_rows(), 0U);
  EXPECT_EQ(source->num_columns(), 0U);
  EXPECT_EQ(source->allocated_bytes(), 0U);
  ASSERT_EQ(columns.size(), 2U);
  EXPECT_EQ(columns[0]->view().head(), first_data);
  EXPECT_EQ(columns[1]->size(), 10U);
  EXPECT_EQ(columns[1]->view().string_at(9), "s9");
  // The released columns make a table again.
  table const again{std::move(columns)};
  EXPECT_EQ(again.num_rows(), 10U);
}

TEST_F(Table, AllocatedBytesSumsEveryBuffer) {
  auto const source = make_ten_rows();
  // int32: 40 data + 64 mask; strings: "s0".."s9" but "s4" = 18 chars + 11 offsets + 64 mask.
  EXPECT_EQ(source->allocated_bytes(), 40U + 64 + 18 + 11 * 8 + 64);
  EXPECT_EQ(table{}.allocated_bytes(), 0U);
}

TEST_F(Table, AllocatedBytesCountAnAllocationSharedBySlicesOnceWhole) {
  // Two INT64 columns and a string column's offsets as slices of one 4 KiB allocation (a packed
  // table taken as it is), the characters and a third column allocated on their own.
  auto const whole = std::make_shared<buffer const>(4096, default_stream(), host_);
  auto* const base = static_cast<std::byte*>(const_cast<void*>(whole->data()));
  std::memset(base, 0, 4096);
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(
    std::make_unique<column>(data_type{type_id::INT64}, 8, buffer{whole, base, 64}, buffer{}, 0));
  columns.push_back(std::make_unique<column>(data_type{type_id::STRING},
                                             8,
                                             buffer{16, default_stream(), host_},
                                             buffer{},
                                             0,
                                             buffer{whole, base + 64, 72}));
  columns.push_back(std::make_unique<column>(
    data_type{type_id::INT64}, 8, buffer{whole, base + 192, 64}, buffer{}, 0));
  columns.push_back(
    make_fixed_column<std::int32_t>(type_id::INT32, {1, 2, 3, 4, 5, 6, 7, 8}, {}, host_));
  table shared{std::move(columns)};
  EXPECT_EQ(shared.allocated_bytes(), 4096U + 16 + 32);
  // A column's own count is its slices' bytes.
  EXPECT_TRUE(shared.get_column(1).shares_allocation());
  EXPECT_EQ(shared.get_column(1).allocated_bytes(), 16U + 72);
  EXPECT_FALSE(shared.get_column(3).shares_allocation());
}

TEST_F(Table, GetColumnAndView) {
  auto source = make_ten_rows();
  EXPECT_EQ(source->get_column(1).type(), data_type{type_id::STRING});
  EXPECT_THROW((void)source->get_column(2), std::out_of_range);
  source->get_column(0).mutable_data<std::int32_t>()[5] = 55;
  EXPECT_EQ(source->view().column(0).data<std::int32_t>()[5], 55);
}

}  // namespace
}  // namespace spillway
