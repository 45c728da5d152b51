#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include <arrow/util/key_value_metadata.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/page_index.h>
#include <parquet/statistics.h>
#endif

#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

class RoundTripTest : public testing::io_test {};

#define SPILLWAY_SKIP_WITHOUT_ARROW()             \
  if (!testing::arrow_tests_enabled()) {          \
    GTEST_SKIP() << testing::arrow_skip_reason(); \
  }

TEST_F(RoundTripTest, ParquetEveryTypeWithNulls) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input = every_type_table(1000, 1, parquet_types());
  auto const names = this->names(input->num_columns());
  write_parquet(*input, names, path("t.parquet"), {}, default_stream(), host_);
  auto reader = open_parquet(path("t.parquet"), {}, default_stream(), host_);
  ASSERT_EQ(reader->schema().size(), names.size());
  for (std::size_t i = 0; i < names.size(); ++i) {
    EXPECT_EQ(reader->schema()[i].name, names[i]);
    EXPECT_EQ(reader->schema()[i].type, input->view().column(i).type()) << i;
  }
  auto const output = read_all(*reader, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), output->view());
}

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
/** @return the rows of each row group of the Parquet file `path`, read by Arrow itself */
std::vector<std::int64_t> row_group_rows(std::string const& path) {
  auto const metadata = parquet::ParquetFileReader::OpenFile(path)->metadata();
  std::vector<std::int64_t> rows;
  for (int group = 0; group < metadata->num_row_groups(); ++group) {
    rows.push_back(metadata->RowGroup(group)->num_rows());
  }
  return rows;
}

TEST_F(RoundTripTest, ParquetSmallWritesShareRowGroupsUpToTheRowAndByteLimits) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input = every_type_table(10000, 3, parquet_types());
  auto const names = this->names(input->num_columns());
  auto const write = [&](parquet_write_options const& options, std::size_t step) {
    batch_writer_options writer_options;
    writer_options.directory = path("w");
    writer_options.parquet   = options;
    batch_writer writer(writer_options, names, default_stream(), host_);
    for (std::size_t begin = 0; begin < input->num_rows(); begin += step) {
      writer.write(slice(input->view(), begin, std::min(begin + step, input->num_rows())));
    }
    auto files = writer.close();
    EXPECT_EQ(files.size(), 1U);
    SPILLWAY_EXPECT_TABLES_EQUAL(input->view(),
                                 read_parquet(files[0], {}, default_stream(), host_)->view());
    auto groups = row_group_rows(files[0]);
    std::filesystem::remove_all(path("w"));
    return groups;
  };
  // 100 writes of 100 rows fill row groups of 3000 rows: one per write would be 100 groups.
  parquet_write_options by_rows;
  by_rows.row_group_rows = 3000;
  EXPECT_EQ(write(by_rows, 100), (std::vector<std::int64_t>{3000, 3000, 3000, 1000}));
  // One write larger than a row group is cut across several.
  EXPECT_EQ(write(by_rows, 10000), (std::vector<std::int64_t>{3000, 3000, 3000, 1000}));
  // The byte limit: row groups of about 1/8 of the table.
  parquet_write_options by_bytes;
  by_bytes.row_group_bytes = estimate_size(input->view()) / 8;
  auto const groups        = write(by_bytes, 100);
  EXPECT_GE(groups.size(), 8U);
  EXPECT_LE(groups.size(), 10U);
  for (auto const rows : groups) {
    EXPECT_LE(rows, 1300);
  }
}

/// Byte offset where column chunk `column` of row group `group` begins.
int64_t chunk_start(parquet::FileMetaData const& metadata, int group, int column) {
  auto const chunk = metadata.RowGroup(group)->ColumnChunk(column);
  return chunk->has_dictionary_page() ? chunk->dictionary_page_offset() : chunk->data_page_offset();
}

