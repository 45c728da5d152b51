/**
 * @file type_conversion.hpp
 * @brief spillway columns and types to Arrow arrays and types, and back.
 */
#pragma once

#include "io/arrow/nested_encoding.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <arrow/api.h>

#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway::detail {

/**
 * @return the Arrow type of `type` (STRING is large_utf8, or utf8 for `storage` STRING, utf8_view
 * for VIEW; BINARY likewise large_binary, binary, binary_view, or for FIXED_SIZE
 * fixed_size_binary(`fixed_size`); TIMESTAMP has the zone `time_zone`, none when empty)
 */
std::shared_ptr<arrow::DataType> to_arrow_type(
  data_type type,
  string_storage storage       = string_storage::LARGE_STRING,
  std::string const& time_zone = {},
  std::int32_t fixed_size      = 0);

/** @return the Arrow type a file holds `column` as: its storage, zone and dictionary */
std::shared_ptr<arrow::DataType> to_arrow_type(column_schema const& column);

/**
 * @return the spillway type of the Arrow `type` of column `column` in `file` (a dictionary's:
 * its values')
 * @throws spillway::not_supported naming the file, column and Arrow type when there is none
 */
data_type from_arrow_type(arrow::DataType const& type,
                          std::string const& column,
                          std::string const& file);

/**
 * @return the Arrow schema of `schema`: each field of the type `to_arrow_type(column)`, the
 * nullability and metadata of its column, and the schema's metadata
 */
std::shared_ptr<arrow::Schema> to_arrow_schema(table_schema const& schema);

/**
 * @return the name, spillway type and storage details (string storage, width, dictionary, time
 * zone, nullability, metadata) of `field`
 * @throws as `from_arrow_type`
 */
column_schema from_arrow_field(arrow::Field const& field, std::string const& file);

/** @return Arrow metadata of `pairs`, or null when there are none */
std::shared_ptr<arrow::KeyValueMetadata const> to_arrow_metadata(key_value_metadata const& pairs);

/** @return the pairs of Arrow `metadata` (none when null) */
key_value_metadata from_arrow_metadata(arrow::KeyValueMetadata const* metadata);

/** @return the spillway schema of `schema` @throws as `from_arrow_type` */
table_schema from_arrow_schema(arrow::Schema const& schema, std::string const& file);

/**
 * @brief An Arrow array of `arrow_type` (not a dictionary) over `view`: zero-copy for every type
 * but BOOL8, whose bytes are packed into bits in memory from `pool`, STRING and BINARY as utf8 or
 * binary, whose 32-bit offsets are computed into memory from `pool` (the view must then hold at
 * most INT32_MAX characters), and as views or fixed-size binary, built in memory from `pool`. The
 * view's memory must outlive the array.
 * @throws spillway::invalid_argument for a value of another width than a fixed_size_binary's
 */
std::shared_ptr<arrow::Array> to_arrow_array(column_view const& view,
                                             arrow::MemoryPool* pool,
                                             std::shared_ptr<arrow::DataType> const& arrow_type);

/** @brief `to_arrow_array` of the Arrow type `to_arrow_type(view.type(), storage, time_zone)`. */
std::shared_ptr<arrow::Array> to_arrow_array(column_view const& view,
                                             arrow::MemoryPool* pool,
                                             string_storage storage = string_storage::LARGE_STRING,
                                             std::string const& time_zone = {});

/**
 * @brief The dictionaries a writer has given its dictionary-encoded columns so far. Each column's
 * dictionary only grows: the values new to a batch are appended, so that every batch's
 * dictionary extends the one before (Arrow IPC files take such deltas, never a replacement).
 * @note One thread at a time.
 */
class arrow_dictionaries {
 public:
  /**
   * @param never_empty whether a dictionary that a batch leaves empty (its rows all null, its
   * lists all empty) holds one null value instead, which no index points to, the values that come
   * later numbered from 1: Arrow's IPC file writer takes a dictionary after an empty one for a
   * replacement, which a file cannot hold, and a delta after one of a null
   */
  explicit arrow_dictionaries(bool never_empty = false) : never_empty_(never_empty) {}

  /**
   * @return the rows of `view` (column `column` of the tables written) encoded as `type`
   * @throws spillway::not_supported when the values outnumber what the index type addresses
   */
  std::shared_ptr<arrow::Array> encode(std::size_t column,
                                       column_view const& view,
                                       arrow::DictionaryType const& type,
                                       arrow::MemoryPool* pool);

  /** @return the dictionaries inside the nested column `column` so far (see decode_nested) */
  nested_dictionaries& nested(std::size_t column);

 private:
  struct column_state {
    std::unordered_map<std::string, std::uint64_t> index;  ///< a value's bytes to its index
    std::shared_ptr<arrow::Array> values;                  ///< the dictionary so far
    std::uint64_t reserved = 0;  ///< the indices before the values' (see `never_empty`)
  };
  bool never_empty_;
  std::vector<column_state> columns_;
  std::vector<nested_dictionaries> nested_;
};

/// The most characters a `string` array holds: its offsets are int32.
inline constexpr std::int64_t MAX_STRING_ARRAY_CHARS = std::numeric_limits<std::int32_t>::max();

/**
 * @return record batches of `schema` over the rows of `input`, in order (see `to_arrow_array`;
 * dictionary fields, and dictionaries inside nested fields, are encoded by `dictionaries`, or by
 * a fresh set when null):
 * one, or where a `string` (utf8) column of `schema` holds more than `max_chars` characters, as
 * many as it takes for each to hold at most `max_chars` in every such column
 * @throws spillway::not_supported naming the column when one value is longer than `max_chars`;
 * spillway::invalid_argument when a column has nulls that its field says it has not
 */
std::vector<std::shared_ptr<arrow::RecordBatch>> to_arrow_batches(
  table_view const& input,
  std::shared_ptr<arrow::Schema> const& schema,
  arrow::MemoryPool* pool,
  std::int64_t max_chars           = MAX_STRING_ARRAY_CHARS,
  arrow_dictionaries* dictionaries = nullptr);

/** @return the bytes `chunk` takes as a spillway column of `type` (values, offsets, mask) */
std::size_t spillway_size(arrow::Array const& chunk);

/**
 * @brief Copies `chunks` (Arrow arrays of one column, in order) into one column of `type` from
 * `resource`.
 */
std::unique_ptr<column> from_arrow_chunks(std::vector<std::shared_ptr<arrow::Array>> const& chunks,
                                          data_type type,
                                          stream_view stream,
                                          resource_ref resource);

/** @brief Throws the spillway error for a failed Arrow `status`: "what: message". */
[[noreturn]] void throw_arrow_error(arrow::Status const& status, std::string const& what);

/** @brief Throws when `status` is not OK. */
inline void check_arrow(arrow::Status const& status, std::string const& what) {
  if (!status.ok()) {
    throw_arrow_error(status, what);
  }
}

/** @return the value of `result`, or throws as `check_arrow` */
template <typename T>
T value_or_throw(arrow::Result<T> result, std::string const& what) {
  if (!result.ok()) {
    throw_arrow_error(result.status(), what);
  }
  return std::move(result).ValueUnsafe();
}

}  // namespace spillway::detail
