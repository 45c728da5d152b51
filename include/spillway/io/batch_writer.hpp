/**
 * @file batch_writer.hpp
 * @brief Writes a stream of tables as numbered files of about a target size, all or nothing.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <vector>

namespace spillway {

/** @brief Where and how a `batch_writer` writes. */
struct batch_writer_options {
  std::string directory;                                 ///< created when missing
  file_format format            = file_format::PARQUET;  ///< the format of every file
  std::size_t target_file_bytes = 256_MiB;  ///< a file is closed once it reaches this size
  std::string file_prefix       = "part";   ///< files are `<prefix>-00000.<extension>`, ...
  parquet_write_options parquet;            ///< used when `format` is PARQUET
  csv_write_options csv;                    ///< used when `format` is CSV
  /**
   * The columns as a reader gave them, when the rows come from a file: Parquet and Arrow IPC
   * files hold each STRING column named here as its `column_schema::storage` says (string or
   * large_string), so that a file written back has its input's schema. A column not named, or
   * named with another type, is large_string. A `string` column's 32-bit offsets address 2 GiB:
   * rows of more characters in one write are written as several Arrow batches (Parquet pages and
   * IPC record batches), never as large_string, so that every file has the schema asked for.
   */
  table_schema schema;
};

/**
 * @brief A multi-file writer: each `write` appends rows; a file is finished when it reaches
 * `target_file_bytes` (tables are cut so that one write does not overshoot by much) and the next
 * one begins.
 *
 * Every file is written under a hidden temporary name (`.<name>.tmp`) and renamed only by
 * `close()`, once all are complete. Destroying the writer without `close()`, or a failing
 * `close()`, removes the temporary files, so a failed job leaves no partial output (readers of
 * the directory skip `.` names meanwhile).
 *
 * `write(std::unique_ptr<table>)` encodes on the writer's own thread while the caller makes its
 * next table: on two cores, a sort's Parquet encoding then overlaps its merges.
 * @note Move-only; one thread calls it (the writer's own thread is internal).
 */
class batch_writer {
 public:
  /**
   * @param options where and how to write
   * @param names the column names of every table written
   * @param stream the stream of the tables' memory
   * @param mrs Arrow's scratch comes from `mrs.temporary()`; nothing is returned, so `output()` is
   * unused
   * @throws spillway::io_error when the directory cannot be created, spillway::invalid_argument
   * for a zero target size, spillway::not_supported for an Arrow format in a build without Arrow
   */
  batch_writer(batch_writer_options options,
               std::vector<std::string> names,
               stream_view stream,
               memory_resources mrs);
  ~batch_writer();
  batch_writer(batch_writer&&) noexcept;
  batch_writer& operator=(batch_writer&&) noexcept;
  batch_writer(batch_writer const&)            = delete;
  batch_writer& operator=(batch_writer const&) = delete;

  /**
   * @brief Appends the rows of `input`.
   * @throws spillway::invalid_argument when its columns differ from the names or from the types
   * of earlier tables; spillway::io_error when writing fails
   */
  void write(table_view const& input);

  /**
   * @brief Writes one file of no rows that carries the columns of `columns` (their names, types
   * and, per `batch_writer_options::schema`, string storage), unless a file was started already:
   * what a dataset of no rows is written as.
   * @throws as `write`
   */
  void write_no_rows(table_view const& columns);

  /**
   * @brief Appends the rows of `input` on the writer's own thread and returns once the table
   * before it is written: one table at most waits or is being written. Tables are written in
   * call order, `write(table_view)` calls included (they wait for the thread first). A failure
   * of a background write is thrown by the next `write` or by `close`.
   */
  void write(std::unique_ptr<table> input);

  /**
   * @brief Finishes the current file and renames every file to its final name.
   * @return the final paths, in order (none when no row was written)
   */
  std::vector<std::string> close();

 private:
  class impl;
  class background;
  std::unique_ptr<impl> impl_;
  std::unique_ptr<background> background_;  ///< the writer's thread, once an owned write came
};

}  // namespace spillway
