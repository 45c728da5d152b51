/**
 * @file schema.hpp
 * @brief The names and types of a file's columns, as the io readers and writers see them.
 */
#pragma once

#include <spillway/table/data_type.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway {

/**
 * @brief How an Arrow IPC or Parquet file holds a STRING or BINARY column: with 64-bit offsets
 * like a spillway column (`large_string`, `large_binary`), with 32-bit offsets (`string`,
 * `binary`), as views (`string_view`, `binary_view`) or, BINARY only, as `fixed_size_binary`.
 * Inside spillway every one of them is a column of offsets and bytes.
 */
enum class string_storage : std::uint8_t {
  LARGE_STRING,  ///< Arrow's large_string (large_utf8), or large_binary for BINARY
  STRING,        ///< Arrow's string (utf8), or binary for BINARY
  VIEW,          ///< Arrow's string_view (utf8_view), or binary_view for BINARY
  FIXED_SIZE,    ///< BINARY only: Arrow's fixed_size_binary of `column_schema::fixed_size` bytes
};

/** @brief Key-value pairs of Arrow metadata, in order (a field's, or a schema's). */
using key_value_metadata = std::vector<std::pair<std::string, std::string>>;

/**
 * @brief A column that a file holds dictionary-encoded: readers decode it (the column has the
 * values' type, so that it sorts and hashes by value, never by index) and writers encode it again.
 */
struct dictionary_encoding {
  type_id index = type_id::INT32;  ///< the indices' type: INT8-64 or UINT8-64
  bool ordered  = false;           ///< Arrow's `ordered` flag, kept as it was
};

/**
 * @brief How a file holds a nested column (Arrow's list, large_list, fixed_size_list, struct or
 * map, nested to any depth) or a column of Arrow's null type.
 *
 * Spillway's columns have no children: readers of Parquet and Arrow IPC encode each row of a
 * nested column as bytes that order as DuckDB orders the values (a BINARY column), and a
 * null-type column is an INT8 column of nulls; writers of those formats decode them back into
 * the Arrow type held here. docs/cli.md ("Column types") describes the encoding and its order.
 */
struct nested_storage {
  /// Arrow's text of the type, "list<item: int64>", for messages and schemas.
  std::string arrow_type;
  /// What decides the encoding: the type without field names, nullability, offset widths,
  /// time zones or string layouts. Files of one dataset must agree on it.
  std::string layout;
  /// The Arrow type itself (an arrow::DataType, held opaque so that this header needs no
  /// Arrow), for the writers.
  std::shared_ptr<void const> handle;
};

/** @brief One column of a file: its name and spillway type. */
struct column_schema {
  std::string name;  ///< the column's name in the file
  data_type type;    ///< its spillway type
  /**
   * A STRING column's Arrow type: readers of Parquet and Arrow IPC say the file's, writers of
   * those formats write it (see `batch_writer_options::schema`); CSV has none. A storage detail:
   * `==` ignores it, so files that differ in it alone make one dataset.
   */
  string_storage storage = string_storage::LARGE_STRING;
  /**
   * A TIMESTAMP column's Arrow time zone ("" for none), kept from reader to writer like
   * `storage`. The values are UTC instants whatever it is, so they sort alike; `==` ignores it.
   */
  std::string time_zone = {};
  /// A FIXED_SIZE BINARY column's width in bytes, kept from reader to writer like `storage`.
  std::int32_t fixed_size = 0;
  /// The file's dictionary encoding of the column, if it has one; kept like `storage` (the
  /// values' Arrow type is what `storage` and `time_zone` say).
  std::optional<dictionary_encoding> dictionary = std::nullopt;
  /// Whether the file's field may hold nulls; kept like `storage`.
  bool nullable = true;
  /// The field's Arrow metadata (Parquet's `PARQUET:field_id`, ...); kept like `storage`.
  key_value_metadata metadata = {};
  /// The file's nested (or null) type of the column, if it has one; kept like `storage`. Files
  /// of one dataset must agree on its `layout`.
  std::optional<nested_storage> nested = std::nullopt;

  friend bool operator==(column_schema const& lhs, column_schema const& rhs) noexcept {
    return lhs.name == rhs.name && lhs.type == rhs.type;
  }
};

/**
 * @brief The columns of a file or dataset, in order, and the schema's own Arrow metadata
 * (key-value pairs; kept from reader to writer like `column_schema::storage`, and ignored by
 * `==`).
 */
struct table_schema : std::vector<column_schema> {
  using std::vector<column_schema>::vector;

  key_value_metadata metadata = {};  ///< the schema's Arrow metadata

  friend bool operator==(table_schema const& lhs, table_schema const& rhs) noexcept {
    return static_cast<std::vector<column_schema> const&>(lhs) ==
           static_cast<std::vector<column_schema> const&>(rhs);
  }
};

/** @return "a: int64, b: string" */
std::string to_string(table_schema const& schema);

}  // namespace spillway
