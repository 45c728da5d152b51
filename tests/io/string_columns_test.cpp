/**
 * @file string_columns_test.cpp
 * @brief STRING columns through the Arrow formats: columns without a byte of characters (all
 * null, all empty), and the Arrow string type of a file's column (string or large_string) and a
 * timestamp's time zone kept when it is written back.
 */
#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/type_conversion.hpp"

#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#endif

#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

class StringColumnsTest : public testing::arrow_io_test {
 protected:
  /** @return an int64 key and one STRING column of `rows` copies of `value` */
  std::unique_ptr<table> key_and_strings(std::size_t rows,
                                         std::optional<std::string> const& value) {
    std::vector<std::int64_t> keys(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      keys[i] = static_cast<std::int64_t>(rows - i);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, host_));
    columns.push_back(testing::make_string_column(
      std::vector<std::optional<std::string>>(rows, value), host_, !value.has_value()));
    return std::make_unique<table>(std::move(columns));
  }
};

TEST_F(StringColumnsTest, AllNullAndAllEmptyStringsRoundTripInParquetAndIpc) {
  for (auto const& value : {std::optional<std::string>{}, std::optional<std::string>{""}}) {
    auto const input = key_and_strings(1000, value);
    SCOPED_TRACE(value ? "all empty" : "all null");
    std::vector<std::string> const names{"k", "s"};
    // Row groups encoded on the writing thread, and on threads of their own (Arrow validates
    // the table of each such row group).
    for (std::size_t threads : {std::size_t{0}, std::size_t{1}, std::size_t{2}}) {
      parquet_write_options options;
      options.encode_threads = threads;
      write_parquet(*input, names, path("t.parquet"), options, default_stream(), host_);
      SPILLWAY_EXPECT_TABLES_EQUAL(
        input->view(), read_parquet(path("t.parquet"), {}, default_stream(), host_)->view());
    }
    for (auto format : {file_format::ARROW_IPC_FILE, file_format::ARROW_IPC_STREAM}) {
      auto const file = path("t." + std::string{extension(format)});
      write_arrow_ipc(*input, names, file, format, default_stream(), host_);
      SPILLWAY_EXPECT_TABLES_EQUAL(
        input->view(), read_arrow_ipc(file, format, {}, default_stream(), host_)->view());
    }
  }
}

TEST_F(StringColumnsTest, ABatchOfOnlyEmptyStringsAmongOthersIsWritten) {
  // The second write holds only empty strings, the third only nulls: each is its own batch.
  auto const words   = key_and_strings(10, std::string{"word"});
  auto const empties = key_and_strings(10, std::string{});
  auto const nulls   = key_and_strings(10, std::nullopt);
  for (auto format : {file_format::PARQUET, file_format::ARROW_IPC_FILE}) {
    batch_writer_options options;
    options.directory              = path(std::string{"out-"} + std::string{extension(format)});
    options.format                 = format;
    options.parquet.encode_threads = 2;
    batch_writer writer{options, {"k", "s"}, default_stream(), host_};
    writer.write(words->view());
    writer.write(empties->view());
    writer.write(nulls->view());
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    auto const output = format == file_format::PARQUET
                          ? read_parquet(files[0], {}, default_stream(), host_)
                          : read_arrow_ipc(files[0], format, {}, default_stream(), host_);
    ASSERT_EQ(output->num_rows(), 30U);
    auto const strings = output->view().column(1);
    EXPECT_EQ(strings.string_at(0), "word");
    EXPECT_EQ(strings.string_at(15), "");
    EXPECT_FALSE(strings.is_null(15));
    EXPECT_TRUE(strings.is_null(25));
  }
}

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
/**
 * @return a table of Arrow's own: k int64, s string, l large_string, with a null and an empty,
 * then u timestamp[us, UTC] and p timestamp[ms, Europe/Paris]
 */
