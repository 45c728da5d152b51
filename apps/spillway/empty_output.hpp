/**
 * @file empty_output.hpp
 * @brief The one file of a dataset of no rows: it carries the columns, so that the output of an
 * empty input can be read, verified and sorted again.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/memory_resources.hpp>

#include <string>

namespace spillway::cli {

/**
 * @brief Writes one file of no rows with the columns of `schema` through a `batch_writer` with
 * `options` (`batch_writer::write_no_rows`): named, staged and typed (string storage included) as
 * the files of a dataset with rows.
 * @param mrs the (empty) columns come from `mrs.output()`, the writer's scratch from
 * `mrs.temporary()`
 * @return its path
 * @throws spillway::io_error when it cannot be written
 */
std::string write_empty_file(batch_writer_options const& options,
                             table_schema const& schema,
                             stream_view stream,
                             memory_resources mrs);

}  // namespace spillway::cli
