/**
 * @file binary_columns_test.cpp
 * @brief Binary, large, view and dictionary-encoded columns through the Arrow formats: read as
 * spillway's physical types (BINARY, STRING, a dictionary's values), written back as the file had
 * them, with its nullability and its field and schema metadata.
 */
#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#endif

#include <array>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

class BinaryColumnsTest : public testing::arrow_io_test {};

TEST_F(BinaryColumnsTest, CsvRefusesABinaryColumnWithoutWritingAFile) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_binary_column({std::string{"\0\x80", 2}}, host_));
  table const input{std::move(columns)};
  EXPECT_THROW(
    write_csv(input.view(), {"b"}, path("b.csv"), csv_write_options{}, default_stream(), host_),
    not_supported);
  EXPECT_FALSE(std::filesystem::exists(path("b.csv")));
}

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

constexpr std::int64_t ROWS = 300;

/// Row `row` of the binary columns: bytes with zeros and bytes above 0x7F; null every 7th row.
std::optional<std::string> bytes_at(std::int64_t row, std::size_t width) {
  if (row % 7 == 3) {
    return std::nullopt;
  }
  std::string value(width == 0 ? static_cast<std::size_t>(row % 5) : width, '\0');
  for (std::size_t i = 0; i < value.size(); ++i) {
    value[i] = static_cast<char>((row * 37 + static_cast<std::int64_t>(i) * 101) % 256);
  }
  return value;
}

/// Row `row` of the text columns: a word of 0 to 13 letters (longer than a view's 12-byte inline
/// values now and then); null every 5th row.
std::optional<std::string> text_at(std::int64_t row) {
  if (row % 5 == 1) {
    return std::nullopt;
  }
  return std::string(static_cast<std::size_t>(row % 14), static_cast<char>('a' + row % 26));
}

/// The dictionary column's values: few distinct words, and nulls.
std::optional<std::string> word_at(std::int64_t row) {
  static std::vector<std::string> const words{"delta", "alpha", "charlie", "bravo"};
  if (row % 11 == 2) {
    return std::nullopt;
  }
  return words[static_cast<std::size_t>(row % 4)];
}

template <typename Builder>
void append(Builder& builder, std::optional<std::string> const& value) {
  ASSERT_TRUE((value ? builder.Append(*value) : builder.AppendNull()).ok());
}

/// The input's Arrow schema: every encoding, a non-nullable key with field metadata, and schema
/// metadata.
std::shared_ptr<arrow::Schema> input_schema() {
  auto const field_id = arrow::key_value_metadata({"PARQUET:field_id"}, {"1"});
  return arrow::schema(
    {arrow::field("k", arrow::int64(), false, field_id),
     arrow::field("b", arrow::binary()),
     arrow::field("lb", arrow::large_binary()),
     arrow::field("f", arrow::fixed_size_binary(3)),
     arrow::field("ls", arrow::large_utf8()),
     arrow::field("sv", arrow::utf8_view()),
     arrow::field("bv", arrow::binary_view()),
     arrow::field("d", arrow::dictionary(arrow::int32(), arrow::utf8())),
     arrow::field("di", arrow::dictionary(arrow::int8(), arrow::int64(), true))},
    arrow::key_value_metadata({"origin", "note"}, {"binary_columns_test", "kept"}));
}

