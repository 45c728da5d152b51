/**
 * @file size_estimate.hpp
 * @brief Bytes that tables, columns and row ranges occupy, for budgeting before allocating.
 */
#pragma once

#include <spillway/table/table_view.hpp>

#include <cstddef>

namespace spillway {

/**
 * @return the bytes of values, characters, offsets and mask bits of `view` (no padding); exact
 * for the data, as a budget needs
 */
std::size_t estimate_size(column_view const& view);

/** @return the sum of `estimate_size` over the columns of `view` */
std::size_t estimate_size(table_view const& view);

/**
 * @return the bytes of rows `[begin, end)` of `view`, without building the slice (O(columns))
 * @throws spillway::invalid_argument when the range is outside the table
 */
std::size_t estimate_size(table_view const& view, std::size_t begin, std::size_t end);

/** @return the average bytes per row of `view` (0 for an empty table) */
double estimate_row_size(table_view const& view);

}  // namespace spillway