/**
 * Checks that two Parquet files hold the same row groups, column chunks (encodings, compression,
 * sizes, statistics, pages at the same places within each chunk) and page indexes, wherever in
 * the file each row group lies.
 */
void expect_same_row_groups(std::string const& expected_path, std::string const& actual_path) {
  auto const expected_reader = parquet::ParquetFileReader::OpenFile(expected_path);
  auto const actual_reader   = parquet::ParquetFileReader::OpenFile(actual_path);
  auto const& expected       = *expected_reader->metadata();
  auto const& actual         = *actual_reader->metadata();
  ASSERT_EQ(actual.num_row_groups(), expected.num_row_groups());
  ASSERT_EQ(actual.num_rows(), expected.num_rows());
  ASSERT_TRUE(actual.schema()->Equals(*expected.schema()));
  EXPECT_TRUE(actual.key_value_metadata()->Equals(*expected.key_value_metadata()));
  auto const expected_indexes = expected_reader->GetPageIndexReader();
  auto const actual_indexes   = actual_reader->GetPageIndexReader();
  ASSERT_NE(expected_indexes, nullptr);
  ASSERT_NE(actual_indexes, nullptr);
  for (int group = 0; group < expected.num_row_groups(); ++group) {
    SCOPED_TRACE("row group " + std::to_string(group));
    auto const want = expected.RowGroup(group);
    auto const got  = actual.RowGroup(group);
    EXPECT_EQ(got->num_rows(), want->num_rows());
    EXPECT_EQ(got->total_byte_size(), want->total_byte_size());
    EXPECT_EQ(got->total_compressed_size(), want->total_compressed_size());
    EXPECT_EQ(got->file_offset() - chunk_start(actual, group, 0),
              want->file_offset() - chunk_start(expected, group, 0));
    auto const want_pages = expected_indexes->RowGroup(group);
    auto const got_pages  = actual_indexes->RowGroup(group);
    for (int column = 0; column < want->num_columns(); ++column) {
      SCOPED_TRACE("column " + std::to_string(column));
      auto const w = want->ColumnChunk(column);
      auto const g = got->ColumnChunk(column);
      EXPECT_EQ(g->compression(), w->compression());
      EXPECT_EQ(g->encodings(), w->encodings());
      EXPECT_EQ(g->num_values(), w->num_values());
      EXPECT_EQ(g->total_compressed_size(), w->total_compressed_size());
      EXPECT_EQ(g->total_uncompressed_size(), w->total_uncompressed_size());
      EXPECT_EQ(g->has_dictionary_page(), w->has_dictionary_page());
      ASSERT_EQ(g->is_stats_set(), w->is_stats_set());
      if (w->is_stats_set()) {
        EXPECT_TRUE(g->statistics()->Equals(*w->statistics()));
      }
      // The pages sit at the same places within their chunk.
      int64_t const want_start = chunk_start(expected, group, column);
      int64_t const got_start  = chunk_start(actual, group, column);
      EXPECT_EQ(g->data_page_offset() - got_start, w->data_page_offset() - want_start);
      // Page indexes: the same min/max per page, and page locations that point into this file.
      auto const want_column_index = want_pages->GetColumnIndex(column);
      auto const got_column_index  = got_pages->GetColumnIndex(column);
      ASSERT_EQ(got_column_index != nullptr, want_column_index != nullptr);
      if (want_column_index) {
        EXPECT_EQ(got_column_index->null_pages(), want_column_index->null_pages());
        EXPECT_EQ(got_column_index->encoded_min_values(), want_column_index->encoded_min_values());
        EXPECT_EQ(got_column_index->encoded_max_values(), want_column_index->encoded_max_values());
      }
      auto const want_offset_index = want_pages->GetOffsetIndex(column);
      auto const got_offset_index  = got_pages->GetOffsetIndex(column);
      ASSERT_EQ(got_offset_index != nullptr, want_offset_index != nullptr);
      if (want_offset_index) {
        auto const& want_locations = want_offset_index->page_locations();
        auto const& got_locations  = got_offset_index->page_locations();
        ASSERT_EQ(got_locations.size(), want_locations.size());
        for (std::size_t page = 0; page < want_locations.size(); ++page) {
          EXPECT_EQ(got_locations[page].offset - got_start,
                    want_locations[page].offset - want_start);
          EXPECT_EQ(got_locations[page].compressed_page_size,
                    want_locations[page].compressed_page_size);
          EXPECT_EQ(got_locations[page].first_row_index, want_locations[page].first_row_index);
        }
      }
    }
  }
}

