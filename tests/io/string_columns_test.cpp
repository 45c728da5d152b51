/**
 * @file string_columns_test.cpp
 * @brief STRING columns through the Arrow formats: columns without a byte of characters (all
 * null, all empty), and the Arrow string type a file had kept when it is written back.
 */
#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

class StringColumnsTest : public testing::io_test {
 protected:
  void SetUp() override {
    io_test::SetUp();
    if (!testing::arrow_tests_enabled()) {
      GTEST_SKIP() << testing::arrow_skip_reason();
    }
  }

  /** @return an int64 key and one STRING column of `rows` copies of `value` */
  std::unique_ptr<table> key_and_strings(std::size_t rows,
                                         std::optional<std::string> const& value) {
    std::vector<std::int64_t> keys(rows);
    for (std::size_t i = 0; i < rows; ++i) {
      keys[i] = static_cast<std::int64_t>(rows - i);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, host_));
    columns.push_back(make_string_column(
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
    for (std::size_t threads : {std::size_t{1}, std::size_t{2}}) {
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

}  // namespace
}  // namespace spillway
