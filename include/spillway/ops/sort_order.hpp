/**
 * @file sort_order.hpp
 * @brief How rows are ordered by their key columns: direction and null placement per column,
 * and whether equal keys keep their input order.
 */
#pragma once

#include <cstdint>
#include <vector>

namespace spillway {

/** @brief The direction of one key column. */
enum class order : std::uint8_t {
  ASCENDING,   ///< smallest value first
  DESCENDING,  ///< largest value first
};

/**
 * @brief Where the null rows of one key column go.
 *
 * The placement is positional and independent of `order` (SQL's NULLS FIRST / NULLS LAST):
 * BEFORE puts nulls first in the result for an ASCENDING and for a DESCENDING column alike.
 * @note This differs from cudf, where `null_order::BEFORE` makes null the smallest value, so that
 * a DESCENDING column puts its nulls last.
 */
enum class null_order : std::uint8_t {
  BEFORE,  ///< null rows come before every valid row
  AFTER,   ///< null rows come after every valid row
};

/** @brief Whether rows with equal keys keep their relative input order. */
enum class sort_stability : std::uint8_t {
  UNSTABLE,  ///< rows with equal keys may come in any order
  STABLE,    ///< rows with equal keys keep their input order (lower row index first)
};

/**
 * @brief The ordering of one key column.
 *
 * Values are compared as follows: integers and timestamps numerically; BOOL8 as its byte;
 * floats numerically with `-0.0 == 0.0`, every NaN equal to every other NaN and greater than
 * `+inf`; strings byte by byte as unsigned bytes, a proper prefix before the longer string.
 * Two nulls are equal.
 */
struct column_order {
  order direction  = order::ASCENDING;    ///< ascending or descending values
  null_order nulls = null_order::BEFORE;  ///< nulls first or last

  friend bool operator==(column_order const&, column_order const&) = default;
};

/**
 * @brief One `column_order` per key column, in key order (the first key is the most
 * significant). An empty vector means every key column is ASCENDING with nulls BEFORE.
 */
using sort_order = std::vector<column_order>;

}  // namespace spillway