TEST_F(RoundTripTest, ParquetCompressionIsRecordedAndEncodeThreadsWriteTheSameRowGroups) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input = every_type_table(20000, 5, parquet_types());
  auto const names = this->names(input->num_columns());
  auto const write = [&](std::string const& name, parquet_write_options options) {
    options.row_group_rows = 4000;
    write_parquet(input->view(), names, path(name), options, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(input->view(),
                                 read_parquet(path(name), {}, default_stream(), host_)->view());
    auto const metadata = parquet::ParquetFileReader::OpenFile(path(name))->metadata();
    EXPECT_EQ(metadata->num_row_groups(), 5);
    return metadata->RowGroup(0)->ColumnChunk(0)->compression();
  };
  parquet_write_options snappy;
  snappy.compression = parquet_compression::SNAPPY;
  EXPECT_EQ(write("snappy.parquet", snappy), parquet::Compression::SNAPPY);
  parquet_write_options zstd;
  zstd.compression = parquet_compression::ZSTD;
  EXPECT_EQ(write("zstd.parquet", zstd), parquet::Compression::ZSTD);
  // Row groups encoded on a writer's own threads, each as a file of its own, then moved into
  // one: the same row groups, statistics and page indexes as on the calling thread.
  for (std::size_t const threads : {std::size_t{1}, std::size_t{2}, std::size_t{3}}) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    zstd.encode_threads = threads;
    EXPECT_EQ(write("threads.parquet", zstd), parquet::Compression::ZSTD);
    expect_same_row_groups(path("zstd.parquet"), path("threads.parquet"));
  }
}

TEST_F(RoundTripTest, ParquetDictionaryForColumnsOfFewValuesOnly) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  // Distinct int64s and strings, and few distinct ones (with nulls), in one table.
  std::size_t const rows = 10000;
  std::vector<std::int64_t> distinct;
  std::vector<std::int64_t> few;
  std::vector<std::optional<std::string>> names_distinct;
  std::vector<std::optional<std::string>> names_few;
  std::vector<bool> validity;
  for (std::size_t row = 0; row < rows; ++row) {
    distinct.push_back(static_cast<std::int64_t>(row * 7919));
    few.push_back(static_cast<std::int64_t>(row % 10));
    names_distinct.push_back("name-" + std::to_string(row * 31));
    validity.push_back(row % 7 != 0);
    names_few.push_back(validity.back()
                          ? std::optional<std::string>{"city-" + std::to_string(row % 26)}
                          : std::nullopt);
  }
  auto const a = make_fixed_column<std::int64_t>(type_id::INT64, distinct, {}, host_);
  auto const b = make_fixed_column<std::int64_t>(type_id::INT64, few, validity, host_);
  auto const c = make_string_column(names_distinct, host_);
  auto const d = make_string_column(names_few, host_);
  table_view const input{a->view(), b->view(), c->view(), d->view()};
  std::vector<std::string> const names{"a", "b", "c", "d"};
  auto const dictionaries = [&](parquet_dictionary mode) {
    parquet_write_options options;
    options.dictionary = mode;
    write_parquet(input, names, path("dictionary.parquet"), options, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(
      input, read_parquet(path("dictionary.parquet"), {}, default_stream(), host_)->view());
    auto const metadata =
      parquet::ParquetFileReader::OpenFile(path("dictionary.parquet"))->metadata();
    std::vector<bool> has;
    for (int column = 0; column < 4; ++column) {
      has.push_back(metadata->RowGroup(0)->ColumnChunk(column)->has_dictionary_page());
    }
    return has;
  };
  EXPECT_EQ(dictionaries(parquet_dictionary::AUTO), (std::vector<bool>{false, true, false, true}));
  EXPECT_EQ(dictionaries(parquet_dictionary::ON), (std::vector<bool>{true, true, true, true}));
  EXPECT_EQ(dictionaries(parquet_dictionary::OFF), (std::vector<bool>{false, false, false, false}));
  // Too few rows in the first write to tell: Arrow's default, a dictionary everywhere.
  write_parquet(slice(input, 0, 100), names, path("small.parquet"), {}, default_stream(), host_);
  auto const small = parquet::ParquetFileReader::OpenFile(path("small.parquet"))->metadata();
  EXPECT_TRUE(small->RowGroup(0)->ColumnChunk(0)->has_dictionary_page());
}
#endif

