/**
 * @file io_test_support.hpp
 * @brief A scratch directory per test, the host resource, and a table of every type with nulls;
 * and the same for tests of the Arrow formats, skipped where those are not run.
 */
#pragma once

#include "testing/table_generators.hpp"

#include <spillway/io/file_format.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/table.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include <arrow/api.h>
#include <arrow/io/file.h>
#include <parquet/arrow/writer.h>
#endif

#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace spillway::testing {

#if defined(__SANITIZE_THREAD__)
/// Under ThreadSanitizer Arrow's tests are skipped: the pyarrow wheel's libraries are not
/// instrumented, so TSan cannot see the ordering of Arrow's internal futures and reports frees on
/// its I/O threads as races. CSV tests run everywhere.
inline constexpr bool ARROW_UNDER_TSAN = true;
#else
inline constexpr bool ARROW_UNDER_TSAN = false;
#endif

/** @return whether this binary runs the Arrow (Parquet, IPC) tests */
inline bool arrow_tests_enabled() { return arrow_io_available() && !ARROW_UNDER_TSAN; }

/** @return why the Arrow tests are skipped */
inline char const* arrow_skip_reason() {
  return ARROW_UNDER_TSAN
           ? "Arrow tests skip under ThreadSanitizer: the pyarrow wheel's Arrow is uninstrumented"
           : "this build has no Arrow C++ (SPILLWAY_ENABLE_ARROW)";
}

/** @brief Gives each test an empty directory, removed afterwards. */
class io_test : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    directory_       = std::filesystem::temp_directory_path() /
                 ("spillway_io_" + std::string{info->test_suite_name()} + "_" + info->name() + "_" +
                  std::to_string(::getpid()));
    std::filesystem::remove_all(directory_);
    std::filesystem::create_directories(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  /** @return `directory/name` */
  [[nodiscard]] std::string path(std::string const& name) const {
    return (directory_ / name).string();
  }

  /** @return one column of each type, with nulls, `rows` rows */
  std::unique_ptr<table> every_type_table(std::size_t rows,
                                          std::uint64_t seed,
                                          std::vector<data_type> const& column_types = types()) {
    auto result = random_table(column_types, rows, seed, 0.2, host_);
    // Timestamps within about ±300 years of 1970 in every unit: Parquet stores seconds as
    // milliseconds, which overflows for random int64 seconds.
    for (std::size_t c = 0; c < result->num_columns(); ++c) {
      auto& column = result->get_column(c);
      if (column.type().id() != type_id::TIMESTAMP) {
        continue;
      }
      std::int64_t const limit =
        column.type().unit() == time_unit::NANOSECOND    ? 4'000'000'000'000'000'000
        : column.type().unit() == time_unit::MICROSECOND ? 10'000'000'000'000'000
        : column.type().unit() == time_unit::MILLISECOND ? 10'000'000'000'000
                                                         : 10'000'000'000;
      auto* values = column.mutable_data<std::int64_t>();
      for (std::size_t row = 0; row < column.size(); ++row) {
        values[row] %= limit;
      }
    }
    return result;
  }

  /**
   * @return the types of `every_type_table`: all that every format holds, with timestamps in each
   * unit; not BINARY, which CSV refuses (`parquet_types` has it)
   */
  static std::vector<data_type> types() {
    auto result = all_types();
    std::erase(result, data_type{type_id::BINARY});
    result.emplace_back(type_id::TIMESTAMP, time_unit::SECOND);
    result.emplace_back(type_id::TIMESTAMP, time_unit::MICROSECOND);
    result.emplace_back(type_id::TIMESTAMP, time_unit::NANOSECOND);
    return result;
  }

  /**
   * @return `types()` without timestamp[s]: Parquet has no seconds unit, so Arrow stores them as
   * milliseconds and they read back as timestamp[ms] (`ParquetSecondsComeBackAsMilliseconds`);
   * nor date64: Parquet's DATE counts days, and Arrow reads it back as date32
   * (`ParquetDate64ComesBackAsDate32`); and with BINARY
   */
  static std::vector<data_type> parquet_types() {
    auto result = types();
    std::erase(result, data_type{type_id::TIMESTAMP, time_unit::SECOND});
    std::erase(result, data_type{type_id::DATE64});
    result.emplace_back(type_id::BINARY);
    return result;
  }

  /** @return c0, c1, ... */
  static std::vector<std::string> names(std::size_t count) {
    std::vector<std::string> result;
    for (std::size_t i = 0; i < count; ++i) {
      result.push_back("c" + std::to_string(i));
    }
    return result;
  }

  host_memory_resource host_;
  std::filesystem::path directory_;
};

/** @brief An `io_test` that reads or writes the Arrow formats: skipped where they are not run. */
class arrow_io_test : public io_test {
 protected:
  void SetUp() override {
    io_test::SetUp();
    if (!arrow_tests_enabled()) {
      GTEST_SKIP() << arrow_skip_reason();
    }
  }
};

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
/**
 * @brief Writes `input` to the Parquet file `file` with Arrow's own writer, in row groups of
 * `rows_per_group` rows, the Arrow schema kept in the file as pyarrow, Polars and tpchgen-cli keep
 * it.
 */
inline void write_parquet_with_arrow(arrow::Table const& input,
                                     std::string const& file,
                                     std::int64_t rows_per_group) {
  auto sink = *arrow::io::FileOutputStream::Open(file);
  ASSERT_TRUE(
    parquet::arrow::WriteTable(input,
                               arrow::default_memory_pool(),
                               sink,
                               rows_per_group,
                               parquet::default_writer_properties(),
                               parquet::ArrowWriterProperties::Builder().store_schema()->build())
      .ok());
  ASSERT_TRUE(sink->Close().ok());
}
#endif

}  // namespace spillway::testing
