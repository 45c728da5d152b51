/**
 * @file arrow_ipc.cpp
 * @brief Reading and writing Arrow IPC files and streams through Arrow C++.
 */
#include "io/arrow/arrow_batch_reader.hpp"
#include "io/arrow/arrow_memory_pool.hpp"
#include "io/arrow/type_conversion.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/file_format.hpp>

#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace spillway::detail {
namespace {

class ipc_file_batches final : public file_batches {
 public:
  ipc_file_batches(std::string const& path, arrow::MemoryPool* pool) : path_(path) {
    auto input   = value_or_throw(open_mapped(path), "cannot open Arrow IPC file '" + path + "'");
    auto options = arrow::ipc::IpcReadOptions::Defaults();
    options.memory_pool = pool;
    options.use_threads = false;
    reader_             = value_or_throw(arrow::ipc::RecordBatchFileReader::Open(input, options),
                             "'" + path + "' is not a valid Arrow IPC file");
  }
  [[nodiscard]] std::shared_ptr<arrow::Schema> schema() const override { return reader_->schema(); }
  std::shared_ptr<arrow::RecordBatch> next() override {
    if (index_ >= reader_->num_record_batches()) {
      return nullptr;
    }
    return value_or_throw(reader_->ReadRecordBatch(index_++),
                          "Arrow IPC file '" + path_ + "' is corrupt");
  }

 private:
  std::string path_;
  std::shared_ptr<arrow::ipc::RecordBatchFileReader> reader_;
  int index_ = 0;
};

class ipc_stream_batches final : public file_batches {
 public:
  ipc_stream_batches(std::string const& path, arrow::MemoryPool* pool) : path_(path) {
    auto input   = value_or_throw(open_mapped(path), "cannot open Arrow IPC stream '" + path + "'");
    auto options = arrow::ipc::IpcReadOptions::Defaults();
    options.memory_pool = pool;
    options.use_threads = false;
    reader_             = value_or_throw(arrow::ipc::RecordBatchStreamReader::Open(input, options),
                             "'" + path + "' is not a valid Arrow IPC stream");
  }
  [[nodiscard]] std::shared_ptr<arrow::Schema> schema() const override { return reader_->schema(); }
  std::shared_ptr<arrow::RecordBatch> next() override {
    return value_or_throw(reader_->Next(), "Arrow IPC stream '" + path_ + "' is corrupt");
  }

 private:
  std::string path_;
  std::shared_ptr<arrow::ipc::RecordBatchStreamReader> reader_;
};

class ipc_file_writer final : public format_writer {
 public:
  ipc_file_writer(std::string path,
                  table_schema const& schema,
                  file_format format,
                  memory_resources mrs)
    : path_(std::move(path)),
      pool_(std::make_unique<arrow_memory_pool>(mrs.temporary())),
      schema_(to_arrow_schema(schema)) {
    sink_               = value_or_throw(arrow::io::FileOutputStream::Open(path_),
                           "cannot create Arrow IPC file '" + path_ + "'");
    auto options        = arrow::ipc::IpcWriteOptions::Defaults();
    options.memory_pool = pool_.get();
    options.use_threads = false;
    // A dictionary grows from batch to batch (`arrow_dictionaries`): written as deltas.
    options.emit_dictionary_deltas = true;
    writer_                        = value_or_throw(format == file_format::ARROW_IPC_FILE
                               ? arrow::ipc::MakeFileWriter(sink_, schema_, options)
                               : arrow::ipc::MakeStreamWriter(sink_, schema_, options),
                             "cannot write Arrow IPC file '" + path_ + "'");
  }

  ~ipc_file_writer() override {
    writer_.reset();
    if (sink_ && !sink_->closed()) {
      (void)sink_->Close();
    }
  }
  ipc_file_writer(ipc_file_writer const&)            = delete;
  ipc_file_writer& operator=(ipc_file_writer const&) = delete;
  ipc_file_writer(ipc_file_writer&&)                 = delete;
  ipc_file_writer& operator=(ipc_file_writer&&)      = delete;

  void write(table_view const& input, std::shared_ptr<void const> const& /*owner*/) override {
    if (input.num_rows() == 0) {
      return;
    }
    for (auto const& batch :
         to_arrow_batches(input, schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
      check_arrow(writer_->WriteRecordBatch(*batch), "cannot write Arrow IPC file '" + path_ + "'");
    }
  }

  [[nodiscard]] std::size_t bytes_written() const override {
    auto const position = sink_->Tell();
    return position.ok() ? static_cast<std::size_t>(*position) : 0;
  }

  void close() override {
    check_arrow(writer_->Close(), "cannot finish Arrow IPC file '" + path_ + "'");
    check_arrow(sink_->Close(), "cannot close Arrow IPC file '" + path_ + "'");
  }

 private:
  std::string path_;
  std::unique_ptr<arrow_memory_pool> pool_;
  std::shared_ptr<arrow::Schema> schema_;
  std::shared_ptr<arrow::io::FileOutputStream> sink_;
  std::shared_ptr<arrow::ipc::RecordBatchWriter> writer_;
  /// Of the dictionary-encoded columns; never empty, so that a batch whose rows have no value
  /// of one is followed by deltas to it.
  arrow_dictionaries dictionaries_{true};
};

}  // namespace

std::unique_ptr<format_writer> make_arrow_ipc_writer(std::string const& path,
                                                     table_schema const& schema,
                                                     file_format format,
                                                     stream_view,
                                                     memory_resources mrs) {
  return std::make_unique<ipc_file_writer>(path, schema, format, mrs);
}

std::unique_ptr<batch_reader> open_arrow_ipc_files(std::vector<std::string> files,
                                                   file_format format,
                                                   arrow_ipc_read_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs) {
  auto paths = files;
  return make_arrow_batch_reader(
    std::move(files),
    options.columns,
    options.target_batch_bytes,
    [files = std::move(paths), format](std::size_t index,
                                       arrow::MemoryPool* pool) -> std::unique_ptr<file_batches> {
      if (format == file_format::ARROW_IPC_FILE) {
        return std::make_unique<ipc_file_batches>(files[index], pool);
      }
      return std::make_unique<ipc_stream_batches>(files[index], pool);
    },
    stream,
    mrs);
}

}  // namespace spillway::detail
