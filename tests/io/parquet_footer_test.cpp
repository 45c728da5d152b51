// Moving a Parquet file's row groups: the footer's offsets move by the given delta, page index
// locations are replaced, the offset index's pages move, and a footer that is not one fails.
// And the writer that moves them: a row group that fails to encode voids its file.
#include "io/io_test_support.hpp"

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/parquet_footer.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/table/copy.hpp>

#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/page_index.h>
#include <parquet/statistics.h>
#endif

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

class ParquetFooterTest : public testing::io_test {
 protected:
  /// Writes a file of two row groups and returns its bytes.
  std::vector<std::uint8_t> parquet_file() {
    auto const input =
      every_type_table(2000, 4, {data_type{type_id::INT64}, data_type{type_id::STRING}});
    parquet_write_options options;
    options.row_group_rows = 1000;
    write_parquet(
      input->view(), {"a", "b"}, path("file.parquet"), options, default_stream(), host_);
    std::ifstream file(path("file.parquet"), std::ios::binary);
    return {std::istreambuf_iterator<char>(file), {}};
  }

  /// The footer of `file`.
  static std::span<std::uint8_t const> footer_of(std::vector<std::uint8_t> const& file) {
    std::uint32_t length = 0;
    std::memcpy(&length, file.data() + file.size() - 8, sizeof(length));
    return {file.data() + file.size() - 8 - length, length};
  }

  static std::shared_ptr<parquet::FileMetaData> parse(std::span<std::uint8_t const> footer) {
    return parquet::FileMetaData::Make(footer.data(), static_cast<int64_t>(footer.size()));
  }
};

TEST_F(ParquetFooterTest, OffsetsMoveByTheDeltaAndEverythingElseStays) {
  auto const file     = parquet_file();
  auto const footer   = footer_of(file);
  auto const original = parse(footer);
  ASSERT_EQ(original->num_row_groups(), 2);
  // A delta large enough to lengthen every offset's varint.
  std::int64_t const delta = std::int64_t{1} << 40;
  auto const moved_bytes   = detail::rebase_parquet_footer(footer, delta, 5);
  auto const moved         = parse(moved_bytes);
  ASSERT_EQ(moved->num_row_groups(), 2);
  EXPECT_EQ(moved->num_rows(), original->num_rows());
  EXPECT_TRUE(moved->schema()->Equals(*original->schema()));
  for (int group = 0; group < 2; ++group) {
    auto const want = original->RowGroup(group);
    auto const got  = moved->RowGroup(group);
    EXPECT_EQ(got->file_offset(), want->file_offset() + delta);
    EXPECT_EQ(got->total_compressed_size(), want->total_compressed_size());
    for (int column = 0; column < want->num_columns(); ++column) {
      auto const w = want->ColumnChunk(column);
      auto const g = got->ColumnChunk(column);
      EXPECT_EQ(g->data_page_offset(), w->data_page_offset() + delta);
      EXPECT_EQ(g->has_dictionary_page(), w->has_dictionary_page());
      if (w->has_dictionary_page()) {
        EXPECT_EQ(g->dictionary_page_offset(), w->dictionary_page_offset() + delta);
      }
      EXPECT_EQ(g->num_values(), w->num_values());
      EXPECT_TRUE(g->statistics()->Equals(*w->statistics()));
      // No new locations given: the page indexes moved with the data.
      ASSERT_TRUE(w->GetOffsetIndexLocation().has_value());
      EXPECT_EQ(g->GetOffsetIndexLocation()->offset, w->GetOffsetIndexLocation()->offset + delta);
      EXPECT_EQ(g->GetColumnIndexLocation()->offset, w->GetColumnIndexLocation()->offset + delta);
      EXPECT_EQ(g->GetColumnIndexLocation()->length, w->GetColumnIndexLocation()->length);
    }
  }
  // A delta of 0 (and the same ordinals) gives the footer back byte for byte.
  auto const same = detail::rebase_parquet_footer(footer, 0, 0);
  EXPECT_EQ(same, std::vector<std::uint8_t>(footer.begin(), footer.end()));
}

TEST_F(ParquetFooterTest, PageIndexLocationsAreReplacedForTheFirstRowGroup) {
  auto const file     = parquet_file();
  auto const footer   = footer_of(file);
  auto const original = parse(footer);
  std::vector<detail::page_index_location> locations(2);
  locations[0]     = {1000, 11, 2000, 22};
  locations[1]     = {3000, 33, -1, 0};  // no new offset index: it moves by the delta
  auto const moved = parse(detail::rebase_parquet_footer(footer, 7, 0, locations));
  auto const first = moved->RowGroup(0);
  EXPECT_EQ(first->ColumnChunk(0)->GetColumnIndexLocation()->offset, 1000);
  EXPECT_EQ(first->ColumnChunk(0)->GetColumnIndexLocation()->length, 11);
  EXPECT_EQ(first->ColumnChunk(0)->GetOffsetIndexLocation()->offset, 2000);
  EXPECT_EQ(first->ColumnChunk(0)->GetOffsetIndexLocation()->length, 22);
  EXPECT_EQ(first->ColumnChunk(1)->GetColumnIndexLocation()->offset, 3000);
  EXPECT_EQ(first->ColumnChunk(1)->GetOffsetIndexLocation()->offset,
            original->RowGroup(0)->ColumnChunk(1)->GetOffsetIndexLocation()->offset + 7);
  // The second row group's are only moved.
  EXPECT_EQ(moved->RowGroup(1)->ColumnChunk(0)->GetColumnIndexLocation()->offset,
            original->RowGroup(1)->ColumnChunk(0)->GetColumnIndexLocation()->offset + 7);
}

