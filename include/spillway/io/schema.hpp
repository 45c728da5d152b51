/**
 * @file schema.hpp
 * @brief The names and types of a file's columns, as the io readers and writers see them.
 */
#pragma once

#include <spillway/table/data_type.hpp>

#include <string>
#include <vector>

namespace spillway {

/** @brief One column of a file: its name and spillway type. */
struct column_schema {
  std::string name;  ///< the column's name in the file
  data_type type;    ///< its spillway type

  friend bool operator==(column_schema const& lhs, column_schema const& rhs) noexcept {
    return lhs.name == rhs.name && lhs.type == rhs.type;
  }
};

/** @brief The columns of a file or dataset, in order. */
using table_schema = std::vector<column_schema>;

/** @return "a: int64, b: string" */
std::string to_string(table_schema const& schema);

}  // namespace spillway
