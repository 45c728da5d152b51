/**
 * @file concatenate.hpp
 * @brief Tables stacked one after another into one table.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table.hpp>

#include <memory>
#include <span>

namespace spillway {

/**
 * @brief The rows of `inputs[0]`, then of `inputs[1]`, and so on, in new buffers from
 * `mrs.output()`. The result has a mask when any input column has nulls.
 * @throws spillway::invalid_argument when the inputs differ in column count or column types
 */
std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   stream_view stream   = default_stream(),
                                   memory_resources mrs = current_resources());

namespace detail {
/** @brief `concatenate` without defaults: internals always pass their resources. */
std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   stream_view stream,
                                   memory_resources mrs);
}  // namespace detail

}  // namespace spillway
