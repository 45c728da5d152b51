/**
 * @file arrow_ipc.hpp
 * @brief Arrow IPC (the file format and the stream format) read and write, through Arrow C++.
 *
 * Declared in every build; without Arrow each function throws `spillway::not_supported`. Types
 * map as for Parquet (see parquet.hpp), with timestamps of every unit kept exactly.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace spillway {

/** @brief How an Arrow IPC dataset is read. */
struct arrow_ipc_read_options {
  std::vector<std::string> columns;         ///< columns to read, in this order; empty: all
  std::size_t target_batch_bytes = 64_MiB;  ///< about the size of each batch `next()` returns
};

/**
 * @brief Opens the Arrow IPC files of `source` (a file, directory or glob) for streaming.
 * @param format ARROW_IPC_FILE or ARROW_IPC_STREAM
 * @throws as `open_parquet` does, and spillway::invalid_argument for another format
 */
std::unique_ptr<batch_reader> open_arrow_ipc(std::string const& source,
                                             file_format format,
                                             arrow_ipc_read_options const& options,
                                             stream_view stream,
                                             memory_resources mrs);

/** @brief Reads all of `source` into one table. @see open_arrow_ipc */
std::unique_ptr<table> read_arrow_ipc(std::string const& source,
                                      file_format format,
                                      arrow_ipc_read_options const& options,
                                      stream_view stream,
                                      memory_resources mrs);

/**
 * @brief Writes `input` with column names `names` to `path` in `format` (ARROW_IPC_FILE or
 * ARROW_IPC_STREAM), through a temporary name renamed at the end.
 * @throws spillway::invalid_argument when `names` does not match the columns or for another
 * format, spillway::io_error when the file cannot be written
 */
void write_arrow_ipc(table_view const& input,
                     std::vector<std::string> const& names,
                     std::string const& path,
                     file_format format,
                     stream_view stream,
                     memory_resources mrs);

}  // namespace spillway
