/**
 * @file parquet_sizes.cpp
 * @brief What decoding a Parquet file takes in memory, estimated from its footer.
 */
#include "io/arrow/parquet_sizes.hpp"

#include <arrow/type.h>
#include <arrow/type_traits.h>
#include <parquet/arrow/schema.h>
#include <parquet/metadata.h>
#include <parquet/size_statistics.h>
#include <parquet/statistics.h>

#include <algorithm>
#include <cstdint>
#include <vector>

namespace spillway::detail {
namespace {

/// Bytes of an offset in a decoded variable-length value (spillway's and large strings').
constexpr double OFFSET_BYTES = 8.0;

/// One leaf column of a file, over its row groups.
struct leaf_sizes {
  double stored = 0.0;  ///< uncompressed bytes in the file
  double values = 0.0;  ///< values with their nulls and empty lists (`num_values`)
  /// BYTE_ARRAY: the values' bytes from the size statistics, where every row group has them
  double unencoded      = 0.0;
  bool all_unencoded    = true;
  double min_max_length = 0.0;     ///< BYTE_ARRAY: the most of (min + max length) / 2 of any group
  std::int64_t largest_chunk = 0;  ///< the largest chunk's uncompressed bytes
};

/// The leaves of `metadata` over row groups [`first`, `end`), row group by row group.
std::vector<leaf_sizes> leaves_of(parquet::FileMetaData const& metadata, int first, int end) {
  std::vector<leaf_sizes> leaves(static_cast<std::size_t>(std::max(0, metadata.num_columns())));
  for (int group = first; group < end; ++group) {
    auto const row_group = metadata.RowGroup(group);
    for (int column = 0; column < metadata.num_columns(); ++column) {
      auto const chunk = row_group->ColumnChunk(column);
      auto& leaf       = leaves[static_cast<std::size_t>(column)];
      leaf.stored += static_cast<double>(chunk->total_uncompressed_size());
      leaf.values += static_cast<double>(chunk->num_values());
      leaf.largest_chunk = std::max(leaf.largest_chunk, chunk->total_uncompressed_size());
      if (chunk->type() != parquet::Type::BYTE_ARRAY) {
        continue;
      }
      auto const sizes = chunk->size_statistics();
      if (sizes != nullptr && sizes->unencoded_byte_array_data_bytes.has_value()) {
        leaf.unencoded += static_cast<double>(*sizes->unencoded_byte_array_data_bytes);
      } else {
        leaf.all_unencoded = false;
      }
      if (chunk->is_stats_set()) {
        auto const statistics = chunk->statistics();
        if (statistics != nullptr && statistics->HasMinMax()) {
          auto const lengths  = statistics->EncodeMin().size() + statistics->EncodeMax().size();
          leaf.min_max_length = std::max(leaf.min_max_length, static_cast<double>(lengths) / 2.0);
        }
      }
    }
  }
  return leaves;
}

/// A leaf's decoded bytes per row, of Arrow type `type`.
double leaf_row_bytes(leaf_sizes const& leaf, arrow::DataType const& type, double rows) {
  double const values_per_row = leaf.values / rows;
  double value_bytes          = 0.0;
  if (arrow::is_fixed_width(type.id()) && type.id() != arrow::Type::DICTIONARY) {
    auto const& fixed = static_cast<arrow::FixedWidthType const&>(type);
    value_bytes       = std::max(1.0, static_cast<double>(fixed.bit_width()) / 8.0);
  } else {
    double const length =
      leaf.all_unencoded && leaf.values > 0.0 ? leaf.unencoded / leaf.values : leaf.min_max_length;
    value_bytes = OFFSET_BYTES + length;
  }
  return std::max(leaf.stored / rows, values_per_row * value_bytes);
}

/// `field`'s decoded bytes per row, and the values per row of its first leaf.
std::pair<double, double> field_row_bytes(std::vector<leaf_sizes> const& leaves,
                                          parquet::arrow::SchemaField const& field,
                                          double rows) {
  if (field.is_leaf()) {
    if (field.column_index < 0 || static_cast<std::size_t>(field.column_index) >= leaves.size()) {
      return {OFFSET_BYTES, 1.0};
    }
    auto const& leaf = leaves[static_cast<std::size_t>(field.column_index)];
    return {leaf_row_bytes(leaf, *field.field->type(), rows), leaf.values / rows};
  }
  double bytes         = 0.0;
  double first_per_row = 1.0;
  bool first           = true;
  for (auto const& child : field.children) {
    auto const [child_bytes, per_row] = field_row_bytes(leaves, child, rows);
    bytes += child_bytes;
    if (first) {
      first_per_row = per_row;
      first         = false;
    }
  }
  // An offset (or a validity bit) per value of this level: no more than its first leaf has.
  return {bytes + OFFSET_BYTES * std::max(1.0, first_per_row), first_per_row};
}

}  // namespace

double decoded_row_bytes(parquet::FileMetaData const& metadata,
                         parquet::arrow::SchemaManifest const& manifest,
                         int first_group,
                         int end_group) {
  auto const leaves     = leaves_of(metadata, first_group, end_group);
  std::int64_t in_range = 0;
  for (int group = first_group; group < end_group; ++group) {
    in_range += metadata.RowGroup(group)->num_rows();
  }
  double const rows = static_cast<double>(std::max<std::int64_t>(1, in_range));
  double bytes      = 0.0;
  for (auto const& field : manifest.schema_fields) {
    bytes += field_row_bytes(leaves, field, rows).first;
  }
  return std::max(1.0, bytes);
}

std::size_t decode_scratch_bytes(parquet::FileMetaData const& metadata) {
  std::size_t bytes = 0;
  for (auto const& leaf : leaves_of(metadata, 0, metadata.num_row_groups())) {
    bytes += 2 * std::min(static_cast<std::size_t>(std::max<std::int64_t>(0, leaf.largest_chunk)),
                          PAGE_SCRATCH_BYTES);
  }
  return bytes;
}

}  // namespace spillway::detail