/// The formats a build can write: CSV always, Parquet with Arrow.
std::vector<file_format> writable_formats() {
  std::vector<file_format> formats{file_format::CSV};
  if (testing::arrow_tests_enabled()) {
    formats.push_back(file_format::PARQUET);
  }
  return formats;
}

TEST_F(RoundTripTest, ConcurrentParquetColumnsDecodedAtOnceGiveTheSameBatches) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input = every_type_table(20000, 9, parquet_types());
  auto const names = this->names(input->num_columns());
  parquet_write_options write_options;
  write_options.row_group_rows = 3000;
  write_parquet(*input, names, path("t.parquet"), write_options, default_stream(), host_);
  std::vector<std::size_t> batch_rows[2];
  for (bool const parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "columns at once" : "one column after another");
    statistics_resource_adaptor arrow_side{host_};
    parquet_read_options options;
    options.target_batch_bytes = 64_KiB;
    options.parallel_columns   = parallel;
    {
      auto reader = open_parquet(
        path("t.parquet"), options, default_stream(), memory_resources{host_, arrow_side});
      std::vector<std::unique_ptr<table>> batches;
      while (auto batch = reader->next()) {
        batch_rows[parallel ? 1 : 0].push_back(batch->num_rows());
        batches.push_back(std::move(batch));
      }
      ASSERT_GT(batches.size(), 7U);
      std::vector<table_view> views;
      for (auto const& batch : batches) {
        views.push_back(batch->view());
      }
      SPILLWAY_EXPECT_TABLES_EQUAL(input->view(),
                                   concatenate(views, default_stream(), host_)->view());
      EXPECT_GT(arrow_side.statistics().peak_bytes, 0U) << "Arrow decodes into the temporary";
    }
    EXPECT_EQ(arrow_side.statistics().current_bytes, 0U) << "all of it freed with the reader";
  }
  EXPECT_EQ(batch_rows[0], batch_rows[1]);
}

TEST_F(RoundTripTest, ConcurrentOwnedWritesAreEncodedInOrderOnTheWritersThread) {
  for (auto const format : writable_formats()) {
    SCOPED_TRACE(std::string{extension(format)});
    auto column_types = parquet_types();
    if (format == file_format::CSV) {
      std::erase(column_types, data_type{type_id::BINARY});  // CSV refuses it
    }
    auto const input = every_type_table(6000, 4, column_types);
    auto const names = this->names(input->num_columns());
    batch_writer_options options;
    options.directory              = path("owned");
    options.format                 = format;
    options.parquet.row_group_rows = 1000;
    options.parquet.encode_threads = 2;
    batch_writer writer(options, names, default_stream(), host_);
    // Owned tables (written on the writer's thread) and views (written here) interleaved.
    for (std::size_t begin = 0; begin < input->num_rows(); begin += 500) {
      auto const part = slice(input->view(), begin, begin + 500);
      if ((begin / 500) % 3 == 2) {
        writer.write(part);
      } else {
        writer.write(spillway::copy(part, default_stream(), host_));
      }
    }
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    if (format == file_format::PARQUET) {
      SPILLWAY_EXPECT_TABLES_EQUAL(input->view(),
                                   read_parquet(files[0], {}, default_stream(), host_)->view());
    } else {
      table_schema schema;
      for (std::size_t i = 0; i < names.size(); ++i) {
        schema.push_back({names[i], input->view().column(i).type()});
      }
      csv_read_options read_options;
      read_options.schema = schema;
      SPILLWAY_EXPECT_TABLES_EQUAL(
        input->view(), read_csv(files[0], read_options, default_stream(), host_)->view());
    }
    std::filesystem::remove_all(path("owned"));
  }
}

