/**
 * @file arrow_c_stream_test.cpp
 * @brief Batches read from an Arrow C stream: columns whose Arrow layout is spillway's are viewed
 * in Arrow's memory, the others (dictionaries, fixed_size_binary, views, bools) converted, and
 * every one holds the stream's values; and string and binary columns written back as views.
 */
#include "io/io_test_support.hpp"
#include "testing/table_generators.hpp"

#include <spillway/io/arrow_c_stream.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/column_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/type_conversion.hpp"

#include <arrow/api.h>
#include <arrow/c/bridge.h>
#include <arrow/json/from_string.h>
#endif

#include <memory>
#include <string>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

class ArrowCStreamTest : public testing::arrow_io_test {};

std::shared_ptr<arrow::Array> from_json(std::shared_ptr<arrow::DataType> const& type,
                                        std::string const& json) {
  return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
}

/// The value of `array` at `row` as text; a dictionary's value, not its index.
std::string value_text(arrow::Array const& array, std::int64_t row) {
  auto scalar = array.GetScalar(row).ValueOrDie();
  if (scalar->type->id() == arrow::Type::DICTIONARY) {
    scalar = static_cast<arrow::DictionaryScalar const&>(*scalar).GetEncodedValue().ValueOrDie();
  }
  return scalar->ToString();
}

/// A one-batch stream of `columns`, exported through the C stream interface.
ArrowArrayStream export_batch(std::vector<std::shared_ptr<arrow::Field>> fields,
                              std::vector<std::shared_ptr<arrow::Array>> columns) {
  auto const schema = arrow::schema(std::move(fields));
  auto const rows   = columns.front()->length();
  auto const batch  = arrow::RecordBatch::Make(schema, rows, std::move(columns));
  auto const reader = arrow::RecordBatchReader::Make({batch}, schema).ValueOrDie();
  ArrowArrayStream stream{};
  EXPECT_TRUE(arrow::ExportRecordBatchReader(reader, &stream).ok());
  return stream;
}

TEST_F(ArrowCStreamTest, ColumnsWhoseLayoutIsNotSpillwaysAreConvertedWithTheirValues) {
  // Each of these once was viewed as if its buffers were spillway's: fixed_size_binary and a
  // binary_view of inline values only (two buffers) as a binary column without offsets,
  // a dictionary of int64 as int64 values over its int32 indices.
  auto const fixed = from_json(arrow::fixed_size_binary(3), R"(["abc", null, "aab", "zzz"])");
  // A slice, with a value longer than a view's inline bytes (three buffers).
  auto const view =
    from_json(arrow::binary_view(), R"(["skipped", "b", "", null, "a value past twelve bytes"])")
      ->Slice(1);
  auto const dictionary =
    arrow::DictionaryArray::FromArrays(arrow::dictionary(arrow::int32(), arrow::int64()),
                                       from_json(arrow::int32(), "[1, 0, null, 1]"),
                                       from_json(arrow::int64(), "[-5, 1099511627776]"))
      .ValueOrDie();
  auto const inlined = from_json(arrow::binary_view(), R"(["b", "", null, "abcdef"])");
  auto const wide    = from_json(arrow::int64(), "[7, null, -1, 3]");
  auto const large   = from_json(arrow::large_binary(), R"(["x", "yy", null, ""])");
  auto const decimal = from_json(arrow::decimal128(20, 2), R"(["1.25", null, "-3.00", "0.01"])");
  auto stream        = export_batch({arrow::field("fixed", fixed->type()),
                                     arrow::field("view", view->type()),
                                     arrow::field("dictionary", dictionary->type()),
                                     arrow::field("wide", wide->type()),
                                     arrow::field("large", large->type()),
                                     arrow::field("decimal", decimal->type()),
                                     arrow::field("inlined", inlined->type())},
                             {fixed, view, dictionary, wide, large, decimal, inlined});
  host_memory_resource scratch;
  arrow_stream_reader reader(&stream, "the test stream", scratch);
  auto const batch = reader.next();
  ASSERT_TRUE(batch.has_value());
  ASSERT_EQ(batch->num_rows(), 4U);
  EXPECT_EQ(batch->column(0).type().id(), type_id::BINARY);
  EXPECT_EQ(batch->column(2).type().id(), type_id::INT64);
  // The columns viewed in place are Arrow's memory.
  EXPECT_EQ(batch->column(3).data<std::int64_t>(),
            reinterpret_cast<std::int64_t const*>(wide->data()->buffers[1]->data()));
  EXPECT_EQ(batch->column(5).data<std::byte>(),
            reinterpret_cast<std::byte const*>(decimal->data()->buffers[1]->data()));
  // Back to Arrow with the stream's schema: the same values, type for type.
  auto const back = detail::to_arrow_batches(
    *batch, detail::to_arrow_schema(reader.schema()), arrow::default_memory_pool());
  ASSERT_EQ(back.size(), 1U);
  std::vector<std::shared_ptr<arrow::Array>> const expected{
    fixed, view, dictionary, wide, large, decimal, inlined};
  for (int c = 0; c < 7; ++c) {
    auto const& got = back.front()->column(c);
    ASSERT_TRUE(got->type()->Equals(*expected[static_cast<std::size_t>(c)]->type()))
      << got->type()->ToString();
    for (std::int64_t row = 0; row < 4; ++row) {
      EXPECT_EQ(value_text(*got, row), value_text(*expected[static_cast<std::size_t>(c)], row))
        << "column " << c << ", row " << row;
    }
  }
  EXPECT_FALSE(reader.next().has_value());
}

