// What a Parquet reader holds beside its batches: the page scratch that `spillway sort` counts
// per reader, and Arrow's decoded pieces, sized by what the columns decode to rather than by
// what the file stores.
#include "io/io_test_support.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include <arrow/api.h>
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

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
class ParquetDecodeMemoryTest : public testing::arrow_io_test {};

/** @return `rows` strings: the i-th of `values`, round robin */
std::shared_ptr<arrow::Array> repeating_strings(std::vector<std::string> const& values,
                                                std::int64_t rows) {
  arrow::StringBuilder builder;
  for (std::int64_t row = 0; row < rows; ++row) {
    EXPECT_TRUE(builder.Append(values[static_cast<std::size_t>(row) % values.size()]).ok());
  }
  return *builder.Finish();
}

/** @return int64 values 0, 1, ... */
std::shared_ptr<arrow::Array> counting(std::int64_t rows) {
  arrow::Int64Builder builder;
  for (std::int64_t row = 0; row < rows; ++row) {
    EXPECT_TRUE(builder.Append(row * 7919 % 1000003).ok());
  }
  return *builder.Finish();
}

TEST_F(ParquetDecodeMemoryTest, ScratchIsTwoPagesPerColumnOfTheWidestFile) {
  // A small file: two int64 columns in chunks of 8 KiB. A wide one: chunks of distinct strings
  // of 100 letters, over a mebibyte each, counted as a page of 1 MiB; and a short column.
  constexpr std::int64_t SMALL_ROWS = 1000;
  auto const small                  = arrow::Table::Make(
    arrow::schema({arrow::field("a", arrow::int64()), arrow::field("b", arrow::int64())}),
    {counting(SMALL_ROWS), counting(SMALL_ROWS)});
  testing::write_parquet_with_arrow(*small, path("small.parquet"), SMALL_ROWS);

  constexpr std::int64_t WIDE_ROWS = 30000;
  std::vector<std::string> letters;
  for (std::int64_t row = 0; row < WIDE_ROWS; ++row) {
    letters.push_back(std::string(90, 'a') + std::to_string(1000000000 + row));
  }
  auto const wide = arrow::Table::Make(
    arrow::schema({arrow::field("s", arrow::utf8()), arrow::field("k", arrow::int64())}),
    {repeating_strings(letters, WIDE_ROWS), counting(WIDE_ROWS)});
  testing::write_parquet_with_arrow(*wide, path("wide.parquet"), WIDE_ROWS / 2);

  // Two pages of each column: 8,000 bytes of distinct values (a dictionary page, its indices and
  // the page headers) for each small chunk; 1 MiB for the strings (3 MB of them) and 120,000
  // bytes of values (and their indices) for the wide file's int64 chunk.
  auto const small_bytes = parquet_decode_scratch_bytes({path("small.parquet")});
  auto const wide_bytes  = parquet_decode_scratch_bytes({path("wide.parquet")});
  EXPECT_GE(small_bytes, 2 * 2 * 8000U);
  EXPECT_LT(small_bytes, 2 * 2 * 12000U);
  EXPECT_GE(wide_bytes, 2 * (1_MiB + 120000));
  EXPECT_LT(wide_bytes, 2 * (1_MiB + 160000));
  EXPECT_EQ(parquet_decode_scratch_bytes({path("small.parquet"), path("wide.parquet")}),
            wide_bytes);
  EXPECT_EQ(parquet_decode_scratch_bytes({path("wide.parquet"), path("small.parquet")}),
            wide_bytes);
  EXPECT_EQ(parquet_decode_scratch_bytes({}), 0U);
  EXPECT_THROW(static_cast<void>(parquet_decode_scratch_bytes({path("missing.parquet")})),
               io_error);
}

TEST_F(ParquetDecodeMemoryTest, FewDistinctLongStringsAreDecodedInPiecesNearTheTarget) {
  // 200,000 rows of four strings of 300 letters: a dictionary of four values and indices of a
  // few bits a row in the file, 60 MB once decoded. Sized by the file's bytes per row, Arrow
  // decoded 65,536 rows (20 MB) at a time whatever the target.
  constexpr std::int64_t ROWS = 200000;
  std::vector<std::string> values;
  for (char letter : {'w', 'x', 'y', 'z'}) {
    values.emplace_back(300, letter);
  }
  auto const input = arrow::Table::Make(
    arrow::schema({arrow::field("s", arrow::utf8()), arrow::field("k", arrow::int64())}),
    {repeating_strings(values, ROWS), counting(ROWS)});
  testing::write_parquet_with_arrow(*input, path("few.parquet"), ROWS);
  {
    auto const metadata = parquet::ParquetFileReader::OpenFile(path("few.parquet"))->metadata();
    ASSERT_LT(metadata->RowGroup(0)->ColumnChunk(0)->total_uncompressed_size(), 1_MiB)
      << "Arrow wrote no dictionary";
  }
  for (bool const parallel : {false, true}) {
    SCOPED_TRACE(parallel ? "columns in parallel" : "columns one by one");
    statistics_resource_adaptor counted{host_};
    parquet_read_options options;
    options.target_batch_bytes = 1_MiB;
    options.parallel_columns   = parallel;
    auto reader      = open_parquet(path("few.parquet"), options, default_stream(), counted);
    std::size_t rows = 0;
    while (auto batch = reader->next()) {
      rows += batch->num_rows();
      ASSERT_LE(batch->allocated_bytes(), 2_MiB);
    }
    EXPECT_EQ(rows, static_cast<std::size_t>(ROWS));
    // A piece decoded ahead, the batch cut from it and its converted copy, and the pages.
    EXPECT_LT(counted.statistics().peak_bytes, 6_MiB);
  }
}

TEST_F(ParquetDecodeMemoryTest, ListsOfFewDistinctLongStringsAreDecodedInPiecesNearTheTarget) {
  // 4,000 rows of lists of 50 strings of 300 letters (four distinct): 60 MB once decoded, 15 kB
  // a row; sized by one value a row, Arrow decoded 3,300 rows (50 MB) at a time.
  constexpr std::int64_t ROWS     = 4000;
  constexpr std::int64_t ELEMENTS = 50;
  std::vector<std::string> values;
  for (char letter : {'w', 'x', 'y', 'z'}) {
    values.emplace_back(300, letter);
  }
  auto const strings = repeating_strings(values, ROWS * ELEMENTS);
  arrow::Int32Builder offsets;
  for (std::int64_t row = 0; row <= ROWS; ++row) {
    ASSERT_TRUE(offsets.Append(static_cast<std::int32_t>(row * ELEMENTS)).ok());
  }
  auto const lists = *arrow::ListArray::FromArrays(**offsets.Finish(), *strings);
  auto const input =
    arrow::Table::Make(arrow::schema({arrow::field("l", arrow::list(arrow::utf8())),
                                      arrow::field("k", arrow::int64())}),
                       {lists, counting(ROWS)});
  testing::write_parquet_with_arrow(*input, path("lists.parquet"), ROWS);
  statistics_resource_adaptor counted{host_};
  parquet_read_options options;
  options.target_batch_bytes = 2_MiB;
  auto reader      = open_parquet(path("lists.parquet"), options, default_stream(), counted);
  std::size_t rows = 0;
  while (auto batch = reader->next()) {
    rows += batch->num_rows();
  }
  EXPECT_EQ(rows, static_cast<std::size_t>(ROWS));
  EXPECT_LT(counted.statistics().peak_bytes, 12_MiB);
}
#endif

}  // namespace
}  // namespace spillway
