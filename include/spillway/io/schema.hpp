/**
 * @file schema.hpp
 * @brief The names and types of a file's columns, as the io readers and writers see them.
 */
#pragma once

#include <spillway/table/data_type.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spillway {

/**
 * @brief How an Arrow IPC or Parquet file holds a STRING column: as Arrow's `large_string`, with
 * 64-bit offsets like a spillway column, or as `string`, with 32-bit offsets.
 */
enum class string_storage : std::uint8_t {
  LARGE_STRING,  ///< Arrow's large_string (large_utf8)
  STRING,        ///< Arrow's string (utf8)
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

  friend bool operator==(column_schema const& lhs, column_schema const& rhs) noexcept {
    return lhs.name == rhs.name && lhs.type == rhs.type;
  }
};

/** @brief The columns of a file or dataset, in order. */
using table_schema = std::vector<column_schema>;

/** @return "a: int64, b: string" */
std::string to_string(table_schema const& schema);

}  // namespace spillway