TEST_F(ArrowCStreamTest, StringColumnsWriteAsViewsOfTheirBytesSlicedNullAndLong) {
  // Inline values (up to 12 bytes), long ones that point into the column's bytes, nulls, empty
  // values; whole and sliced (the array's offset is the slice's), and a column of nothing but
  // nulls and empties.
  std::vector<std::optional<std::string>> values;
  for (int row = 0; row < 300; ++row) {
    if (row % 7 == 3) {
      values.emplace_back(std::nullopt);
    } else {
      values.emplace_back(
        std::string(static_cast<std::size_t>(row % 29), static_cast<char>('a' + row % 26)) +
        (row % 5 == 0 ? std::string(1, '\0') + "z" : ""));
    }
  }
  host_memory_resource host;
  auto const strings = testing::make_string_column(values, host);
  auto const bytes   = testing::make_binary_column(values, host);
  auto const empties =
    testing::make_string_column({std::string{}, std::nullopt, std::string{}}, host);
  struct piece {
    column_view view;
    std::shared_ptr<arrow::DataType> type;
    std::size_t first;
  };
  std::vector<piece> const pieces{{strings->view(), arrow::utf8_view(), 0},
                                  {slice(strings->view(), 17, 250), arrow::utf8_view(), 17},
                                  {slice(bytes->view(), 5, 6), arrow::binary_view(), 5},
                                  {slice(bytes->view(), 40, 300), arrow::binary_view(), 40},
                                  {empties->view(), arrow::utf8_view(), 0}};
  for (auto const& [view, type, first] : pieces) {
    SCOPED_TRACE(type->ToString() + " from row " + std::to_string(first));
    auto const array = detail::to_arrow_array(view, arrow::default_memory_pool(), type);
    ASSERT_TRUE(array->ValidateFull().ok()) << array->ValidateFull().ToString();
    ASSERT_EQ(static_cast<std::size_t>(array->length()), view.size());
    EXPECT_EQ(static_cast<std::size_t>(array->null_count()), view.null_count());
    auto const& views = static_cast<arrow::BinaryViewArray const&>(*array);
    for (std::size_t row = 0; row < view.size(); ++row) {
      auto const index = static_cast<std::int64_t>(row);
      ASSERT_EQ(views.IsNull(index), view.is_null(row)) << row;
      if (!view.is_null(row)) {
        EXPECT_EQ(views.GetView(index), view.string_at(row)) << row;
      }
    }
  }
}

#endif

}  // namespace
}  // namespace spillway