std::shared_ptr<arrow::Table> arrow_strings_table() {
  auto const utc   = arrow::timestamp(arrow::TimeUnit::MICRO, "UTC");
  auto const paris = arrow::timestamp(arrow::TimeUnit::MILLI, "Europe/Paris");
  arrow::Int64Builder keys;
  arrow::StringBuilder strings;
  arrow::LargeStringBuilder large;
  arrow::TimestampBuilder utc_times(utc, arrow::default_memory_pool());
  arrow::TimestampBuilder paris_times(paris, arrow::default_memory_pool());
  for (std::int64_t row = 0; row < 100; ++row) {
    EXPECT_TRUE(keys.Append(100 - row).ok());
    EXPECT_TRUE((row == 3 ? strings.AppendNull() : strings.Append(std::to_string(row))).ok());
    EXPECT_TRUE((row == 4 ? large.Append("") : large.Append("v" + std::to_string(row))).ok());
    EXPECT_TRUE(utc_times.Append(1'700'000'000'000'000 + row).ok());
    EXPECT_TRUE((row == 5 ? paris_times.AppendNull() : paris_times.Append(row * 1000)).ok());
  }
  auto schema = arrow::schema({arrow::field("k", arrow::int64()),
                               arrow::field("s", arrow::utf8()),
                               arrow::field("l", arrow::large_utf8()),
                               arrow::field("u", utc),
                               arrow::field("p", paris)});
  return arrow::Table::Make(schema,
                            {*keys.Finish(),
                             *strings.Finish(),
                             *large.Finish(),
                             *utc_times.Finish(),
                             *paris_times.Finish()},
                            100);
}

std::shared_ptr<arrow::Schema> parquet_schema(std::string const& file) {
  auto reader =
    *parquet::arrow::OpenFile(*arrow::io::ReadableFile::Open(file), arrow::default_memory_pool());
  std::shared_ptr<arrow::Schema> schema;
  EXPECT_TRUE(reader->GetSchema(&schema).ok());
  return schema;
}

std::shared_ptr<arrow::Schema> ipc_schema(std::string const& file) {
  auto input = *arrow::io::ReadableFile::Open(file);
  return (*arrow::ipc::RecordBatchFileReader::Open(input))->schema();
}

TEST_F(StringColumnsTest, WrittenBackStringsKeepTheirArrowTypeAndTimestampsTheirZone) {
  auto const input = arrow_strings_table();
  {
    // The Arrow schema kept in the file: large_string reads back as such.
    testing::write_parquet_with_arrow(*input, path("in.parquet"), 1000);
  }
  {
    auto sink   = *arrow::io::FileOutputStream::Open(path("in.arrow"));
    auto writer = *arrow::ipc::MakeFileWriter(sink, input->schema());
    ASSERT_TRUE(writer->WriteTable(*input).ok());
    ASSERT_TRUE(writer->Close().ok());
    ASSERT_TRUE(sink->Close().ok());
  }
  ASSERT_TRUE(parquet_schema(path("in.parquet"))->Equals(*input->schema()));
  for (auto format : {file_format::PARQUET, file_format::ARROW_IPC_FILE}) {
    SCOPED_TRACE(std::string{extension(format)});
    auto const source = path("in." + std::string{extension(format)});
    auto reader       = format == file_format::PARQUET
                          ? open_parquet(source, {}, default_stream(), host_)
                          : open_arrow_ipc(source, format, {}, default_stream(), host_);
    ASSERT_EQ(reader->schema().size(), 5U);
    EXPECT_EQ(reader->schema()[1].storage, string_storage::STRING);
    EXPECT_EQ(reader->schema()[2].storage, string_storage::LARGE_STRING);
    EXPECT_EQ(reader->schema()[3].time_zone, "UTC");
    EXPECT_EQ(reader->schema()[4].time_zone, "Europe/Paris");
    batch_writer_options options;
    options.directory = path("out-" + std::string{extension(format)});
    options.format    = format;
    options.schema    = reader->schema();
    batch_writer writer{options, {"k", "s", "l", "u", "p"}, default_stream(), host_};
    auto const data = read_all(*reader, default_stream(), host_);
    writer.write(data->view());
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    auto const written =
      format == file_format::PARQUET ? parquet_schema(files[0]) : ipc_schema(files[0]);
    EXPECT_TRUE(written->Equals(*input->schema())) << written->ToString() << "\nand not\n"
                                                   << input->schema()->ToString();
    auto const back = format == file_format::PARQUET
                        ? read_parquet(files[0], {}, default_stream(), host_)
                        : read_arrow_ipc(files[0], format, {}, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(data->view(), back->view());
    // A dataset of no rows: one file, with the same Arrow types.
    options.directory = path("empty-" + std::string{extension(format)});
    batch_writer empty_writer{options, {"k", "s", "l", "u", "p"}, default_stream(), host_};
    empty_writer.write_no_rows(slice(data->view(), 0, 0));
    empty_writer.write_no_rows(slice(data->view(), 0, 0));  // still one file
    auto const empty_files = empty_writer.close();
    ASSERT_EQ(empty_files.size(), 1U);
    auto const empty_schema =
      format == file_format::PARQUET ? parquet_schema(empty_files[0]) : ipc_schema(empty_files[0]);
    EXPECT_TRUE(empty_schema->Equals(*input->schema())) << empty_schema->ToString();
  }
}

TEST_F(StringColumnsTest, AStringColumnIsCutIntoBatchesWhoseCharactersFitInt32Offsets) {
  // Rows of 0 to 9 characters, cut at 20 characters instead of 2 GiB.
  std::vector<std::optional<std::string>> values;
  for (std::size_t row = 0; row < 200; ++row) {
    if (row % 17 == 0) {
      values.emplace_back(std::nullopt);
    } else {
      values.emplace_back(std::string(row % 10, 'a'));
    }
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_string_column(values, host_));
  columns.push_back(testing::make_string_column(values, host_));
  table const input(std::move(columns));
  table_schema schema{{"s", type_id::STRING}, {"l", type_id::STRING}};
  schema[0].storage  = string_storage::STRING;
  auto const sliced  = slice(input.view(), 5, 195);
  auto const batches = detail::to_arrow_batches(
    sliced, detail::to_arrow_schema(schema), arrow::default_memory_pool(), 20);
  ASSERT_GT(batches.size(), 1U);
  std::int64_t rows = 0;
  for (auto const& batch : batches) {
    ASSERT_TRUE(batch->ValidateFull().ok());
    auto const& strings = static_cast<arrow::StringArray const&>(*batch->column(0));
    EXPECT_LE(strings.total_values_length(), 20);
    for (std::int64_t row = 0; row < batch->num_rows(); ++row) {
      auto const expected = values[static_cast<std::size_t>(5 + rows + row)];
      ASSERT_EQ(strings.IsNull(row), !expected.has_value());
      if (expected) {
        EXPECT_EQ(strings.GetString(row), *expected);
      }
    }
    rows += batch->num_rows();
  }
  EXPECT_EQ(rows, 190);
  // No rows: one empty batch.
  auto const none = detail::to_arrow_batches(
    slice(input.view(), 7, 7), detail::to_arrow_schema(schema), arrow::default_memory_pool(), 20);
  ASSERT_EQ(none.size(), 1U);
  EXPECT_EQ(none[0]->num_rows(), 0);
  EXPECT_TRUE(none[0]->ValidateFull().ok());
  // A value longer than the cut cannot go into any batch.
  EXPECT_THROW((void)detail::to_arrow_batches(
                 sliced, detail::to_arrow_schema(schema), arrow::default_memory_pool(), 8),
               not_supported);
}
#endif

}  // namespace
}  // namespace spillway