TEST_F(RoundTripTest, ConcurrentOwnedWriteFailureIsThrownByTheNextCallAndLeavesNoFile) {
  for (auto const format : writable_formats()) {
    SCOPED_TRACE(std::string{extension(format)});
    auto column_types = parquet_types();
    if (format == file_format::CSV) {
      std::erase(column_types, data_type{type_id::BINARY});  // CSV refuses it
    }
    auto const input = every_type_table(100, 6, column_types);
    auto names       = this->names(input->num_columns());
    batch_writer_options options;
    options.directory = path("failing");
    options.format    = format;
    {
      batch_writer writer(options, names, default_stream(), host_);
      writer.write(spillway::copy(input->view(), default_stream(), host_));
      // A table of other columns fails on the writer's thread; the next call reports it.
      std::vector<std::size_t> const first_column{0};
      writer.write(spillway::copy(input->view().select(first_column), default_stream(), host_));
      EXPECT_THROW(
        {
          writer.write(spillway::copy(input->view(), default_stream(), host_));
          (void)writer.close();
        },
        invalid_argument);
    }
    std::size_t files = 0;
    for (auto const& entry : std::filesystem::directory_iterator(path("failing"))) {
      (void)entry;
      ++files;
    }
    EXPECT_EQ(files, 0U);
    std::filesystem::remove_all(path("failing"));
  }
}

TEST_F(RoundTripTest, ParquetEveryCompressionAndSlicedInput) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input  = every_type_table(500, 2, parquet_types());
  auto const sliced = slice(input->view(), 37, 411);  // offsets into masks and strings
  for (auto const compression :
       {parquet_compression::NONE, parquet_compression::SNAPPY, parquet_compression::ZSTD}) {
    parquet_write_options options;
    options.compression    = compression;
    options.row_group_rows = 100;
    write_parquet(
      sliced, names(sliced.num_columns()), path("s.parquet"), options, default_stream(), host_);
    auto const output = read_parquet(path("s.parquet"), {}, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(sliced, output->view());
  }
}

TEST_F(RoundTripTest, ParquetSecondsComeBackAsMilliseconds) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  data_type const seconds{type_id::TIMESTAMP, time_unit::SECOND};
  data_type const milliseconds{type_id::TIMESTAMP, time_unit::MILLISECOND};
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(
    make_fixed_column<std::int64_t>(seconds, {-86400, 0, 1700000000}, {true, false, true}, host_));
  table const input(std::move(columns));
  write_parquet(input, {"t"}, path("s.parquet"), {}, default_stream(), host_);
  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(make_fixed_column<std::int64_t>(
    milliseconds, {-86400000, 0, 1700000000000}, {true, false, true}, host_));
  table const expected(std::move(expected_columns));
  SPILLWAY_EXPECT_TABLES_EQUAL(
    expected.view(), read_parquet(path("s.parquet"), {}, default_stream(), host_)->view());
}

