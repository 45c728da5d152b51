/**
 * @file gather.hpp
 * @brief Rows picked from a table by an index column.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <memory>

namespace spillway {

/** @brief What `gather` does with an index outside the source table. */
enum class out_of_bounds_policy : std::uint8_t {
  FAIL,     ///< throw `invalid_argument` naming the index, before allocating anything
  NULLIFY,  ///< the output row is null in every column
};

/**
 * @brief Output row `i` is row `gather_map[i]` of `source`.
 * @param gather_map INT32, INT64, UINT32 or UINT64 indices without nulls
 * @throws spillway::invalid_argument for another map type, a map with nulls, or (FAIL) an index
 * out of bounds
 */
std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy = out_of_bounds_policy::FAIL,
                              stream_view stream          = default_stream(),
                              memory_resources mrs        = current_resources());

namespace detail {
/** @brief `gather` without defaults: internals always pass their resources. */
std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy,
                              stream_view stream,
                              memory_resources mrs);
}  // namespace detail

}  // namespace spillway
