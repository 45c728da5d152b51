/**
 * @file csv_inference_test.cpp
 * @brief The types the CSV reader infers: decided from every value of the dataset whatever the
 * batch size, no integer rounded to a double, and the types a caller gives instead.
 */
#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/csv.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <fstream>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

class CsvInferenceTest : public testing::io_test {
 protected:
  void write_text(std::string const& name, std::string const& text) const {
    std::ofstream{path(name), std::ios::binary} << text;
  }
};

TEST_F(CsvInferenceTest, WordsAfterManyIntegersMakeAStringColumnWhateverTheBatchSize) {
  // More than the smallest block (64 KiB) of integers, then words.
  std::string text = "k,v\n";
  std::vector<std::optional<std::string>> values;
  std::vector<std::int64_t> keys;
  for (std::size_t row = 0; row < 30000; ++row) {
    auto const value = row < 29990 ? std::to_string(row) : "x" + std::to_string(row);
    text += std::to_string(row) + "," + value + "\n";
    keys.push_back(static_cast<std::int64_t>(row));
    values.emplace_back(value);
  }
  write_text("t.csv", text);
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, host_));
  columns.push_back(make_string_column(values, host_));
  table const expected(std::move(columns));
  table_schema const schema{{"k", type_id::INT64}, {"v", type_id::STRING}};
  for (std::size_t batch_bytes : {std::size_t{1}, std::size_t{64} << 10U, std::size_t{64} << 20U}) {
    SCOPED_TRACE(batch_bytes);
    csv_read_options options;
    options.target_batch_bytes = batch_bytes;
    auto reader                = open_csv(path("t.csv"), options, default_stream(), host_);
    EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
    SPILLWAY_EXPECT_TABLES_EQUAL(expected.view(),
                                 read_all(*reader, default_stream(), host_)->view());
  }
}

TEST_F(CsvInferenceTest, AWordInALaterFileMakesAStringColumnOfTheWholeDataset) {
  write_text("a.csv", "k,v\n1,10\n2,20\n");
  write_text("b.csv", "k,v\n3,30\n4,forty\n");
  auto reader = open_csv(path("*.csv"), {}, default_stream(), host_);
  table_schema const schema{{"k", type_id::INT64}, {"v", type_id::STRING}};
  EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
  auto const output = read_all(*reader, default_stream(), host_);
  ASSERT_EQ(output->num_rows(), 4U);
  EXPECT_EQ(output->view().column(1).string_at(0), "10");
  EXPECT_EQ(output->view().column(1).string_at(3), "forty");
}

TEST_F(CsvInferenceTest, IntegersAreNeverRoundedToDoubles) {
  write_text("t.csv",
             "u,big,wide,mixed,plus,zero,fraction\n"
             "18446744073709551615,99999999999999999999,9007199254740993,1,+5,-0,1.5\n"
             "1,-1,0.5,,-3,18446744073709551615,2\n");
  auto reader = open_csv(path("t.csv"), {}, default_stream(), host_);
  table_schema const schema{{"u", type_id::UINT64},
                            {"big", type_id::STRING},
                            {"wide", type_id::STRING},
                            {"mixed", type_id::INT64},
                            {"plus", type_id::INT64},
                            {"zero", type_id::STRING},
                            {"fraction", type_id::FLOAT64}};
  EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
  auto const output = read_all(*reader, default_stream(), host_);
  auto const view   = output->view();
  EXPECT_EQ(view.column(0).data<std::uint64_t>()[0], 18446744073709551615ULL);
  EXPECT_EQ(view.column(1).string_at(0), "99999999999999999999");
  EXPECT_EQ(view.column(1).string_at(1), "-1");
  EXPECT_EQ(view.column(2).string_at(0), "9007199254740993");
  EXPECT_TRUE(view.column(3).is_null(1));
  EXPECT_EQ(view.column(4).data<std::int64_t>()[0], 5);
  EXPECT_EQ(view.column(5).string_at(0), "-0");
  EXPECT_EQ(view.column(6).data<double>()[1], 2.0);
}