/// Rows [begin, end) of the input, as Arrow arrays of `input_schema()`.
std::shared_ptr<arrow::RecordBatch> input_batch(std::int64_t begin, std::int64_t end) {
  auto const schema = input_schema();
  arrow::Int64Builder keys;
  arrow::BinaryBuilder binary;
  arrow::LargeBinaryBuilder large_binary;
  arrow::FixedSizeBinaryBuilder fixed(arrow::fixed_size_binary(3));
  arrow::LargeStringBuilder large_string;
  arrow::StringViewBuilder string_view;
  arrow::BinaryViewBuilder binary_view;
  arrow::StringDictionary32Builder words;
  arrow::Int64Builder small_values;
  for (std::int64_t row = begin; row < end; ++row) {
    EXPECT_TRUE(keys.Append(ROWS - row).ok());
    append(binary, bytes_at(row, 0));
    append(large_binary, bytes_at(row + 1, 0));
    append(fixed, bytes_at(row + 2, 3));
    append(large_string, text_at(row));
    append(string_view, text_at(row + 1));
    append(binary_view,
           bytes_at(row + 3, 0).has_value()
             ? std::optional<std::string>{*bytes_at(row + 3, 0) + "0123456789abc"}
             : std::nullopt);
    append(words, word_at(row));
    EXPECT_TRUE((row % 13 == 0 ? small_values.AppendNull() : small_values.Append(row % 3)).ok());
  }
  // The int64 dictionary: indices 0..2 into values 30, 10, 20 (so that an index order is not
  // the value order), made by hand for its int8 indices and ordered flag.
  auto const values = *small_values.Finish();
  arrow::Int8Builder indices;
  for (std::int64_t row = 0; row < values->length(); ++row) {
    EXPECT_TRUE((values->IsNull(row)
                   ? indices.AppendNull()
                   : indices.Append(static_cast<std::int8_t>(
                       std::static_pointer_cast<arrow::Int64Array>(values)->Value(row))))
                  .ok());
  }
  arrow::Int64Builder dictionary;
  EXPECT_TRUE(dictionary.AppendValues({30, 10, 20}).ok());
  auto const small = *arrow::DictionaryArray::FromArrays(
    schema->field(8)->type(), *indices.Finish(), *dictionary.Finish());
  std::shared_ptr<arrow::Array> word_indices = *words.Finish();
  return arrow::RecordBatch::Make(schema,
                                  end - begin,
                                  {*keys.Finish(),
                                   *binary.Finish(),
                                   *large_binary.Finish(),
                                   *fixed.Finish(),
                                   *large_string.Finish(),
                                   *string_view.Finish(),
                                   *binary_view.Finish(),
                                   word_indices,
                                   small});
}

/// The input in three record batches (three row groups in Parquet), each with its own
/// dictionaries.
std::shared_ptr<arrow::Table> input_table() {
  return *arrow::Table::FromRecordBatches(
    input_schema(), {input_batch(0, 100), input_batch(100, 200), input_batch(200, ROWS)});
}

void write_ipc_file(arrow::Table const& input, std::string const& file) {
  auto sink    = *arrow::io::FileOutputStream::Open(file);
  auto options = arrow::ipc::IpcWriteOptions::Defaults();
  // Each batch has its own dictionary: a file holds one per field, so they are unified.
  options.unify_dictionaries = true;
  auto writer                = *arrow::ipc::MakeFileWriter(sink, input.schema(), options);
  ASSERT_TRUE(writer->WriteTable(input, 100).ok());
  ASSERT_TRUE(writer->Close().ok());
  ASSERT_TRUE(sink->Close().ok());
}

std::shared_ptr<arrow::Table> read_arrow_file(std::string const& file, file_format format) {
  if (format == file_format::PARQUET) {
    auto reader =
      *parquet::arrow::OpenFile(*arrow::io::ReadableFile::Open(file), arrow::default_memory_pool());
    return *reader->ReadTable();
  }
  auto reader = *arrow::ipc::RecordBatchFileReader::Open(*arrow::io::ReadableFile::Open(file));
  return *reader->ToTable();
}

/// `scalar`, or the value it indexes when it is of a dictionary.
std::shared_ptr<arrow::Scalar> decoded(std::shared_ptr<arrow::Scalar> const& scalar) {
  if (scalar->type->id() != arrow::Type::DICTIONARY) {
    return scalar;
  }
  return *static_cast<arrow::DictionaryScalar const&>(*scalar).GetEncodedValue();
}

/// The spillway table the input decodes to.
std::unique_ptr<table> expected_table(resource_ref host) {
  std::vector<std::int64_t> keys;
  std::vector<std::optional<std::string>> binary;
  std::vector<std::optional<std::string>> large_binary;
  std::vector<std::optional<std::string>> fixed;
  std::vector<std::optional<std::string>> large_string;
  std::vector<std::optional<std::string>> string_view;
  std::vector<std::optional<std::string>> binary_view;
  std::vector<std::optional<std::string>> words;
  std::vector<std::int64_t> small;
  std::vector<bool> small_valid;
  for (std::int64_t row = 0; row < ROWS; ++row) {
    keys.push_back(ROWS - row);
    binary.push_back(bytes_at(row, 0));
    large_binary.push_back(bytes_at(row + 1, 0));
    fixed.push_back(bytes_at(row + 2, 3));
    large_string.push_back(text_at(row));
    string_view.push_back(text_at(row + 1));
    auto const bytes = bytes_at(row + 3, 0);
    binary_view.push_back(bytes ? std::optional<std::string>{*bytes + "0123456789abc"}
                                : std::nullopt);
    words.push_back(word_at(row));
    small.push_back(row % 13 == 0
                      ? 0
                      : std::array<std::int64_t, 3>{30, 10, 20}[static_cast<std::size_t>(row % 3)]);
    small_valid.push_back(row % 13 != 0);
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, host));
  columns.push_back(testing::make_binary_column(binary, host));
  columns.push_back(testing::make_binary_column(large_binary, host));
  columns.push_back(testing::make_binary_column(fixed, host));
  columns.push_back(testing::make_string_column(large_string, host));
  columns.push_back(testing::make_string_column(string_view, host));
  columns.push_back(testing::make_binary_column(binary_view, host));
  columns.push_back(testing::make_string_column(words, host));
  columns.push_back(
    testing::make_fixed_column<std::int64_t>(type_id::INT64, small, small_valid, host));
  return std::make_unique<table>(std::move(columns));
}

