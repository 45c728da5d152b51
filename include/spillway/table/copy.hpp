/**
 * @file copy.hpp
 * @brief Deep copies of columns and tables, into the memory kind of the output resource.
 *
 * Copying to a resource of another kind is how a table moves between device and host memory;
 * the bytes go through `copy_bytes`, the one place copies between kinds happen.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table.hpp>

#include <memory>

namespace spillway {

/**
 * @brief Copies `input` into new buffers from `mrs.output()` (and so into its memory kind),
 * normalized: offset 0, string offsets from 0, mask only when the input has one.
 */
std::unique_ptr<column> copy(column_view const& input,
                             stream_view stream   = default_stream(),
                             memory_resources mrs = current_resources());

/** @brief Copies every column of `input`. @see copy(column_view const&, ...) */
std::unique_ptr<table> copy(table_view const& input,
                            stream_view stream   = default_stream(),
                            memory_resources mrs = current_resources());

namespace detail {
/** @brief `copy` without defaults: internals always pass their resources. */
std::unique_ptr<column> copy(column_view const& input, stream_view stream, memory_resources mrs);
/** @brief `copy` without defaults. */
std::unique_ptr<table> copy(table_view const& input, stream_view stream, memory_resources mrs);
}  // namespace detail

}  // namespace spillway
