/**
 * @file arrow_c_stream.hpp
 * @brief Record batches in and out through the Arrow C stream interface (`ArrowArrayStream`):
 * how an engine in another language (pyarrow, Polars, DuckDB) hands spillway its rows and takes
 * the results, without either side linking the other's Arrow.
 *
 * The C structs are declared here only by name; a caller includes `arrow/c/abi.h` (or its own
 * copy of the ABI, as the Arrow specification allows) for their members. The header itself
 * needs no Arrow.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>

// The Arrow C data interface (https://arrow.apache.org/docs/format/CStreamInterface.html).
struct ArrowArrayStream;

namespace spillway {

/**
 * @brief Reads the record batches of an Arrow C stream as spillway table views.
 *
 * A column whose Arrow layout is spillway's (every fixed-width type but bool and
 * fixed_size_binary, and large_string and large_binary) is viewed where Arrow holds it: no copy.
 * The others are converted into memory from the `scratch` resource: bool (bits, where spillway
 * has bytes), string and binary (32-bit offsets), fixed_size_binary (no offsets), views,
 * dictionaries (decoded to their values) and nested columns (encoded).
 * @note Not thread-safe: one consumer at a time. Needs a build with Arrow.
 */
class arrow_stream_reader {
 public:
  /**
   * @brief Takes `stream` over: its batches are read from here on, and it is released when the
   * reader goes (the caller's struct is left released, as the C interface moves a stream).
   * @param source what the stream is, named in error messages ("pyarrow.Table", say)
   * @throws not_supported naming the column for an Arrow type spillway has no type for, or in a
   * build without Arrow; corruption_error when the stream fails
   */
  arrow_stream_reader(ArrowArrayStream* stream, std::string source, resource_ref scratch);
  ~arrow_stream_reader();
  arrow_stream_reader(arrow_stream_reader const&)            = delete;
  arrow_stream_reader& operator=(arrow_stream_reader const&) = delete;
  arrow_stream_reader(arrow_stream_reader&&)                 = delete;
  arrow_stream_reader& operator=(arrow_stream_reader&&)      = delete;

  /** @return the columns of every batch (string columns say their Arrow storage) */
  [[nodiscard]] table_schema const& schema() const noexcept;

  /**
   * @return the next record batch, valid until the next call or until the reader goes; none at
   * the end of the stream
   * @throws what the stream's producer failed with, as the spillway error of its Arrow status
   */
  [[nodiscard]] std::optional<table_view> next();

 private:
  class impl;
  std::unique_ptr<impl> impl_;
};

/** @brief Hands out tables one at a time; null at the end. */
using table_source = std::function<std::unique_ptr<table>()>;

/**
 * @brief Exports the tables of `source` as an Arrow C stream of record batches of `schema`
 * (string columns as each one's `storage` says, timestamps with their zone) into `out`.
 *
 * Each table's memory is shared with its record batches (no copy but for bool columns and
 * `string` columns, whose offsets narrow to 32 bits) and freed once the consumer released them
 * all; the table must therefore live in memory that any thread may free at any time (host memory,
 * not a task's device budget). `source` is called from the thread that asks the stream for its
 * next batch, one call at a time, and is destroyed when the consumer releases the stream. An
 * exception it throws becomes the stream's error: its message, and the errno of its kind
 * (`out_of_memory`: ENOMEM, `invalid_argument`: EINVAL, `not_supported`: ENOSYS, else EIO).
 * @throws not_supported in a build without Arrow
 */
void export_arrow_stream(table_schema const& schema, table_source source, ArrowArrayStream* out);

}  // namespace spillway