TEST_F(CsvInferenceTest, TimestampsOutsideTheRangeOfTheirUnitMakeAStringColumn) {
  // Nanoseconds since 1970 in an int64 end in 2262.
  write_text("t.csv",
             "t,fits\n2000-01-01T00:00:00.123456789,2000-01-01T00:00:00.5\n"
             "2500-01-01T00:00:00,2500-01-01T00:00:00\n");
  auto reader = open_csv(path("t.csv"), {}, default_stream(), host_);
  table_schema const schema{{"t", type_id::STRING},
                            {"fits", data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}}};
  EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
  auto const output = read_all(*reader, default_stream(), host_);
  EXPECT_EQ(output->view().column(0).string_at(1), "2500-01-01T00:00:00");
}

TEST_F(CsvInferenceTest, GivenColumnTypesAreKeptAndTheOthersInferred) {
  write_text("t.csv", "k,zip,x\n1,00501,2.5\n2,10001,3\n");
  csv_read_options options;
  options.column_types = {{"zip", type_id::STRING}, {"k", type_id::INT32}};
  auto reader          = open_csv(path("t.csv"), options, default_stream(), host_);
  table_schema const schema{
    {"k", type_id::INT32}, {"zip", type_id::STRING}, {"x", type_id::FLOAT64}};
  EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
  auto const output = read_all(*reader, default_stream(), host_);
  EXPECT_EQ(output->view().column(1).string_at(0), "00501");
  EXPECT_EQ(output->view().column(0).data<std::int32_t>()[1], 2);

  // A given type the values do not fit fails as a given schema does, naming the row.
  options.column_types = {{"x", type_id::INT64}};
  try {
    (void)read_csv(path("t.csv"), options, default_stream(), host_);
    ADD_FAILURE() << "2.5 read as an int64";
  } catch (io_error const& error) {
    EXPECT_NE(std::string{error.what()}.find("data row 1, column 'x'"), std::string::npos)
      << error.what();
  }
  options.column_types = {{"nope", type_id::STRING}};
  EXPECT_THROW((void)open_csv(path("t.csv"), options, default_stream(), host_), invalid_argument);
  options.column_types = {{"k", type_id::STRING}, {"k", type_id::INT64}};
  EXPECT_THROW((void)open_csv(path("t.csv"), options, default_stream(), host_), invalid_argument);
  options.column_types = {{"k", type_id::STRING}};
  options.schema =
    table_schema{{"k", type_id::INT64}, {"zip", type_id::STRING}, {"x", type_id::FLOAT64}};
  EXPECT_THROW((void)open_csv(path("t.csv"), options, default_stream(), host_), invalid_argument);
}

TEST_F(CsvInferenceTest, ARaggedRowIsFoundBeforeTheFirstBatch) {
  write_text("t.csv", "a,b\n1,2\n3,4,5\n");
  EXPECT_THROW((void)open_csv(path("t.csv"), {}, default_stream(), host_), corruption_error);
}

TEST_F(CsvInferenceTest, AByteOrderMarkIsNotPartOfTheFirstColumnsName) {
  // One file with the mark and one without: both headers read "k,v".
  write_text("a.csv", "\xEF\xBB\xBFk,v\n1,10\n");
  write_text("b.csv", "k,v\n2,20\n");
  for (auto const* pattern : {"a.csv", "*.csv"}) {
    SCOPED_TRACE(pattern);
    auto reader = open_csv(path(pattern), {}, default_stream(), host_);
    table_schema const schema{{"k", type_id::INT64}, {"v", type_id::INT64}};
    EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
    auto const output = read_all(*reader, default_stream(), host_);
    ASSERT_GE(output->num_rows(), 1U);
    EXPECT_EQ(output->view().column(0).data<std::int64_t>()[0], 1);
  }
}

TEST_F(CsvInferenceTest, DatesMakeADate32ColumnAndDatesBesideTimestampsAString) {
  write_text("t.csv", "d,m\n2024-02-29,2024-01-01\n1969-12-31,2024-01-01T10:00:00\n,x\n");
  auto reader = open_csv(path("t.csv"), {}, default_stream(), host_);
  table_schema const schema{{"d", type_id::DATE32}, {"m", type_id::STRING}};
  EXPECT_EQ(reader->schema(), schema) << to_string(reader->schema());
  auto const output = read_all(*reader, default_stream(), host_);
  ASSERT_EQ(output->num_rows(), 3U);
  auto const dates = output->view().column(0);
  EXPECT_EQ(dates.data<std::int32_t>()[0], 19782);  // days from 1970-01-01 to 2024-02-29
  EXPECT_EQ(dates.data<std::int32_t>()[1], -1);
  EXPECT_TRUE(dates.is_null(2));
}

}  // namespace
}  // namespace spillway