std::vector<std::string> const NAMES{"k", "b", "lb", "f", "ls", "sv", "bv", "d", "di"};

TEST_F(BinaryColumnsTest, ReadAsPhysicalTypesAndWrittenBackAsTheFileHadThem) {
  auto const input    = input_table();
  auto const expected = expected_table(host_);
  testing::write_parquet_with_arrow(*input, path("in.parquet"), 100);
  write_ipc_file(*input, path("in.arrow"));
  for (auto format : {file_format::PARQUET, file_format::ARROW_IPC_FILE}) {
    SCOPED_TRACE(std::string{extension(format)});
    auto const source = path("in." + std::string{extension(format)});
    // What Arrow itself reads: the input's schema, but that Parquet keeps a dictionary of
    // numbers as plain numbers.
    auto const file_schema = read_arrow_file(source, format)->schema();
    bool const parquet     = format == file_format::PARQUET;
    ASSERT_TRUE(file_schema->Equals(
      parquet ? *input->schema()->SetField(8, arrow::field("di", arrow::int64())).ValueOrDie()
              : *input->schema(),
      true))
      << file_schema->ToString(true);
    auto reader        = format == file_format::PARQUET
                           ? open_parquet(source, {}, default_stream(), host_)
                           : open_arrow_ipc(source, format, {}, default_stream(), host_);
    auto const& schema = reader->schema();
    ASSERT_EQ(schema.size(), NAMES.size());
    std::vector<type_id> const types{type_id::INT64,
                                     type_id::BINARY,
                                     type_id::BINARY,
                                     type_id::BINARY,
                                     type_id::STRING,
                                     type_id::STRING,
                                     type_id::BINARY,
                                     type_id::STRING,
                                     type_id::INT64};
    for (std::size_t c = 0; c < NAMES.size(); ++c) {
      EXPECT_EQ(schema[c].type.id(), types[c]) << NAMES[c];
    }
    EXPECT_FALSE(schema[0].nullable);
    EXPECT_TRUE(schema[1].nullable);
    EXPECT_EQ(schema[0].metadata, (key_value_metadata{{"PARQUET:field_id", "1"}}));
    EXPECT_EQ(schema[1].storage, string_storage::STRING);
    EXPECT_EQ(schema[2].storage, string_storage::LARGE_STRING);
    EXPECT_EQ(schema[3].storage, string_storage::FIXED_SIZE);
    EXPECT_EQ(schema[3].fixed_size, 3);
    EXPECT_EQ(schema[5].storage, string_storage::VIEW);
    EXPECT_EQ(schema[6].storage, string_storage::VIEW);
    ASSERT_TRUE(schema[7].dictionary.has_value());
    EXPECT_EQ(schema[7].dictionary->index, type_id::INT32);
    EXPECT_FALSE(schema[7].dictionary->ordered);
    EXPECT_EQ(schema[7].storage, string_storage::STRING);
    ASSERT_EQ(schema[8].dictionary.has_value(), !parquet);
    if (!parquet) {
      EXPECT_EQ(schema[8].dictionary->index, type_id::INT8);
      EXPECT_TRUE(schema[8].dictionary->ordered);
    }
    EXPECT_FALSE(schema[1].dictionary.has_value());
    EXPECT_EQ(schema.metadata,
              (key_value_metadata{{"origin", "binary_columns_test"}, {"note", "kept"}}));

    auto const data = read_all(*reader, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), data->view());

    // Written back in two writes (a dictionary grows between them), then read with Arrow.
    batch_writer_options options;
    options.directory = path("out-" + std::string{extension(format)});
    options.format    = format;
    options.schema    = schema;
    batch_writer writer{options, NAMES, default_stream(), host_};
    writer.write(slice(data->view(), 0, 120));
    writer.write(slice(data->view(), 120, ROWS));
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    auto const written = read_arrow_file(files[0], format);
    EXPECT_TRUE(written->schema()->Equals(*file_schema, true))
      << written->schema()->ToString(true) << "\nand not\n"
      << file_schema->ToString(true);
    // The values as Arrow sees them: equal to the input's.
    ASSERT_EQ(written->num_rows(), ROWS);
    auto const as_read = read_arrow_file(source, format);
    for (int c = 0; c < input->num_columns(); ++c) {
      auto const want = as_read->column(c);
      auto const got  = written->column(c);
      for (std::int64_t row = 0; row < ROWS; ++row) {
        auto const a = decoded(*want->GetScalar(row));
        auto const b = decoded(*got->GetScalar(row));
        ASSERT_TRUE(a->Equals(*b)) << NAMES[static_cast<std::size_t>(c)] << " row " << row << ": "
                                   << b->ToString() << " and not " << a->ToString();
      }
    }
    // And read by spillway again: the same rows.
    auto const back = format == file_format::PARQUET
                        ? read_parquet(files[0], {}, default_stream(), host_)
                        : read_arrow_ipc(files[0], format, {}, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  }
}