TEST_F(ParquetFooterTest, OffsetIndexPagesMove) {
  auto const file     = parquet_file();
  auto const original = parse(footer_of(file));
  auto const location = original->RowGroup(1)->ColumnChunk(1)->GetOffsetIndexLocation();
  ASSERT_TRUE(location.has_value());
  std::span<std::uint8_t const> const bytes(file.data() + location->offset,
                                            static_cast<std::size_t>(location->length));
  auto const moved      = detail::rebase_offset_index(bytes, 100000);
  auto const properties = parquet::default_reader_properties();
  auto const want =
    parquet::OffsetIndex::Make(bytes.data(), static_cast<uint32_t>(bytes.size()), properties);
  auto const got =
    parquet::OffsetIndex::Make(moved.data(), static_cast<uint32_t>(moved.size()), properties);
  ASSERT_EQ(got->page_locations().size(), want->page_locations().size());
  ASSERT_FALSE(want->page_locations().empty());
  for (std::size_t page = 0; page < want->page_locations().size(); ++page) {
    EXPECT_EQ(got->page_locations()[page].offset, want->page_locations()[page].offset + 100000);
    EXPECT_EQ(got->page_locations()[page].compressed_page_size,
              want->page_locations()[page].compressed_page_size);
    EXPECT_EQ(got->page_locations()[page].first_row_index,
              want->page_locations()[page].first_row_index);
  }
}

TEST_F(ParquetFooterTest, WhatIsNotAFooterFailsAsCorruption) {
  auto const file   = parquet_file();
  auto const footer = footer_of(file);
  // Cut short, with trailing bytes, and an unknown type in the first field's header.
  EXPECT_THROW((void)detail::rebase_parquet_footer(footer.first(footer.size() / 2), 1, 0),
               corruption_error);
  std::vector<std::uint8_t> longer(footer.begin(), footer.end());
  longer.push_back(0);
  EXPECT_THROW((void)detail::rebase_parquet_footer(longer, 1, 0), corruption_error);
  std::vector<std::uint8_t> unknown(footer.begin(), footer.end());
  unknown[0] = static_cast<std::uint8_t>((unknown[0] & 0xF0U) | 0x0FU);
  EXPECT_THROW((void)detail::rebase_parquet_footer(unknown, 1, 0), corruption_error);
  // A row group whose file offset (field 5) is an i32: not moved as something else.
  std::vector<std::uint8_t> const wrong_type{0x49, 0x1C, 0x55, 0x10, 0x00, 0x00};
  EXPECT_THROW((void)detail::rebase_parquet_footer(wrong_type, 1, 0), corruption_error);
  std::vector<std::uint8_t> right_type{0x49, 0x1C, 0x56, 0x10, 0x00, 0x00};
  EXPECT_EQ(detail::rebase_parquet_footer(right_type, 4, 0),
            (std::vector<std::uint8_t>{0x49, 0x1C, 0x56, 0x18, 0x00, 0x00}));
}

TEST_F(ParquetFooterTest, ARowGroupThatFailsToEncodeVoidsTheFile) {
  // Encoding scratch capped just above the file stream's own buffer: the first row group encoded
  // on the pool runs out of memory there, and the writer reports it and takes nothing more.
  auto const input = every_type_table(3000, 11, {data_type{type_id::INT64}});
  std::shared_ptr<table const> const owned =
    copy(input->view(), default_stream(), resource_ref{host_});
  limiting_resource_adaptor limited{host_, 4_MiB + 256_KiB};
  parquet_write_options options;
  options.encode_threads = 2;
  options.row_group_rows = 1000;
  auto writer            = detail::make_parquet_writer(path("void.parquet"),
                                            {{"a", data_type{type_id::INT64}}},
                                            options,
                                            default_stream(),
                                            memory_resources{limited});
  EXPECT_THROW(
    {
      writer->write(owned->view(), owned);
      writer->close();
    },
    out_of_memory);
  // Whatever was taken off the pool is gone from the file: it cannot be finished, nor written.
  EXPECT_THROW(writer->close(), io_error);
  EXPECT_THROW(writer->write(owned->view(), owned), io_error);
}

#endif

}  // namespace
}  // namespace spillway
