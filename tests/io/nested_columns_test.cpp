/**
 * @file nested_columns_test.cpp
 * @brief Nested and null-type columns through the Arrow formats: read as encoded BINARY (INT8
 * nulls for the null type), written back as the file had them, schema and values alike.
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
#include "io/nested_arrays.hpp"

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/json/from_string.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#endif

#include <array>
#include <filesystem>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

class NestedColumnsTest : public testing::arrow_io_test {};

constexpr std::int64_t ROWS = 600;

void write_ipc_file(arrow::Table const& input, std::string const& file) {
  auto sink   = *arrow::io::FileOutputStream::Open(file);
  auto writer = *arrow::ipc::MakeFileWriter(sink, input.schema());
  ASSERT_TRUE(writer->WriteTable(input, 200).ok());
  ASSERT_TRUE(writer->Close().ok());
  ASSERT_TRUE(sink->Close().ok());
}

std::shared_ptr<arrow::Table> read_arrow_file(std::string const& file, file_format format) {
  if (format == file_format::PARQUET) {
    // Row group by row group: a dictionary inside a nested type may change from one to the
    // next, which Arrow cannot read as one array.
    auto reader =
      *parquet::arrow::OpenFile(*arrow::io::ReadableFile::Open(file), arrow::default_memory_pool());
    std::vector<std::shared_ptr<arrow::Table>> groups;
    for (int group = 0; group < reader->num_row_groups(); ++group) {
      groups.push_back(*reader->ReadRowGroup(group));
    }
    return *arrow::ConcatenateTables(groups);
  }
  auto reader = *arrow::ipc::RecordBatchFileReader::Open(*arrow::io::ReadableFile::Open(file));
  return *reader->ToTable();
}

/// Every nested shape (those Parquet holds, for Parquet), a null-type column, a non-nullable
/// nested field with field metadata and a key, with schema metadata.
std::shared_ptr<arrow::Table> input_table(std::uint64_t seed, bool parquet) {
  testing::nested_generator generator{seed, !parquet};
  arrow::FieldVector fields;
  arrow::ArrayVector columns;
  arrow::Int64Builder ids;
  for (std::int64_t row = 0; row < ROWS; ++row) {
    EXPECT_TRUE(ids.Append(row).ok());
  }
  fields.push_back(arrow::field("id", arrow::int64(), false));
  columns.push_back(*ids.Finish());
  for (auto const& shape : testing::nested_shapes()) {
    if (parquet && !shape.parquet) {
      continue;
    }
    fields.push_back(arrow::field(shape.name, shape.type));
    columns.push_back(generator.array(shape.type, ROWS));
  }
  fields.push_back(arrow::field("nothing", arrow::null()));
  columns.push_back(*arrow::MakeArrayOfNull(arrow::null(), ROWS));
  // Never null at the top, with its field's metadata.
  auto const pairs = arrow::list(arrow::field(
    "pair",
    arrow::struct_({arrow::field("k", arrow::utf8(), false), arrow::field("v", arrow::int8())}),
    false));
  auto all_there   = generator.array(pairs, ROWS * 2);
  arrow::Int64Builder valid;
  for (std::int64_t row = 0; row < all_there->length() && valid.length() < ROWS; ++row) {
    if (all_there->IsValid(row)) {
      EXPECT_TRUE(valid.Append(row).ok());
    }
  }
  auto const rows = std::static_pointer_cast<arrow::Int64Array>(*valid.Finish());
  EXPECT_EQ(rows->length(), ROWS);
  arrow::ArrayVector picked;
  for (std::int64_t row = 0; row < rows->length(); ++row) {
    picked.push_back(all_there->Slice(rows->Value(row), 1));
  }
  auto dense = *arrow::Concatenate(picked);
  dense      = arrow::MakeArray(dense->data()->Copy());
  EXPECT_EQ(dense->null_count(), 0);
  fields.push_back(
    arrow::field("pairs", pairs, false, arrow::key_value_metadata({"PARQUET:field_id"}, {"9"})));
  columns.push_back(dense);
  return arrow::Table::Make(
    arrow::schema(fields, arrow::key_value_metadata({"origin"}, {"nested_columns_test"})),
    columns,
    ROWS);
}

arrow::EqualOptions const EXACT =
  arrow::EqualOptions::Defaults().nans_equal(true).signed_zeros_equal(false);

std::unique_ptr<batch_reader> open(std::string const& source,
                                   file_format format,
                                   resource_ref host) {
  return format == file_format::PARQUET
           ? open_parquet(source, {}, default_stream(), host)
           : open_arrow_ipc(source, format, {}, default_stream(), host);
}

TEST_F(NestedColumnsTest, ReadEncodedAndWrittenBackAsTheFileHadThem) {
  testing::write_parquet_with_arrow(*input_table(5, true), path("in.parquet"), 200);
  write_ipc_file(*input_table(5, false), path("in.arrow"));
  for (auto format : {file_format::PARQUET, file_format::ARROW_IPC_FILE}) {
    SCOPED_TRACE(std::string{extension(format)});
    auto const input   = input_table(5, format == file_format::PARQUET);
    auto const source  = path("in." + std::string{extension(format)});
    auto const as_read = read_arrow_file(source, format);
    auto reader        = open(source, format, host_);
    auto const schema  = reader->schema();
    ASSERT_EQ(schema.size(), static_cast<std::size_t>(input->num_columns()));
    for (int c = 1; c < input->num_columns(); ++c) {
      auto const& column = schema[static_cast<std::size_t>(c)];
      ASSERT_TRUE(column.nested.has_value()) << column.name;
      bool const nothing = column.name == "nothing";
      EXPECT_EQ(column.type.id(), nothing ? type_id::INT8 : type_id::BINARY) << column.name;
      EXPECT_EQ(column.nested->arrow_type, as_read->schema()->field(c)->type()->ToString());
    }
    EXPECT_FALSE(schema[0].nested.has_value());
    EXPECT_FALSE(schema.back().nullable);
    EXPECT_EQ(schema.back().metadata, (key_value_metadata{{"PARQUET:field_id", "9"}}));
    // Parquet names a list's items "element": the file's type, whatever it is.
    EXPECT_NE(to_string(schema).find(
                "list_of_struct: " +
                as_read->schema()->GetFieldByName("list_of_struct")->type()->ToString()),
              std::string::npos)
      << to_string(schema);

    auto const data = read_all(*reader, default_stream(), host_);
    ASSERT_EQ(data->num_rows(), static_cast<std::size_t>(ROWS));
    EXPECT_EQ(data->get_column(static_cast<std::size_t>(input->num_columns() - 2)).null_count(),
              static_cast<std::size_t>(ROWS));

    batch_writer_options options;
    options.directory = path("out-" + std::string{extension(format)});
    options.format    = format;
    options.schema    = schema;
    std::vector<std::string> names;
    for (auto const& column : schema) {
      names.push_back(column.name);
    }
    batch_writer writer{options, names, default_stream(), host_};
    writer.write(slice(data->view(), 0, 250));
    writer.write(slice(data->view(), 250, static_cast<std::size_t>(ROWS)));
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    auto const written = read_arrow_file(files[0], format);
    EXPECT_TRUE(written->schema()->Equals(*as_read->schema(), true))
      << written->schema()->ToString(true) << "\nand not\n"
      << as_read->schema()->ToString(true);
    ASSERT_EQ(written->num_rows(), ROWS);
    for (int c = 0; c < input->num_columns(); ++c) {
      SCOPED_TRACE(as_read->schema()->field(c)->name());
      // Dictionaries by value (their indices are the writer's), the rest exactly.
      EXPECT_EQ(testing::value_difference(*written->column(c), *as_read->column(c)), "");
      if (!testing::has_dictionaries_or_views(*as_read->schema()->field(c)->type())) {
        auto const want = *arrow::Concatenate(as_read->column(c)->chunks());
        auto const got  = *arrow::Concatenate(written->column(c)->chunks());
        EXPECT_TRUE(got->Equals(*want, EXACT));
      }
    }
  }
}

TEST_F(NestedColumnsTest, FilesOfADatasetMustShareTheNestedLayout) {
  auto const ints =
    arrow::Table::Make(arrow::schema({arrow::field("x", arrow::list(arrow::int64()))}),
                       {*arrow::MakeArrayOfNull(arrow::list(arrow::int64()), 3)});
  // Other names and offsets, the same values: one dataset, written as the first file.
  auto const large = arrow::Table::Make(
    arrow::schema({arrow::field("x", arrow::large_list(arrow::field("element", arrow::int64())))}),
    {*arrow::MakeArrayOfNull(arrow::large_list(arrow::field("element", arrow::int64())), 2)});
  auto const strings =
    arrow::Table::Make(arrow::schema({arrow::field("x", arrow::list(arrow::utf8()))}),
                       {*arrow::MakeArrayOfNull(arrow::list(arrow::utf8()), 2)});
  auto const plain = arrow::Table::Make(arrow::schema({arrow::field("x", arrow::binary())}),
                                        {*arrow::MakeArrayOfNull(arrow::binary(), 2)});
  std::filesystem::create_directories(path("alike"));
  write_ipc_file(*ints, path("alike/a.arrow"));
  write_ipc_file(*large, path("alike/b.arrow"));
  auto const alike =
    read_arrow_ipc(path("alike"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_);
  EXPECT_EQ(alike->num_rows(), 5U);
  for (auto const& other : {strings, plain}) {
    std::filesystem::remove_all(path("unlike"));
    std::filesystem::create_directories(path("unlike"));
    write_ipc_file(*ints, path("unlike/a.arrow"));
    write_ipc_file(*other, path("unlike/b.arrow"));
    try {
      (void)read_arrow_ipc(
        path("unlike"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_);
      ADD_FAILURE() << "a dataset of list<int64> and "
                    << other->schema()->field(0)->type()->ToString();
    } catch (invalid_argument const& error) {
      EXPECT_NE(std::string{error.what()}.find("unlike those of"), std::string::npos)
        << error.what();
      EXPECT_NE(std::string{error.what()}.find("x: list<item: int64>"), std::string::npos)
        << error.what();
    }
  }
}

TEST_F(NestedColumnsTest, CsvRefusesANestedColumnWithoutWritingAFile) {
  auto const input =
    arrow::Table::Make(arrow::schema({arrow::field("x", arrow::list(arrow::int64()))}),
                       {*arrow::MakeArrayOfNull(arrow::list(arrow::int64()), 3)});
  write_ipc_file(*input, path("in.arrow"));
  auto reader     = open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
  auto const data = read_all(*reader, default_stream(), host_);
  batch_writer_options options;
  options.directory = path("out");
  options.format    = file_format::CSV;
  options.schema    = reader->schema();
  try {
    batch_writer writer{options, {"x"}, default_stream(), host_};
    writer.write(data->view());
    (void)writer.close();
    ADD_FAILURE() << "CSV took a list column";
  } catch (not_supported const& error) {
    EXPECT_NE(
      std::string{error.what()}.find("column 'x' is list<item: int64>, which CSV cannot hold"),
      std::string::npos)
      << error.what();
  }
  std::size_t files = 0;
  if (std::filesystem::exists(path("out"))) {
    for ([[maybe_unused]] auto const& entry :
         std::filesystem::recursive_directory_iterator(path("out"))) {
      ++files;
    }
  }
  EXPECT_EQ(files, 0U);
}

TEST_F(NestedColumnsTest, TypesWithoutAnEncodingInsideAreRefusedByName) {
  auto const either = arrow::dense_union({arrow::field("a", arrow::int8())});
  auto const type   = arrow::list(arrow::dictionary(arrow::int32(), either));
  auto const input  = arrow::Table::Make(arrow::schema({arrow::field("d", type)}),
                                        {*arrow::MakeArrayOfNull(type, 2)});
  write_ipc_file(*input, path("in.arrow"));
  try {
    (void)open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
    ADD_FAILURE() << type->ToString() << " read";
  } catch (not_supported const& error) {
    EXPECT_NE(
      std::string{error.what()}.find("column 'd' of '" + path("in.arrow") + "' has type " +
                                     type->ToString() + ", which spillway does not support (" +
                                     either->ToString() + " inside a nested type;"),
      std::string::npos)
      << error.what();
    EXPECT_NE(std::string{error.what()}.find("month_day_nano_interval, null, dictionaries of "
                                             "these, and list, large_list, list_view"),
              std::string::npos)
      << error.what();
  }
}

TEST_F(NestedColumnsTest, IntervalsAndNestedValuesOfDictionariesRoundTripAcrossBatches) {
  // Several batches, each a delta of the dictionaries before (Arrow IPC files take no
  // replacement); a dictionary of nested values and intervals at the top.
  testing::nested_generator generator{8};
  arrow::FieldVector fields;
  arrow::ArrayVector columns;
  for (auto const& type : {arrow::dictionary(arrow::int16(), arrow::list(arrow::utf8())),
                           arrow::list(arrow::dictionary(arrow::int32(), arrow::utf8())),
                           arrow::month_day_nano_interval(),
                           arrow::day_time_interval(),
                           arrow::month_interval()}) {
    fields.push_back(arrow::field("c" + std::to_string(fields.size()), type));
    columns.push_back(generator.array(type, ROWS));
  }
  auto const input = arrow::Table::Make(arrow::schema(fields), columns, ROWS);
  write_ipc_file(*input, path("in.arrow"));
  auto reader       = open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
  auto const schema = reader->schema();
  for (auto const& column : schema) {
    EXPECT_EQ(column.type.id(), type_id::BINARY) << column.name;
  }
  auto const data = read_all(*reader, default_stream(), host_);
  batch_writer_options options;
  options.directory = path("out");
  options.format    = file_format::ARROW_IPC_FILE;
  options.schema    = schema;
  batch_writer writer{options, {"c0", "c1", "c2", "c3", "c4"}, default_stream(), host_};
  for (std::size_t begin = 0; begin < static_cast<std::size_t>(ROWS); begin += 100) {
    writer.write(slice(data->view(), begin, begin + 100));
  }
  auto const files = writer.close();
  ASSERT_EQ(files.size(), 1U);
  auto const written = read_arrow_file(files[0], file_format::ARROW_IPC_FILE);
  EXPECT_TRUE(written->schema()->Equals(*input->schema(), true))
    << written->schema()->ToString(true);
  for (int c = 0; c < input->num_columns(); ++c) {
    SCOPED_TRACE(input->schema()->field(c)->name());
    EXPECT_EQ(testing::value_difference(*written->column(c), *input->column(c)), "");
  }
}

TEST_F(NestedColumnsTest, ParquetRefusesIntervalsAndNestedValuesOfDictionariesWithoutAFile) {
  for (auto const& type : {arrow::list(arrow::month_day_nano_interval()),
                           arrow::dictionary(arrow::int8(), arrow::list(arrow::int8()))}) {
    SCOPED_TRACE(type->ToString());
    std::filesystem::remove_all(path("out"));
    auto const input = arrow::Table::Make(arrow::schema({arrow::field("x", type)}),
                                          {*arrow::MakeArrayOfNull(type, 3)});
    write_ipc_file(*input, path("in.arrow"));
    auto reader     = open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
    auto const data = read_all(*reader, default_stream(), host_);
    batch_writer_options options;
    options.directory = path("out");
    options.format    = file_format::PARQUET;
    options.schema    = reader->schema();
    try {
      batch_writer writer{options, {"x"}, default_stream(), host_};
      writer.write(data->view());
      (void)writer.close();
      ADD_FAILURE() << "Parquet took " << type->ToString();
    } catch (not_supported const& error) {
      EXPECT_NE(std::string{error.what()}.find("column 'x' is " + type->ToString() +
                                               ", which Parquet cannot hold"),
                std::string::npos)
        << error.what();
    }
    std::size_t files = 0;
    if (std::filesystem::exists(path("out"))) {
      for ([[maybe_unused]] auto const& entry :
           std::filesystem::recursive_directory_iterator(path("out"))) {
        ++files;
      }
    }
    EXPECT_EQ(files, 0U);
  }
}

/// Scalar columns with nulls, intervals, a dictionary of lists and a dictionary of structs (nulls
/// as rows, as dictionary values, as elements, as structs and as fields), field and schema
/// metadata.
std::shared_ptr<arrow::Table> ipc_only_table(std::int64_t rows) {
  auto const from_json = [](std::shared_ptr<arrow::DataType> const& type, std::string const& json) {
    return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
  };
  auto const list_values = from_json(arrow::list(arrow::int32()),
                                     "[[1, 2], null, [null, 3], [], [1], [1, 2, null], [-5]]");
  auto const point =
    arrow::struct_({arrow::field("a", arrow::int32()), arrow::field("b", arrow::utf8())});
  auto const struct_values = from_json(
    point,
    R"([{"a": 1, "b": "x"}, null, {"a": null, "b": "y"}, {"a": 1, "b": null}, {"a": -2, "b": ""}])");
  std::mt19937_64 random{11};
  arrow::Int64Builder ids;
  arrow::Int32Builder keys;
  arrow::StringBuilder words;
  arrow::MonthDayNanoIntervalBuilder intervals;
  arrow::Int32Builder list_indices;
  arrow::Int8Builder struct_indices;
  std::array<char const*, 4> const texts{"", "a", "ab", "\xc3\xa9t\xc3\xa9"};
  for (std::int64_t row = 0; row < rows; ++row) {
    EXPECT_TRUE(ids.Append(row).ok());
    EXPECT_TRUE((row % 7 == 3 ? keys.AppendNull()
                              : keys.Append(static_cast<std::int32_t>(random() % 101) - 50))
                  .ok());
    EXPECT_TRUE(
      (row % 5 == 1 ? words.AppendNull() : words.Append(texts[random() % texts.size()])).ok());
    EXPECT_TRUE((row % 6 == 2 ? intervals.AppendNull()
                              : intervals.Append({static_cast<std::int32_t>(random() % 5) - 2,
                                                  static_cast<std::int32_t>(random() % 61) - 30,
                                                  static_cast<std::int64_t>(random()) >> 20}))
                  .ok());
    EXPECT_TRUE((row % 11 == 4 ? list_indices.AppendNull()
                               : list_indices.Append(static_cast<std::int32_t>(
                                   random() % static_cast<std::uint64_t>(list_values->length()))))
                  .ok());
    EXPECT_TRUE((row % 13 == 5 ? struct_indices.AppendNull()
                               : struct_indices.Append(static_cast<std::int8_t>(
                                   random() % static_cast<std::uint64_t>(struct_values->length()))))
                  .ok());
  }
  auto const dictionary_of_lists  = arrow::dictionary(arrow::int32(), list_values->type());
  auto const dictionary_of_points = arrow::dictionary(arrow::int8(), point);
  arrow::FieldVector const fields{
    arrow::field("id", arrow::int64(), false),
    arrow::field("k", arrow::int32()),
    arrow::field("s", arrow::utf8()),
    arrow::field("iv", arrow::month_day_nano_interval()),
    arrow::field("dl", dictionary_of_lists),
    arrow::field("ds", dictionary_of_points, true, arrow::key_value_metadata({"note"}, {"points"})),
  };
  arrow::ArrayVector const columns{
    *ids.Finish(),
    *keys.Finish(),
    *words.Finish(),
    *intervals.Finish(),
    *arrow::DictionaryArray::FromArrays(dictionary_of_lists, *list_indices.Finish(), list_values),
    *arrow::DictionaryArray::FromArrays(
      dictionary_of_points, *struct_indices.Finish(), struct_values),
  };
  return arrow::Table::Make(
    arrow::schema(fields, arrow::key_value_metadata({"origin"}, {"nested_columns_test"})),
    columns,
    rows);
}

TEST_F(NestedColumnsTest, IpcWriterSplitsFilesAndKeepsIntervalsAndDictionariesOfNestedValues) {
  auto const input = ipc_only_table(ROWS);
  write_ipc_file(*input, path("in.arrow"));
  auto reader       = open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
  auto const schema = reader->schema();
  auto const data   = read_all(*reader, default_stream(), host_);
  batch_writer_options options;
  options.directory         = path("out");
  options.format            = file_format::ARROW_IPC_FILE;
  options.schema            = schema;
  options.target_file_bytes = 4096;  // several files, each with its own dictionaries
  std::vector<std::string> names;
  for (auto const& column : schema) {
    names.push_back(column.name);
  }
  batch_writer writer{options, names, default_stream(), host_};
  for (std::size_t begin = 0; begin < static_cast<std::size_t>(ROWS); begin += 50) {
    writer.write(slice(data->view(), begin, begin + 50));
  }
  auto const files = writer.close();
  ASSERT_GT(files.size(), 2U);
  // Arrow's own reader: every file has the input's schema, together the input's values.
  std::vector<std::shared_ptr<arrow::Table>> parts;
  for (auto const& file : files) {
    EXPECT_TRUE(file.ends_with(".arrow")) << file;
    parts.push_back(read_arrow_file(file, file_format::ARROW_IPC_FILE));
    EXPECT_TRUE(parts.back()->schema()->Equals(*input->schema(), true))
      << file << ": " << parts.back()->schema()->ToString(true);
  }
  auto const written = *arrow::ConcatenateTables(parts);
  ASSERT_EQ(written->num_columns(), input->num_columns());
  for (int c = 0; c < input->num_columns(); ++c) {
    SCOPED_TRACE(input->schema()->field(c)->name());
    EXPECT_EQ(input->column(c)->null_count() > 0, c > 0);  // nulls in all but the id
    EXPECT_EQ(testing::value_difference(*written->column(c), *input->column(c)), "");
  }
  // spillway's reader: the same table and schema as from the input.
  auto again = open(path("out"), file_format::ARROW_IPC_FILE, host_);
  EXPECT_EQ(again->schema(), schema);
  EXPECT_EQ(again->schema().metadata, schema.metadata);
  SPILLWAY_EXPECT_TABLES_EQUAL(data->view(), read_all(*again, default_stream(), host_)->view());
}

TEST_F(NestedColumnsTest, IpcFileTakesDictionaryValuesAfterABatchWithNone) {
  // The first batch of the file has no dictionary value in any column (all null, lists empty):
  // the values of later batches still go into the file, as deltas.
  auto const from_json = [](std::shared_ptr<arrow::DataType> const& type, std::string const& json) {
    return arrow::json::ArrayFromJSONString(type, json).ValueOrDie();
  };
  auto const point  = arrow::struct_({arrow::field("a", arrow::int32())});
  auto const words  = arrow::dictionary(arrow::int8(), arrow::utf8());
  auto const lists  = arrow::dictionary(arrow::int16(), arrow::list(arrow::int32()));
  auto const points = arrow::dictionary(arrow::int32(), point);
  auto const inside = arrow::list(arrow::dictionary(arrow::int32(), arrow::utf8()));
  arrow::FieldVector const fields{arrow::field("w", words),
                                  arrow::field("l", lists),
                                  arrow::field("p", points),
                                  arrow::field("i", inside)};
  arrow::ArrayVector const columns{
    *arrow::DictionaryArray::FromArrays(words,
                                        from_json(arrow::int8(), "[null, null, 1, 0, null]"),
                                        from_json(arrow::utf8(), R"(["a", "b"])")),
    *arrow::DictionaryArray::FromArrays(lists,
                                        from_json(arrow::int16(), "[null, 0, null, 1, 0]"),
                                        from_json(arrow::list(arrow::int32()), "[[1, null], []]")),
    *arrow::DictionaryArray::FromArrays(points,
                                        from_json(arrow::int32(), "[null, null, 0, null, 1]"),
                                        from_json(point, R"([{"a": null}, {"a": 3}])")),
    from_json(inside, R"([[], null, ["x", null, "y"], [], ["y"]])"),
  };
  auto const input = arrow::Table::Make(arrow::schema(fields), columns, 5);
  write_ipc_file(*input, path("in.arrow"));
  auto reader       = open(path("in.arrow"), file_format::ARROW_IPC_FILE, host_);
  auto const schema = reader->schema();
  auto const data   = read_all(*reader, default_stream(), host_);
  batch_writer_options options;
  options.directory = path("out");
  options.format    = file_format::ARROW_IPC_FILE;
  options.schema    = schema;
  batch_writer writer{options, {"w", "l", "p", "i"}, default_stream(), host_};
  writer.write(slice(data->view(), 0, 1));  // no value in any dictionary
  writer.write(slice(data->view(), 1, 2));  // one in `l` only
  writer.write(slice(data->view(), 2, 5));
  auto const files = writer.close();
  ASSERT_EQ(files.size(), 1U);
  auto const written = read_arrow_file(files[0], file_format::ARROW_IPC_FILE);
  EXPECT_TRUE(written->schema()->Equals(*input->schema(), true))
    << written->schema()->ToString(true);
  for (int c = 0; c < input->num_columns(); ++c) {
    SCOPED_TRACE(input->schema()->field(c)->name());
    EXPECT_EQ(testing::value_difference(*written->column(c), *input->column(c)), "");
  }
  SPILLWAY_EXPECT_TABLES_EQUAL(
    data->view(),
    read_arrow_ipc(files[0], file_format::ARROW_IPC_FILE, {}, default_stream(), host_)->view());
}

#endif

}  // namespace
}  // namespace spillway
