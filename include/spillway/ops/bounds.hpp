/**
 * @file bounds.hpp
 * @brief Where the rows of one table would go in another table sorted by the same keys.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <memory>

namespace spillway {

/**
 * @brief For each row of `needles`, the first row of `haystack` whose key is not less than it
 * (`std::lower_bound` by the key order).
 * @param haystack key columns sorted under `orders`
 * @param needles key columns of the same count and types as `haystack`
 * @param orders one entry per key column, or empty for all ASCENDING, nulls BEFORE
 * @param stream the stream to run on
 * @param mrs the result from `mrs.output()`; nothing is taken from `mrs.temporary()`
 * @return a UINT64 column of `needles.num_rows()` positions in `[0, haystack.num_rows()]`
 * @throws spillway::invalid_argument when the key columns differ in count or type, or `orders`
 * does not match them
 */
std::unique_ptr<column> lower_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders = {},
                                    stream_view stream       = default_stream(),
                                    memory_resources mrs     = current_resources());

/**
 * @brief For each row of `needles`, the first row of `haystack` whose key is greater than it
 * (`std::upper_bound` by the key order).
 * @see lower_bound for the parameters
 */
std::unique_ptr<column> upper_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders = {},
                                    stream_view stream       = default_stream(),
                                    memory_resources mrs     = current_resources());

namespace detail {
/** @brief `lower_bound` without defaults. */
std::unique_ptr<column> lower_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs);
/** @brief `upper_bound` without defaults. */
std::unique_ptr<column> upper_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs);
}  // namespace detail

}  // namespace spillway
