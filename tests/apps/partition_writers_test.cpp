// The writers of a shuffle's partitions (apps/spillway/partition_writers.hpp): closed in the
// background, their files named in the order the writers came, a failed close thrown once every
// close has ended; and the shared Parquet options they take within their memory.
#include "partition_writers.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/units.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/table.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <filesystem>
#include <memory>
#include <string>
#include <unistd.h>
#include <vector>

namespace spillway::cli {
namespace {

class PartitionWriters : public ::testing::Test {
 protected:
  void SetUp() override {
    directory_ = std::filesystem::temp_directory_path() /
                 ("spillway_partition_writers_" +
                  std::string{::testing::UnitTest::GetInstance()->current_test_info()->name()} +
                  "_" + std::to_string(::getpid()));
    std::filesystem::remove_all(directory_);
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  /// A writer of partition `partition` that has written `rows` rows of one int64 column.
  std::unique_ptr<batch_writer> written(std::size_t partition,
                                        std::size_t rows,
                                        parquet_write_options const& parquet) {
    batch_writer_options options;
    options.directory   = (directory_ / ("p" + std::to_string(partition))).string();
    options.file_prefix = "partition-" + std::to_string(partition);
    options.format      = arrow_io_available() ? file_format::PARQUET : file_format::CSV;
    options.parquet     = parquet;
    auto writer         = std::make_unique<batch_writer>(
      options, std::vector<std::string>{"a"}, default_stream(), memory_resources{host_});
    auto const rows_table =
      testing::random_table({data_type{type_id::INT64}}, rows, partition, 0.0, host_);
    writer->write(rows_table->view());
    return writer;
  }

  host_memory_resource host_;
  std::filesystem::path directory_;
};

TEST_F(PartitionWriters, ConcurrentClosesNameTheFilesInTheOrderTheWritersCame) {
  for (std::size_t const at_once : {0U, 1U, 3U, 16U}) {
    SCOPED_TRACE(at_once);
    std::filesystem::remove_all(directory_);
    partition_writers writers(at_once);
    // Every writer shares the same encoders; at 512 KiB they have one slot, which a writer
    // handed over with a row group in flight holds until its close appends it.
    auto const shared = partition_parquet_options(at_once == 1 ? 512_KiB : 4_MiB, 3);
    ASSERT_EQ(shared.encoders->groups(), at_once == 1 ? 1U : 12U);
    std::vector<std::string> expected;
    for (std::size_t partition = 0; partition < 32; ++partition) {
      // Large and small by turns, so that later closes may end first.
      writers.close(written(partition, partition % 2 == 0 ? 300000 : 10, shared));
      expected.push_back((directory_ / ("p" + std::to_string(partition)) /
                          ("partition-" + std::to_string(partition) + "-00000." +
                           (arrow_io_available() ? "parquet" : "csv")))
                           .string());
    }
    auto const paths = writers.finish();
    EXPECT_EQ(paths, expected);
    for (auto const& path : paths) {
      EXPECT_TRUE(std::filesystem::exists(path)) << path;
    }
    EXPECT_TRUE(writers.finish().empty()) << "each path once";
  }
}

TEST_F(PartitionWriters, ConcurrentFailedCloseIsThrownOnceEveryCloseHasEnded) {
  partition_writers writers(2);
  auto const shared = partition_parquet_options(4_MiB, 3);
  writers.close(written(0, 200000, shared));
  auto failing = written(1, 200000, shared);
  // Its directory gone, its file cannot take its name.
  std::filesystem::remove_all(directory_ / "p1");
  writers.close(std::move(failing));
  writers.close(written(2, 200000, shared));
  EXPECT_THROW(static_cast<void>(writers.finish()), std::exception);
  EXPECT_FALSE(std::filesystem::is_empty(directory_ / "p0"));
  EXPECT_FALSE(std::filesystem::is_empty(directory_ / "p2"));
}

TEST(PartitionParquetOptions, RowGroupsFollowTheBudgetAloneAndEverythingInFlightFitsIt) {
  for (std::size_t bytes = 256_KiB; bytes <= 64_GiB; bytes = bytes * 3 / 2) {
    SCOPED_TRACE(bytes);
    auto const one = partition_parquet_options(bytes, 1);
    for (std::size_t const threads : {1U, 2U, 3U, 16U, 128U}) {
      auto const options = partition_parquet_options(bytes, threads);
      ASSERT_NE(options.encoders, nullptr);
      EXPECT_EQ(options.row_group_bytes, one.row_group_bytes) << "the same row groups";
      EXPECT_GE(options.row_group_bytes, PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES);
      EXPECT_LE(options.row_group_bytes, 64_MiB);
      EXPECT_GE(options.encoders->threads(), 1U);
      EXPECT_LE(options.encoders->threads(), std::min(threads, options.encoders->groups()));
      // The writers' row groups being filled, and those in the slots twice over.
      std::size_t const in_flight =
        (PARTITION_WRITERS + 2 * options.encoders->groups()) * options.row_group_bytes;
      if (bytes >= (PARTITION_WRITERS + 2) * PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES) {
        EXPECT_LE(in_flight, bytes);
      }
      if (bytes >= 64_MiB) {
        EXPECT_GE(options.encoders->groups(), 8U) << "room for the encodings of 8 cores";
      }
    }
  }
}

}  // namespace
}  // namespace spillway::cli
