#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/parquet.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <optional>
#include <string>
#include <sys/wait.h>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;

/// The exit status of interop.py when python3, pyarrow or duckdb is missing.
constexpr int MISSING_MODULE = 77;

/** @brief pyarrow and DuckDB read our files and write files we read (tests/io/interop.py). */
class InteropTest : public testing::arrow_io_test {
 protected:
  /** @return the exit status of `interop.py command directory` */
  int run_python(std::string const& command) {
    std::string python = SPILLWAY_IO_TEST_PYTHON;
    if (python.empty()) {
      python = "python3";
    }
    std::string const line = python + " " + SPILLWAY_IO_TEST_SCRIPT + " " + command + " '" +
                             directory_.string() + "' 2>&1";
    int const status = std::system(line.c_str());  // NOLINT(cert-env33-c): a test driver
    if (status == -1 || !WIFEXITED(status)) {
      return 127;
    }
    return WEXITSTATUS(status);
  }

  /** @return the table interop.py builds: row i of each column is a formula of i */
  std::unique_ptr<table> expected() {
    std::size_t const rows = 1000;
    std::vector<std::int64_t> id, at;
    std::vector<std::int32_t> small;
    std::vector<std::uint8_t> flag;
    std::vector<double> ratio;
    std::vector<bool> small_valid, flag_valid, ratio_valid;
    std::vector<std::optional<std::string>> name;
    std::int64_t const start = 1704067200000;  // 2024-01-01T00:00:00 in ms
    for (std::size_t r = 0; r < rows; ++r) {
      auto const v = static_cast<std::int64_t>(r);
      id.push_back(v * 3 - 7);
      small.push_back(static_cast<std::int32_t>(v % 100 - 50));
      small_valid.push_back(v % 7 != 0);
      flag.push_back(v % 2 == 0 ? 1 : 0);
      flag_valid.push_back(v % 11 != 0);
      ratio.push_back(static_cast<double>(v) / 4.0);
      ratio_valid.push_back(v % 13 != 0);
      name.push_back(v % 5 == 0
                       ? std::nullopt
                       : std::optional<std::string>{"name " + std::to_string(v) + ", \"q\""});
      at.push_back(start + v * 1234567);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column(type_id::INT64, id, {}, host_));
    columns.push_back(make_fixed_column(type_id::INT32, small, small_valid, host_));
    columns.push_back(make_fixed_column(type_id::BOOL8, flag, flag_valid, host_));
    columns.push_back(make_fixed_column(type_id::FLOAT64, ratio, ratio_valid, host_));
    columns.push_back(make_string_column(name, host_));
    columns.push_back(
      make_fixed_column(data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}, at, {}, host_));
    return std::make_unique<table>(std::move(columns));
  }

  static std::vector<std::string> column_names() {
    return {"id", "small", "flag", "ratio", "name", "at"};
  }

  static table_schema csv_schema() {
    return {{"id", type_id::INT64},
            {"small", type_id::INT32},
            {"flag", type_id::BOOL8},
            {"ratio", type_id::FLOAT64},
            {"name", type_id::STRING},
            {"at", data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}}};
  }
};

TEST_F(InteropTest, PyarrowAndDuckdbReadOurFiles) {
  auto const input = expected();
  write_parquet(*input, column_names(), path("ours.parquet"), {}, default_stream(), host_);
  write_arrow_ipc(*input,
                  column_names(),
                  path("ours.arrow"),
                  file_format::ARROW_IPC_FILE,
                  default_stream(),
                  host_);
  write_arrow_ipc(*input,
                  column_names(),
                  path("ours.arrows"),
                  file_format::ARROW_IPC_STREAM,
                  default_stream(),
                  host_);
  write_csv(*input, column_names(), path("ours.csv"), {}, default_stream(), host_);
  int const status = run_python("check");
  if (status == MISSING_MODULE || status == 127) {
    GTEST_SKIP()
      << "python3 with pyarrow and duckdb is not available (run scripts/install-deps.sh)";
  }
  EXPECT_EQ(status, 0);
}

TEST_F(InteropTest, WeReadFilesOfPyarrowAndDuckdb) {
  int const status = run_python("write");
  if (status == MISSING_MODULE || status == 127) {
    GTEST_SKIP()
      << "python3 with pyarrow and duckdb is not available (run scripts/install-deps.sh)";
  }
  ASSERT_EQ(status, 0);
  auto const want = expected();
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(), read_parquet(path("pyarrow.parquet"), {}, default_stream(), host_)->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(), read_parquet(path("duckdb.parquet"), {}, default_stream(), host_)->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(),
    read_arrow_ipc(path("pyarrow.arrow"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_)
      ->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(),
    read_arrow_ipc(
      path("pyarrow.arrows"), file_format::ARROW_IPC_STREAM, {}, default_stream(), host_)
      ->view());
  csv_read_options options;
  options.schema = csv_schema();
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(), read_csv(path("pyarrow.csv"), options, default_stream(), host_)->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(
    want->view(), read_csv(path("duckdb.csv"), options, default_stream(), host_)->view());
}

}  // namespace
}  // namespace spillway