TEST_F(BinaryColumnsTest, FilesThatEncodeAColumnDifferentlyMakeOneDatasetWrittenAsTheFirst) {
  // One file holds the words as string_view, the other as a dictionary of large_string: one
  // column of one type, written back as the first file has it.
  arrow::StringViewBuilder views;
  arrow::LargeStringBuilder plain;
  for (std::int64_t row = 0; row < 50; ++row) {
    append(views, word_at(row));
    append(plain, word_at(row + 50));
  }
  auto const first_schema = arrow::schema({arrow::field("w", arrow::utf8_view())});
  auto const first        = arrow::Table::Make(first_schema, {*views.Finish()}, 50);
  arrow::Dictionary32Builder<arrow::LargeStringType> dictionary;
  auto const plain_words = *plain.Finish();
  ASSERT_TRUE(dictionary.AppendArray(*plain_words).ok());
  auto const second_schema =
    arrow::schema({arrow::field("w", arrow::dictionary(arrow::int32(), arrow::large_utf8()))});
  auto const second = arrow::Table::Make(second_schema, {*dictionary.Finish()}, 50);
  std::filesystem::create_directories(path("mixed"));
  write_ipc_file(*first, path("mixed/a.arrow"));
  write_ipc_file(*second, path("mixed/b.arrow"));
  auto reader =
    open_arrow_ipc(path("mixed"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_);
  ASSERT_EQ(reader->schema().size(), 1U);
  EXPECT_EQ(reader->schema()[0].type.id(), type_id::STRING);
  EXPECT_EQ(reader->schema()[0].storage, string_storage::VIEW);
  auto const schema = reader->schema();
  auto const data   = read_all(*reader, default_stream(), host_);
  std::vector<std::optional<std::string>> words;
  for (std::int64_t row = 0; row < 100; ++row) {
    words.push_back(word_at(row));
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_string_column(words, host_));
  table const expected{std::move(columns)};
  SPILLWAY_EXPECT_TABLES_EQUAL(expected.view(), data->view());
  batch_writer_options options;
  options.directory = path("mixed-out");
  options.format    = file_format::PARQUET;
  options.schema    = schema;
  batch_writer writer{options, {"w"}, default_stream(), host_};
  writer.write(data->view());
  auto const files = writer.close();
  ASSERT_EQ(files.size(), 1U);
  EXPECT_TRUE(read_arrow_file(files[0], file_format::PARQUET)->schema()->Equals(*first_schema));
}

TEST_F(BinaryColumnsTest, ANonNullableFieldGivenNullsIsRefusedNotWritten) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::make_binary_column({std::string{"a"}, std::nullopt}, host_));
  table const input{std::move(columns)};
  batch_writer_options options;
  options.directory          = path("out");
  options.format             = file_format::PARQUET;
  options.schema             = table_schema{{"b", type_id::BINARY}};
  options.schema[0].nullable = false;
  batch_writer writer{options, {"b"}, default_stream(), host_};
  EXPECT_THROW(writer.write(input.view()), invalid_argument);
}

#endif

}  // namespace
}  // namespace spillway
