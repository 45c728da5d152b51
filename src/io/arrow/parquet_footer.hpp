/**
 * @file parquet_footer.hpp
 * @brief Internal: moving a Parquet file's row groups to another place in another file, by
 * rewriting the byte offsets in its footer.
 *
 * A Parquet footer is a Thrift `FileMetaData` in the compact protocol. Its row groups, column
 * chunks and column metadata hold absolute file offsets (of the row group, the data and
 * dictionary pages, the page indexes and the bloom filters). Row groups encoded as files of their
 * own in memory, on several threads at once, are copied into one file one after the other; each
 * one's footer then has its offsets shifted by where its bytes landed, and Arrow merges the
 * footers (`parquet::FileMetaData::AppendRowGroups`).
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spillway::detail {

/// Where a column chunk's page indexes were put (an offset of -1: it has none).
struct page_index_location {
  std::int64_t column_index_offset = -1;
  std::int32_t column_index_length = 0;
  std::int64_t offset_index_offset = -1;
  std::int32_t offset_index_length = 0;
};

/**
 * @brief A copy of `footer` (a serialized Parquet `FileMetaData`) whose file offsets are moved by
 * `delta` bytes and whose row groups are numbered from `first_ordinal`.
 *
 * Moved: `RowGroup.file_offset`, `ColumnChunk.file_offset`, `ColumnMetaData.data_page_offset`,
 * `index_page_offset`, `dictionary_page_offset` and `bloom_filter_offset`. An offset of 0 or less
 * means "none" and is kept. The page index locations of column chunk `c` of the first row group
 * become `indexes[c]` (where `indexes` has one for it and its offset is not -1). Every other byte
 * is copied as it is.
 * @throws spillway::corruption_error when `footer` is not a compact-protocol struct or one of those
 * fields has another type than the format gives it
 */
[[nodiscard]] std::vector<std::uint8_t> rebase_parquet_footer(
  std::span<std::uint8_t const> footer,
  std::int64_t delta,
  std::int16_t first_ordinal,
  std::span<page_index_location const> indexes = {});

/**
 * @brief A copy of `offset_index` (a serialized Parquet `OffsetIndex`) whose page offsets are
 * moved by `delta` bytes.
 * @throws spillway::corruption_error as `rebase_parquet_footer`
 */
[[nodiscard]] std::vector<std::uint8_t> rebase_offset_index(
  std::span<std::uint8_t const> offset_index, std::int64_t delta);

}  // namespace spillway::detail