TEST_F(RoundTripTest, ParquetDate64ComesBackAsDate32) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  constexpr std::int64_t DAY = 86'400'000;
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int64_t>(
    type_id::DATE64, {-DAY, 0, 19'000 * DAY}, {true, false, true}, host_));
  table const input(std::move(columns));
  write_parquet(input, {"d"}, path("d.parquet"), {}, default_stream(), host_);
  std::vector<std::unique_ptr<column>> expected_columns;
  expected_columns.push_back(
    make_fixed_column<std::int32_t>(type_id::DATE32, {-1, 0, 19'000}, {true, false, true}, host_));
  table const expected(std::move(expected_columns));
  SPILLWAY_EXPECT_TABLES_EQUAL(
    expected.view(), read_parquet(path("d.parquet"), {}, default_stream(), host_)->view());
}

TEST_F(RoundTripTest, ArrowIpcFileAndStreamEveryTypeWithNulls) {
  SPILLWAY_SKIP_WITHOUT_ARROW();
  auto const input  = every_type_table(777, 3);
  auto const sliced = slice(input->view(), 5, 700);
  for (auto const format : {file_format::ARROW_IPC_FILE, file_format::ARROW_IPC_STREAM}) {
    auto const file = path("t." + std::string{extension(format)});
    write_arrow_ipc(sliced, names(sliced.num_columns()), file, format, default_stream(), host_);
    auto const output = read_arrow_ipc(file, format, {}, default_stream(), host_);
    SPILLWAY_EXPECT_TABLES_EQUAL(sliced, output->view());
  }
}

TEST_F(RoundTripTest, CsvEveryTypeWithGivenSchemaIsExact) {
  auto const input  = every_type_table(600, 4);
  auto const sliced = slice(input->view(), 3, 599);
  auto const names  = this->names(sliced.num_columns());
  write_csv(sliced, names, path("t.csv"), {}, default_stream(), host_);
  csv_read_options options;
  table_schema schema;
  for (std::size_t i = 0; i < names.size(); ++i) {
    schema.push_back({names[i], sliced.column(i).type()});
  }
  options.schema    = schema;
  auto const output = read_csv(path("t.csv"), options, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(sliced, output->view());
}

TEST_F(RoundTripTest, CsvInferenceWidensAndKeepsValues) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(
    make_fixed_column<std::int64_t>(type_id::INT64, {1, -2, 3}, {true, false, true}, host_));
  columns.push_back(make_fixed_column<double>(type_id::FLOAT64, {0.1, 1e300, -0.0}, {}, host_));
  columns.push_back(
    make_fixed_column<std::uint8_t>(type_id::BOOL8, {1, 0, 1}, {true, true, false}, host_));
  columns.push_back(make_fixed_column<std::int64_t>(
    data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}, {-1, 0, 1700000000123}, {}, host_));
  columns.push_back(make_string_column(
    {
      "a,b",
      std::nullopt,
      "",
    },
    host_));
  columns.push_back(make_string_column({"quote \" here", "line\nbreak", "x"}, host_));
  table const input(std::move(columns));
  std::vector<std::string> const names{"i", "f", "b", "t", "s", "q"};
  write_csv(input, names, path("t.csv"), {}, default_stream(), host_);
  auto reader = open_csv(path("t.csv"), {}, default_stream(), host_);
  table_schema const expected{{"i", type_id::INT64},
                              {"f", type_id::FLOAT64},
                              {"b", type_id::BOOL8},
                              {"t", data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}},
                              {"s", type_id::STRING},
                              {"q", type_id::STRING}};
  EXPECT_EQ(reader->schema(), expected);
  auto const output = read_all(*reader, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input.view(), output->view());
}

TEST_F(RoundTripTest, CsvFloatsExtremesRoundTrip) {
  std::vector<double> const values{std::numeric_limits<double>::min(),
                                   std::numeric_limits<double>::max(),
                                   std::numeric_limits<double>::denorm_min(),
                                   std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(),
                                   0.1 + 0.2};
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<double>(type_id::FLOAT64, values, {}, host_));
  table const input(std::move(columns));
  write_csv(input, {"x"}, path("f.csv"), {}, default_stream(), host_);
  auto const output = read_csv(path("f.csv"), {}, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input.view(), output->view());
}

TEST_F(RoundTripTest, ColumnSelectionInEveryFormat) {
  auto const input = every_type_table(100, 5);
  auto const names = this->names(input->num_columns());
  std::vector<std::string> const wanted{"c12", "c0"};
  std::vector<std::size_t> const indices{12, 0};
  auto const expected = input->view().select(indices);
  {
    write_csv(*input, names, path("t.csv"), {}, default_stream(), host_);
    csv_read_options options;
    table_schema schema;
    for (std::size_t i = 0; i < names.size(); ++i) {
      schema.push_back({names[i], input->view().column(i).type()});
    }
    options.schema  = schema;
    options.columns = wanted;
    SPILLWAY_EXPECT_TABLES_EQUAL(expected,
                                 read_csv(path("t.csv"), options, default_stream(), host_)->view());
  }
  if (testing::arrow_tests_enabled()) {
    write_parquet(*input, names, path("t.parquet"), {}, default_stream(), host_);
    parquet_read_options options;
    options.columns = wanted;
    SPILLWAY_EXPECT_TABLES_EQUAL(
      expected, read_parquet(path("t.parquet"), options, default_stream(), host_)->view());
    write_arrow_ipc(
      *input, names, path("t.arrow"), file_format::ARROW_IPC_FILE, default_stream(), host_);
    arrow_ipc_read_options ipc_options;
    ipc_options.columns = wanted;
    SPILLWAY_EXPECT_TABLES_EQUAL(
      expected,
      read_arrow_ipc(
        path("t.arrow"), file_format::ARROW_IPC_FILE, ipc_options, default_stream(), host_)
        ->view());
  }
}

TEST_F(RoundTripTest, EmptyTableRoundTrips) {
  auto const input = every_type_table(0, 6);
  auto const names = this->names(input->num_columns());
  if (testing::arrow_tests_enabled()) {
    write_parquet(*input, names, path("e.parquet"), {}, default_stream(), host_);
    auto const output = read_parquet(path("e.parquet"), {}, default_stream(), host_);
    EXPECT_EQ(output->num_rows(), 0U);
    EXPECT_EQ(output->num_columns(), input->num_columns());
  }
  write_csv(*input, names, path("e.csv"), {}, default_stream(), host_);
  auto const output = read_csv(path("e.csv"), {}, default_stream(), host_);
  EXPECT_EQ(output->num_rows(), 0U);
  EXPECT_EQ(output->num_columns(), input->num_columns());
}

/// Decimals of each width with known values: -12.34, 0.05, null, 7.00 and, in the wide ones, a
/// value beyond 64 bits.
std::unique_ptr<table> known_decimals(resource_ref resource) {
  __extension__ using int128 = __int128;
  int128 const big           = -((int128{1} << 100) + 5);  // -1267650600228229401496703205381
  std::vector<std::unique_ptr<column>> columns;
  std::vector<bool> const validity{true, true, false, true, true};
  columns.push_back(make_fixed_column<std::int32_t>(
    data_type{type_id::DECIMAL32, 9, 2}, {-1234, 5, 0, 700, 999'999'999}, validity, resource));
  columns.push_back(make_fixed_column<std::int64_t>(data_type{type_id::DECIMAL64, 15, 2},
                                                    {-1234, 5, 0, 700, 999'999'999'999'999},
                                                    validity,
                                                    resource));
  auto const wide128 = [](int128 value) {
    return decimal128_storage{static_cast<std::uint64_t>(value),
                              static_cast<std::int64_t>(value >> 64)};
  };
  columns.push_back(make_fixed_column<decimal128_storage>(
    data_type{type_id::DECIMAL128, 38, 2},
    {wide128(-1234), wide128(5), wide128(0), wide128(700), wide128(big)},
    validity,
    resource));
  auto const wide256 = [](int128 value) {
    auto const fill = value < 0 ? ~std::uint64_t{0} : 0;
    return decimal256_storage{
      {static_cast<std::uint64_t>(value), static_cast<std::uint64_t>(value >> 64), fill, fill}};
  };
  columns.push_back(make_fixed_column<decimal256_storage>(
    data_type{type_id::DECIMAL256, 60, 2},
    {wide256(-1234), wide256(5), wide256(0), wide256(700), wide256(big)},
    validity,
    resource));
  return std::make_unique<table>(std::move(columns));
}

TEST_F(RoundTripTest, DecimalsKeepTheirWidthPrecisionAndScaleInEveryFormat) {
  auto const input = known_decimals(host_);
  auto const names = this->names(input->num_columns());
  table_schema schema;
  for (std::size_t i = 0; i < names.size(); ++i) {
    schema.push_back({names[i], input->view().column(i).type()});
  }
  csv_read_options options;
  options.schema = schema;
  write_csv(*input, names, path("d.csv"), {}, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(),
                               read_csv(path("d.csv"), options, default_stream(), host_)->view());
  if (!testing::arrow_tests_enabled()) {
    return;
  }
  write_parquet(*input, names, path("d.parquet"), {}, default_stream(), host_);
  auto const parquet = read_parquet(path("d.parquet"), {}, default_stream(), host_);
  EXPECT_EQ(parquet->view().column(2).type(), (data_type{type_id::DECIMAL128, 38, 2}));
  // Up to 18 digits as integers (as DuckDB and parquet-rs write them), wider ones as bytes.
  auto const metadata = parquet::ParquetFileReader::OpenFile(path("d.parquet"))->metadata();
  std::vector<parquet::Type::type> physical;
  for (int column = 0; column < metadata->num_columns(); ++column) {
    physical.push_back(metadata->schema()->Column(column)->physical_type());
  }
  EXPECT_EQ(physical,
            (std::vector<parquet::Type::type>{parquet::Type::INT32,
                                              parquet::Type::INT64,
                                              parquet::Type::FIXED_LEN_BYTE_ARRAY,
                                              parquet::Type::FIXED_LEN_BYTE_ARRAY}));
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), parquet->view());
  write_arrow_ipc(
    *input, names, path("d.arrow"), file_format::ARROW_IPC_FILE, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(
    input->view(),
    read_arrow_ipc(path("d.arrow"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_)
      ->view());
}

TEST_F(RoundTripTest, CsvWritesDecimalsAsPlainTextWithScaleDigits) {
  auto const input = known_decimals(host_);
  write_csv(*input, {"a", "b", "c", "d"}, path("d.csv"), {}, default_stream(), host_);
  std::ifstream file{path("d.csv")};
  std::string const text{std::istreambuf_iterator<char>{file}, std::istreambuf_iterator<char>{}};
  EXPECT_EQ(text,
            "a,b,c,d\n"
            "-12.34,-12.34,-12.34,-12.34\n"
            "0.05,0.05,0.05,0.05\n"
            ",,,\n"
            "7.00,7.00,7.00,7.00\n"
            "9999999.99,9999999999999.99,-12676506002282294014967032053.81,"
            "-12676506002282294014967032053.81\n");
}

TEST_F(RoundTripTest, CsvDecimalThatDoesNotFitItsTypeIsAnErrorNamingIt) {
  {
    std::ofstream file{path("d.csv")};
    file << "a\n1.25\n123456.7\n";
  }
  csv_read_options options;
  options.schema = table_schema{{"a", data_type{type_id::DECIMAL64, 6, 2}}};
  try {
    (void)read_csv(path("d.csv"), options, default_stream(), host_);
    FAIL() << "expected io_error";
  } catch (io_error const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("'123456.7' is not a decimal64(6, 2) value"), std::string::npos) << what;
  }
}

}  // namespace
}  // namespace spillway
