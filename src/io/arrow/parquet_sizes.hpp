/**
 * @file parquet_sizes.hpp
 * @brief Internal: what decoding a Parquet file takes in memory, from its footer alone: the bytes
 * a row decodes to, and the pages a reader holds beside its batches.
 */
#pragma once

#include <cstddef>

namespace parquet {
class FileMetaData;
}  // namespace parquet

namespace parquet::arrow {
struct SchemaManifest;
}  // namespace parquet::arrow

namespace spillway::detail {

/**
 * @brief The bytes per row (at least one) that Arrow decodes `metadata`'s columns to in row
 * groups [`first_group`, `end_group`) (what one reader reads), as `manifest` types them: for each
 * leaf, its values per row (a list's elements) times a value's
 * size (a fixed width; or an offset and the average length from the size statistics' unencoded
 * bytes, else from the min and max values' lengths), and at least what the file stores; an offset
 * per row for each nested field. A column of few distinct long strings is a dictionary and a few
 * bits a row in the file, but every value once decoded.
 */
double decoded_row_bytes(parquet::FileMetaData const& metadata,
                         parquet::arrow::SchemaManifest const& manifest,
                         int first_group,
                         int end_group);

/**
 * @brief The page bytes one reader of `metadata`'s file holds beside its batches: for each leaf
 * column, a compressed and a decompressed page of at most the column's largest chunk
 * (uncompressed) and at most `PAGE_SCRATCH_BYTES`.
 */
std::size_t decode_scratch_bytes(parquet::FileMetaData const& metadata);

/// The most bytes of one page that `decode_scratch_bytes` counts per column: the data page size
/// that Arrow and parquet-mr write by default.
inline constexpr std::size_t PAGE_SCRATCH_BYTES = std::size_t{1} << 20U;

}  // namespace spillway::detail
