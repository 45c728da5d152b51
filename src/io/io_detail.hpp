/**
 * @file io_detail.hpp
 * @brief Internals of the io layer shared by its formats: one-file writers, the reader
 * factories behind the public shells, temporary-file naming.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway::detail {

/**
 * @return whether `resource` hands out memory of a CUDA device, which the CPU cannot read or
 * write (probed by one small allocation, and only when a GPU is visible: host and emulated device
 * memory are written by the CPU)
 */
bool gives_cuda_memory(resource_ref resource, stream_view stream);

/**
 * @brief The formats decode and encode rows with the CPU: a table on a CUDA device is copied to
 * host memory first.
 * @return a copy of `input` in `mrs.temporary()` when `input` is on a CUDA device, else null
 * @throws spillway::invalid_argument when it is and `mrs.temporary()` is device memory too
 * (`what` names the caller)
 */
std::unique_ptr<table> host_copy_if_on_device(table_view const& input,
                                              stream_view stream,
                                              memory_resources mrs,
                                              std::string const& what);

/**
 * @return `open(mrs)` when the CPU can write `mrs.output()`'s memory; else (a CUDA device) a
 * reader that decodes with `open` into `mrs.temporary()` and copies each batch to the output
 * @throws spillway::invalid_argument when the output is a CUDA device and the temporary resource
 * is too (`what` names the caller)
 */
std::unique_ptr<batch_reader> open_decoding_on_host(
  std::function<std::unique_ptr<batch_reader>(memory_resources)> const& open,
  stream_view stream,
  memory_resources mrs,
  std::string const& what);

/**
 * @return the whole of what `open(resources)` reads, as one table on `mrs.output()`; for a CUDA
 * output read and concatenated in `mrs.temporary()` and copied over once (the batches and the
 * whole never share the device)
 */
std::unique_ptr<table> read_whole(
  std::function<std::unique_ptr<batch_reader>(memory_resources)> const& open,
  stream_view stream,
  memory_resources mrs,
  std::string const& what);

/** @brief Writes tables into one file of one format; the file is complete after `close()`. */
class format_writer {
 public:
  format_writer()                                = default;
  virtual ~format_writer()                       = default;
  format_writer(format_writer const&)            = delete;
  format_writer& operator=(format_writer const&) = delete;
  format_writer(format_writer&&)                 = delete;
  format_writer& operator=(format_writer&&)      = delete;

  /**
   * @brief Appends the rows of `input` (types already checked against the schema).
   * @param owner keeps `input`'s memory alive for as long as the writer holds it; null: the
   * writer is done with `input` when `write` returns
   */
  virtual void write(table_view const& input, std::shared_ptr<void const> const& owner) = 0;
  /** @return the bytes in the file so far */
  [[nodiscard]] virtual std::size_t bytes_written() const = 0;
  /** @brief Writes the footer and closes the file. */
  virtual void close() = 0;
};

/** @return the threads and slots of `parquet_encoders`; null in a build without Arrow */
std::shared_ptr<parquet_encoders::state> make_parquet_encoders_state(std::size_t threads,
                                                                     std::size_t groups);

/** @brief Opens `path` for a Parquet writer of `schema`. */
std::unique_ptr<format_writer> make_parquet_writer(std::string const& path,
                                                   table_schema const& schema,
                                                   parquet_write_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs);

/** @brief Opens `path` for an Arrow IPC writer (file or stream format) of `schema`. */
std::unique_ptr<format_writer> make_arrow_ipc_writer(std::string const& path,
                                                     table_schema const& schema,
                                                     file_format format,
                                                     stream_view stream,
                                                     memory_resources mrs);

/** @brief Opens `path` for a CSV writer of `schema`. */
std::unique_ptr<format_writer> make_csv_writer(std::string const& path,
                                               table_schema const& schema,
                                               csv_write_options const& options,
                                               stream_view stream,
                                               memory_resources mrs);

/** @brief A Parquet file to read: its row groups [first, second), or all of them. */
struct parquet_piece {
  std::string path;
  std::optional<std::pair<std::size_t, std::size_t>> row_groups;  ///< none: every row group
};

/**
 * @brief Opens Parquet files or runs of their row groups (at least one piece), in order. Every
 * piece's row groups are checked against its file's footer here, before any is read.
 * @throws invalid_argument for row groups a file lacks
 */
std::unique_ptr<batch_reader> open_parquet_files(std::vector<parquet_piece> pieces,
                                                 parquet_read_options const& options,
                                                 stream_view stream,
                                                 memory_resources mrs);

/** @brief `parquet_row_group_rows`. */
std::vector<std::vector<std::uint64_t>> parquet_row_group_rows(
  std::vector<std::string> const& files);

/** @brief `parquet_decode_scratch_bytes`. */
std::size_t parquet_decode_scratch_bytes(std::vector<std::string> const& files);

/** @brief Opens the Arrow IPC `files` (already expanded, at least one). */
std::unique_ptr<batch_reader> open_arrow_ipc_files(std::vector<std::string> files,
                                                   file_format format,
                                                   arrow_ipc_read_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs);

/** @return `dir/.name.tmp` for the final path `dir/name` */
std::string temporary_path_for(std::string const& path);

/** @return the schema of `input` with column names `names` @throws invalid_argument */
table_schema schema_of(table_view const& input,
                       std::vector<std::string> const& names,
                       std::string const& what);

/** @throws invalid_argument when the types of `input` are not those of `schema` */
void check_matches(table_view const& input, table_schema const& schema, std::string const& what);

/**
 * @brief Writes `input` to `path` through `writer_factory(temporary path)`, renaming at the end
 * and removing the temporary file on failure.
 */
template <typename Factory>
void write_one_file(table_view const& input, std::string const& path, Factory&& writer_factory);

/** @brief Renames `from` to `to` @throws io_error naming both */
void rename_file(std::string const& from, std::string const& to);

/** @brief Removes `path` if it exists; never throws. */
void remove_quietly(std::string const& path) noexcept;

template <typename Factory>
void write_one_file(table_view const& input, std::string const& path, Factory&& writer_factory) {
  auto const temporary = temporary_path_for(path);
  try {
    auto writer = writer_factory(temporary);
    writer->write(input, nullptr);
    writer->close();
    rename_file(temporary, path);
  } catch (...) {
    remove_quietly(temporary);
    throw;
  }
}

}  // namespace spillway::detail
