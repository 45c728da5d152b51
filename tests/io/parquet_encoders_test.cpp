// Parquet writers that share encoding threads and row group slots (`parquet_encoders`): their
// files are laid out as a writer with encode threads of its own lays them out, whatever the
// threads and slots, with many writers at once and a single slot among them.
#include "io/io_test_support.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstddef>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

TEST(ParquetEncoders, NeedAThreadAndARowGroup) {
  EXPECT_THROW(parquet_encoders(0, 1), invalid_argument);
  EXPECT_THROW(parquet_encoders(1, 0), invalid_argument);
  parquet_encoders const encoders(3, 5);
  EXPECT_EQ(encoders.threads(), 3U);
  EXPECT_EQ(encoders.groups(), 5U);
}

TEST(ParquetEncoders, AMemoryBoundCutsOnlyTheRowGroupBeingFilled) {
  // The slots bound the row groups in flight: the bound is the one being filled's, twice its rows
  // in memory, and the writer's threads are the encoders'.
  parquet_write_options asked;
  asked.encoders        = std::make_shared<parquet_encoders>(4, 6);
  asked.row_group_bytes = 8_MiB;
  asked.encode_threads  = 0;
  for (std::size_t bound = 64_KiB; bound <= 1_GiB; bound *= 2) {
    SCOPED_TRACE(bound);
    asked.memory_bytes = bound;
    auto const fitted  = parquet_write_options_within(asked);
    EXPECT_EQ(fitted.row_group_bytes,
              std::min<std::size_t>(8_MiB, std::max<std::size_t>(bound / 2, 64_KiB)));
    EXPECT_EQ(fitted.encode_threads, 0U);
    EXPECT_EQ(fitted.encoders, asked.encoders);
  }
}

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
std::string contents(std::string const& file) {
  std::ifstream in(file, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

class ParquetEncodersTest : public testing::arrow_io_test {
 protected:
  static constexpr std::size_t WRITERS = 6;
  static constexpr std::size_t ROWS    = 20000;

  [[nodiscard]] std::unique_ptr<table> input(std::size_t writer) {
    return testing::random_table(
      {data_type{type_id::INT64}, data_type{type_id::STRING}, data_type{type_id::FLOAT64}},
      ROWS + 997 * writer,
      40 + writer,
      0.1,
      host_);
  }

  /**
   * Writes `rows` into `directory` in slices of 1000 rows, each a table of its own that is
   * destroyed as soon as `write` returns (what a shuffle's pinned shard is), and closes.
   * @return the bytes of the one file written
   */
  std::string write(table const& rows,
                    std::string const& directory,
                    parquet_write_options const& parquet) {
    batch_writer_options options;
    options.directory = directory;
    options.parquet   = parquet;
    batch_writer writer(options, {"a", "b", "c"}, default_stream(), host_);
    for (std::size_t begin = 0; begin < rows.num_rows(); begin += 1000) {
      auto const part = copy(slice(rows.view(), begin, std::min(rows.num_rows(), begin + 1000)),
                             default_stream(),
                             host_);
      writer.write(part->view());
    }
    auto const files = writer.close();
    EXPECT_EQ(files.size(), 1U);
    return files.empty() ? std::string{} : contents(files.front());
  }
};

TEST_F(ParquetEncodersTest, ConcurrentWritersSharingEncodersLayOutFilesAsWritersOfTheirOwn) {
  std::vector<std::unique_ptr<table>> inputs;
  std::vector<std::string> reference;
  parquet_write_options own;
  own.encode_threads  = 1;
  own.row_group_bytes = 96_KiB;  // several row groups per file
  for (std::size_t writer = 0; writer < WRITERS; ++writer) {
    inputs.push_back(input(writer));
    reference.push_back(write(*inputs.back(), path("own-" + std::to_string(writer)), own));
  }
  struct shared_by {
    std::size_t threads;
    std::size_t groups;
  };
  for (auto const [threads, groups] :
       {shared_by{1, 1}, shared_by{2, 1}, shared_by{1, 3}, shared_by{3, 2}, shared_by{4, 16}}) {
    SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(groups) + " slots");
    parquet_write_options shared = own;
    shared.encode_threads        = 0;
    shared.encoders              = std::make_shared<parquet_encoders>(threads, groups);
    std::vector<std::string> written(WRITERS);
    std::vector<std::thread> writers;
    for (std::size_t writer = 0; writer < WRITERS; ++writer) {
      writers.emplace_back([&, writer] {
        written[writer] = write(*inputs[writer],
                                path("shared-" + std::to_string(threads) + "-" +
                                     std::to_string(groups) + "-" + std::to_string(writer)),
                                shared);
      });
    }
    for (auto& each : writers) {
      each.join();
    }
    for (std::size_t writer = 0; writer < WRITERS; ++writer) {
      EXPECT_TRUE(written[writer] == reference[writer]) << "writer " << writer;
    }
  }
}

TEST_F(ParquetEncodersTest, WriterDroppedWithRowGroupsInFlightLeavesNoFileAndItsSlots) {
  // One slot: a writer dropped while its row groups encode gives it back, or the next writer
  // would wait for it forever.
  parquet_write_options shared;
  shared.row_group_bytes = 64_KiB;
  shared.encoders        = std::make_shared<parquet_encoders>(2, 1);
  auto const rows        = input(0);
  {
    batch_writer_options options;
    options.directory = path("dropped");
    options.parquet   = shared;
    batch_writer writer(options, {"a", "b", "c"}, default_stream(), host_);
    writer.write(rows->view());
  }
  EXPECT_TRUE(std::filesystem::is_empty(path("dropped")));
  parquet_write_options own = shared;
  own.encoders              = nullptr;
  own.encode_threads        = 1;
  EXPECT_TRUE(write(*rows, path("after"), shared) == write(*rows, path("own"), own));
}
#endif

}  // namespace
}  // namespace spillway
