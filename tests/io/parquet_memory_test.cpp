// A Parquet writer under a memory bound (`parquet_write_options::memory_bytes`): its encode threads
// and row groups fit the bound, and what it writes reads back the same.
#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/core/units.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#endif

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace spillway {
namespace {

TEST(ParquetMemoryBound, ThreadsThenRowGroupsShrinkUntilTheRowGroupsInFlightFit) {
  for (std::size_t const threads : {0U, 1U, 2U, 3U, 8U, 64U}) {
    for (std::size_t const group : {std::size_t{64_MiB}, std::size_t{6_MiB}, std::size_t{1_MiB}}) {
      parquet_write_options asked;
      asked.encode_threads  = threads;
      asked.row_group_bytes = group;
      // Unbounded: as asked.
      auto const same = parquet_write_options_within(asked);
      EXPECT_EQ(same.encode_threads, threads);
      EXPECT_EQ(same.row_group_bytes, group);
      for (std::size_t bound = 64_KiB; bound <= 4_GiB; bound = bound * 3 / 2) {
        SCOPED_TRACE(std::to_string(threads) + " threads, row groups of " + std::to_string(group) +
                     ", bound " + std::to_string(bound));
        asked.memory_bytes = bound;
        auto const fitted  = parquet_write_options_within(asked);
        EXPECT_EQ(fitted.memory_bytes, bound);
        EXPECT_LE(fitted.encode_threads, threads);
        EXPECT_EQ(fitted.encode_threads > 0, threads > 0);
        EXPECT_LE(fitted.row_group_bytes, group);
        // Fewer threads come first: row groups are cut under 4 MiB only where the least
        // threads cannot take them, and never under 64 KiB.
        std::size_t const fewest_threads = threads > 0 ? 1 : 0;
        if (bound >= 2 * (fewest_threads + 1) * PARQUET_LEAST_BOUNDED_ROW_GROUP_BYTES) {
          EXPECT_GE(fitted.row_group_bytes,
                    std::min(group, std::size_t{PARQUET_LEAST_BOUNDED_ROW_GROUP_BYTES}));
        }
        EXPECT_GE(fitted.row_group_bytes,
                  std::min(group, std::size_t{PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES}));
        if (fitted.encode_threads < threads) {
          EXPECT_LT(bound, 2 * (fitted.encode_threads + 2) * PARQUET_LEAST_BOUNDED_ROW_GROUP_BYTES);
        }
        // The row group being filled and those encoding, each twice in memory, fit the bound
        // wherever the smallest of them does.
        std::size_t const in_flight = 2 * (fitted.encode_threads + 1) * fitted.row_group_bytes;
        std::size_t const least =
          2 * (fewest_threads + 1) *
          std::min(group, std::size_t{PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES});
        if (bound >= least) {
          EXPECT_LE(in_flight, bound);
        }
      }
    }
  }
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

class ParquetMemoryBoundTest : public testing::arrow_io_test {
 protected:
  /// Checks the row groups of `file`, written from `input` under `options`: every row group
  /// holds at most the bound's row group bytes of rows, and the file reads back as `input`.
  void expect_row_groups_within(std::string const& file,
                                table_view const& input,
                                parquet_write_options const& options) {
    auto const fitted = parquet_write_options_within(options);
    double const row_bytes =
      static_cast<double>(estimate_size(input)) / static_cast<double>(input.num_rows());
    auto const most_rows =
      static_cast<std::int64_t>(static_cast<double>(fitted.row_group_bytes) / row_bytes);
    auto const groups       = row_group_rows(file);
    std::int64_t total_rows = 0;
    for (auto const rows : groups) {
      EXPECT_LE(rows, most_rows);
      total_rows += rows;
    }
    EXPECT_EQ(total_rows, static_cast<std::int64_t>(input.num_rows()));
    // The row groups in flight, each twice in memory, fit the bound.
    EXPECT_LE(2.0 * static_cast<double>(fitted.encode_threads + 1) *
                static_cast<double>(*std::max_element(groups.begin(), groups.end())) * row_bytes,
              static_cast<double>(options.memory_bytes));
    SPILLWAY_EXPECT_TABLES_EQUAL(input, read_parquet(file, {}, default_stream(), host_)->view());
  }
};

TEST_F(ParquetMemoryBoundTest, RowGroupsFitTheBoundAndReadBackTheSame) {
  // 24 MiB in memory: unbounded, row groups of a million rows (16 MiB).
  std::size_t const rows = 1500000;
  auto const input       = testing::random_table(
    {data_type{type_id::INT64}, data_type{type_id::FLOAT64}}, rows, 11, 0.0, host_);
  std::vector<std::string> const names{"a", "b"};
  struct bounded {
    std::size_t threads;
    std::size_t bytes;
  };
  for (auto const [threads, bytes] : {bounded{0, 16_MiB}, bounded{2, 64_MiB}, bounded{4, 40_MiB}}) {
    SCOPED_TRACE(std::to_string(threads) + " encode threads, bound " + std::to_string(bytes));
    parquet_write_options options;
    options.encode_threads = threads;
    options.compression    = parquet_compression::NONE;
    options.memory_bytes   = bytes;
    // One table at once.
    std::string const file = path("whole-" + std::to_string(threads) + ".parquet");
    write_parquet(input->view(), names, file, options, default_stream(), host_);
    expect_row_groups_within(file, input->view(), options);
    // Small writes that fill row groups between them, through the batch writer.
    batch_writer_options writer_options;
    writer_options.directory = path("pieces-" + std::to_string(threads));
    writer_options.parquet   = options;
    batch_writer writer(writer_options, names, default_stream(), host_);
    for (std::size_t begin = 0; begin < rows; begin += 100000) {
      writer.write(slice(input->view(), begin, std::min(rows, begin + 100000)));
    }
    auto const files = writer.close();
    ASSERT_EQ(files.size(), 1U);
    expect_row_groups_within(files.front(), input->view(), options);
  }
}
#endif

}  // namespace
}  // namespace spillway
