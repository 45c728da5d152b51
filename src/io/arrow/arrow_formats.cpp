/**
 * @file arrow_formats.cpp
 * @brief Parquet and Arrow IPC readers and writers through Arrow C++.
 */
#include "io/arrow/arrow_memory_pool.hpp"
#include "io/arrow/direct_output_stream.hpp"
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/parquet_footer.hpp"
#include "io/arrow/type_conversion.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table_view.hpp>

#include <arrow/io/file.h>
#include <arrow/io/interfaces.h>
#include <arrow/io/memory.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/util/thread_pool.h>
#include <parquet/arrow/reader.h>
#include <parquet/arrow/writer.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway {

bool arrow_io_available() noexcept { return true; }

void set_arrow_thread_pools(std::size_t threads) {
  SPILLWAY_EXPECTS(threads >= 1, "Arrow's thread pools need at least one thread");
  int const capacity = static_cast<int>(std::min<std::size_t>(threads, 1024));
  auto const cpu     = arrow::SetCpuThreadPoolCapacity(capacity);
  SPILLWAY_EXPECTS(cpu.ok(), "sizing Arrow's CPU thread pool: " + cpu.ToString(), io_error);
  auto const io = arrow::io::SetIOThreadPoolCapacity(capacity);
  SPILLWAY_EXPECTS(io.ok(), "sizing Arrow's I/O thread pool: " + io.ToString(), io_error);
}

namespace detail {
namespace {

/// Most rows Arrow decodes into one record batch before we cut it to the target size.
constexpr int64_t MAX_DECODE_ROWS = 64 * 1024;

/**
 * @brief Opens `path` memory-mapped. Its reads are synchronous, even `ReadAsync`: with a plain
 * `ReadableFile`, Arrow's I/O threads can still be reading into our pool after a reader that
 * failed to open (or was dropped) is gone, freeing into a destroyed pool. Mapped pages are
 * page cache, not allocations; what Arrow decodes still comes from our pool.
 */
arrow::Result<std::shared_ptr<arrow::io::MemoryMappedFile>> open_mapped(std::string const& path) {
  return arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ);
}

/// @return the footer of the Parquet file `path`
std::shared_ptr<parquet::FileMetaData> read_parquet_footer(std::string const& path) {
  try {
    auto input = value_or_throw(open_mapped(path), "cannot open Parquet file '" + path + "'");
    return parquet::ReadMetaData(input);
  } catch (parquet::ParquetException const& error) {
    SPILLWAY_FAIL("'" + path + "' is not a valid Parquet file: " + error.what(), corruption_error);
  }
}

/** @brief One file's stream of record batches. */
class file_batches {
 public:
  file_batches()                                                      = default;
  virtual ~file_batches()                                             = default;
  file_batches(file_batches const&)                                   = delete;
  file_batches& operator=(file_batches const&)                        = delete;
  file_batches(file_batches&&)                                        = delete;
  file_batches& operator=(file_batches&&)                             = delete;
  [[nodiscard]] virtual std::shared_ptr<arrow::Schema> schema() const = 0;
  /** @return the next batch, or null at the end of the file */
  virtual std::shared_ptr<arrow::RecordBatch> next() = 0;
};

class parquet_batches final : public file_batches {
 public:
  /// `row_groups` of `path` (checked by `open_parquet_files`); none: every row group.
  parquet_batches(std::string const& path,
                  std::optional<std::pair<std::size_t, std::size_t>> row_groups,
                  std::size_t target_bytes,
                  bool parallel_columns,
                  arrow::MemoryPool* pool)
    : path_(path) {
    try {
      auto input = value_or_throw(open_mapped(path), "cannot open Parquet file '" + path + "'");
      parquet::ReaderProperties properties(pool);
      parquet::ArrowReaderProperties arrow_properties;
      // Columns decoded at once: `next()` returns when every column's task has ended (Arrow's
      // ParallelFor waits for each one it submitted).
      arrow_properties.set_use_threads(parallel_columns);
      // No background reads: an asynchronous read still in flight when the reader goes would free
      // into a pool that is gone.
      arrow_properties.set_pre_buffer(false);
      parquet::arrow::FileReaderBuilder builder;
      check_arrow(builder.Open(std::move(input), properties),
                  "'" + path + "' is not a valid Parquet file");
      // Rows per decoded batch: about the target, from the file's own size per row.
      auto const metadata    = builder.raw_reader()->metadata();
      int64_t rows_per_batch = MAX_DECODE_ROWS;
      if (metadata->num_row_groups() > 0 && metadata->num_rows() > 0) {
        int64_t bytes = 0;
        for (int group = 0; group < metadata->num_row_groups(); ++group) {
          bytes += metadata->RowGroup(group)->total_byte_size();
        }
        int64_t const row_bytes = std::max<int64_t>(1, bytes / metadata->num_rows());
        rows_per_batch =
          std::clamp<int64_t>(static_cast<int64_t>(target_bytes) / row_bytes, 1, MAX_DECODE_ROWS);
      }
      arrow_properties.set_batch_size(rows_per_batch);
      builder.memory_pool(pool)->properties(arrow_properties);
      reader_ = value_or_throw(builder.Build(), "cannot read Parquet file '" + path + "'");
      if (!row_groups) {
        batches_ = value_or_throw(reader_->GetRecordBatchReader(),
                                  "cannot read Parquet file '" + path + "'");
      } else {
        std::vector<int> indices;
        for (std::size_t group = row_groups->first; group < row_groups->second; ++group) {
          indices.push_back(static_cast<int>(group));
        }
        batches_ = value_or_throw(reader_->GetRecordBatchReader(indices),
                                  "cannot read Parquet file '" + path + "'");
      }
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("'" + path + "' is not a valid Parquet file: " + error.what(),
                    corruption_error);
    }
  }

  [[nodiscard]] std::shared_ptr<arrow::Schema> schema() const override {
    return batches_->schema();
  }

  std::shared_ptr<arrow::RecordBatch> next() override {
    try {
      return value_or_throw(batches_->Next(), "cannot read Parquet file '" + path_ + "'");
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("Parquet file '" + path_ + "' is corrupt: " + error.what(), corruption_error);
    }
  }

 private:
  std::string path_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::unique_ptr<arrow::RecordBatchReader> batches_;
};

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

/**
 * @brief Streams the files of a dataset through per-file record batch readers, cutting and
 * joining Arrow's batches into spillway tables of about the target size.
 */
class arrow_batch_reader final : public batch_reader {
 public:
  arrow_batch_reader(
    std::vector<std::string> files,
    std::vector<std::string> columns,
    std::size_t target_bytes,
    std::function<std::unique_ptr<file_batches>(std::size_t, arrow::MemoryPool*)> open,
    stream_view stream,
    memory_resources mrs)
    : files_(std::move(files)),
      columns_(std::move(columns)),
      target_bytes_(target_bytes),
      open_(std::move(open)),
      stream_(stream),
      mrs_(mrs),
      pool_(std::make_unique<arrow_memory_pool>(mrs.temporary())) {
    SPILLWAY_EXPECTS(
      target_bytes_ > 0, std::string{"target_batch_bytes must be positive"}, invalid_argument);
    open_file(0);
  }

  ~arrow_batch_reader() override {
    // Arrow's buffers go back to the pool before the pool goes.
    pending_.clear();
    current_.reset();
  }
  arrow_batch_reader(arrow_batch_reader const&)            = delete;
  arrow_batch_reader& operator=(arrow_batch_reader const&) = delete;
  arrow_batch_reader(arrow_batch_reader&&)                 = delete;
  arrow_batch_reader& operator=(arrow_batch_reader&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }

  std::unique_ptr<table> next() override {
    std::vector<std::shared_ptr<arrow::RecordBatch>> taken;
    std::size_t bytes = 0;
    while (bytes < target_bytes_) {
      if (pending_.empty() && !pull()) {
        break;
      }
      auto batch = std::move(pending_.front());
      pending_.pop_front();
      std::size_t const batch_bytes = size_of_batch(*batch);
      if (bytes + batch_bytes > target_bytes_ && batch->num_rows() > 1) {
        // Cut: take about enough rows to reach the target, keep the rest for the next call.
        double const row_bytes =
          static_cast<double>(batch_bytes) / static_cast<double>(batch->num_rows());
        auto rows = static_cast<int64_t>(
          static_cast<double>(target_bytes_ - bytes) / std::max(row_bytes, 1.0) + 0.5);
        rows = std::clamp<int64_t>(rows, 1, batch->num_rows());
        if (rows < batch->num_rows()) {
          pending_.push_front(batch->Slice(rows));
          batch = batch->Slice(0, rows);
        }
        bytes = target_bytes_;  // this batch is full
      } else {
        bytes += batch_bytes;
      }
      taken.push_back(std::move(batch));
    }
    if (taken.empty()) {
      return nullptr;
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.reserve(schema_.size());
    for (std::size_t c = 0; c < schema_.size(); ++c) {
      std::vector<std::shared_ptr<arrow::Array>> chunks;
      chunks.reserve(taken.size());
      for (auto const& batch : taken) {
        chunks.push_back(batch->column(static_cast<int>(c)));
      }
      columns.push_back(from_arrow_chunks(chunks, schema_[c].type, stream_, mrs_.output()));
    }
    return std::make_unique<table>(std::move(columns));
  }

 private:
  [[nodiscard]] static std::size_t size_of_batch(arrow::RecordBatch const& batch) {
    std::size_t bytes = 0;
    for (int c = 0; c < batch.num_columns(); ++c) {
      bytes += spillway_size(*batch.column(c));
    }
    return bytes;
  }

  void open_file(std::size_t index) {
    file_index_            = index;
    auto const& path       = files_[index];
    current_               = open_(index, pool_.get());
    auto const file_schema = current_->schema();
    // The selected columns, by name, in the requested order.
    std::vector<int> selection;
    if (columns_.empty()) {
      for (int c = 0; c < file_schema->num_fields(); ++c) {
        selection.push_back(c);
      }
    } else {
      for (auto const& name : columns_) {
        int const found = file_schema->GetFieldIndex(name);
        SPILLWAY_EXPECTS(found >= 0,
                         "unknown column '" + name + "' in '" + path +
                           "' (columns: " + file_schema->ToString(false) + ")",
                         invalid_argument);
        selection.push_back(found);
      }
    }
    table_schema schema;
    for (int const c : selection) {
      schema.push_back(from_arrow_field(*file_schema->field(c), path));
    }
    schema.metadata = from_arrow_metadata(file_schema->metadata().get());
    if (index == 0) {
      schema_ = std::move(schema);
    } else {
      SPILLWAY_EXPECTS(schema == schema_ && same_nested_layouts(schema, schema_),
                       "'" + path + "' has columns (" + to_string(schema) + ") unlike those of '" +
                         files_[0] + "' (" + to_string(schema_) + ")",
                       invalid_argument);
    }
    selection_ = std::move(selection);
  }

  /** @brief Moves the next Arrow batch (of the selected columns) to `pending_`. */
  bool pull() {
    while (true) {
      if (!current_) {
        if (file_index_ + 1 >= files_.size()) {
          return false;
        }
        open_file(file_index_ + 1);
      }
      auto batch = current_->next();
      if (!batch) {
        current_.reset();
        continue;
      }
      if (batch->num_rows() == 0) {
        continue;
      }
      arrow::ArrayVector arrays;
      arrow::FieldVector fields;
      for (int const c : selection_) {
        arrays.push_back(batch->column(c));
        fields.push_back(batch->schema()->field(c));
      }
      pending_.push_back(
        arrow::RecordBatch::Make(arrow::schema(std::move(fields)), batch->num_rows(), arrays));
      return true;
    }
  }

  std::vector<std::string> files_;
  std::vector<std::string> columns_;
  std::size_t target_bytes_;
  /// Opens file `index` of `files_` with the pool.
  std::function<std::unique_ptr<file_batches>(std::size_t, arrow::MemoryPool*)> open_;
  stream_view stream_;
  memory_resources mrs_;
  std::unique_ptr<arrow_memory_pool> pool_;
  std::size_t file_index_ = 0;
  std::unique_ptr<file_batches> current_;
  std::vector<int> selection_;
  std::deque<std::shared_ptr<arrow::RecordBatch>> pending_;
  table_schema schema_;
};

parquet::Compression::type to_parquet(parquet_compression compression) noexcept {
  switch (compression) {
    case parquet_compression::NONE:
      return parquet::Compression::UNCOMPRESSED;
    case parquet_compression::SNAPPY:
      return parquet::Compression::SNAPPY;
    case parquet_compression::ZSTD:
      return parquet::Compression::ZSTD;
  }
  return parquet::Compression::UNCOMPRESSED;
}

/// Rows of the first write sampled per column to decide its dictionary encoding (AUTO), and the
/// fewest for a decision (below, Arrow's default applies).
constexpr std::size_t DICTIONARY_SAMPLE_ROWS     = 4096;
constexpr std::size_t DICTIONARY_MIN_SAMPLE_ROWS = 1024;

/// Whether more than half of the non-null values of `column` at evenly spaced rows (up to
/// DICTIONARY_SAMPLE_ROWS) are distinct; false when too few rows to tell.
bool mostly_distinct(column_view const& column) {
  std::size_t const rows   = column.size();
  std::size_t const sample = std::min(rows, DICTIONARY_SAMPLE_ROWS);
  if (sample < DICTIONARY_MIN_SAMPLE_ROWS) {
    return false;
  }
  std::vector<std::uint64_t> hashes;
  hashes.reserve(sample);
  bool const strings      = !is_fixed_width(column.type());
  std::size_t const width = strings ? 0 : size_of(column.type());
  auto const* values      = strings ? nullptr : static_cast<char const*>(column.head());
  for (std::size_t index = 0; index < sample; ++index) {
    std::size_t const row = index * rows / sample;
    if (column.is_null(row)) {
      continue;
    }
    std::string_view const value =
      strings ? column.string_at(row)
              : std::string_view{values + (column.offset() + row) * width, width};
    hashes.push_back(std::hash<std::string_view>{}(value));
  }
  std::sort(hashes.begin(), hashes.end());
  auto const distinct =
    static_cast<std::size_t>(std::unique(hashes.begin(), hashes.end()) - hashes.begin());
  return 2 * distinct > hashes.size() && hashes.size() >= DICTIONARY_MIN_SAMPLE_ROWS;
}

/// Bytes a Parquet file's stream gathers per direct write.
constexpr std::size_t DIRECT_WRITE_BYTES = std::size_t{4} << 20;

/// The magic bytes at both ends of a Parquet file, and the footer length's size before the last.
constexpr std::string_view PARQUET_MAGIC     = "PAR1";
constexpr std::size_t PARQUET_FOOTER_LENGTH  = 4;
constexpr std::size_t PARQUET_MAX_ROW_GROUPS = 32767;  ///< a row group's ordinal is an i16

/**
 * @brief A Parquet file written through Arrow.
 *
 * With no encoding thread of its own, writes go into one buffered row group of Arrow's writer,
 * encoded on the calling thread. With some (`encode_threads`), every row group is encoded as a
 * Parquet file of its own in memory, up to `encode_threads` of them at once on a pool of this
 * writer's own, while the caller goes on: its bytes are then appended to the file in order, its
 * page indexes right after its column chunks, and its footer, with the offsets moved to where the
 * bytes landed
 * (`rebase_parquet_footer`), merged into the file's. The row groups, statistics and page
 * indexes are those Arrow's writer makes on one thread, where a sorted string column, one column
 * chunk per row group, would be encoded and compressed on one core.
 */
class parquet_file_writer final : public format_writer {
 public:
  parquet_file_writer(std::string path,
                      table_schema const& schema,
                      parquet_write_options const& options,
                      stream_view stream,
                      memory_resources mrs)
    : path_(std::move(path)),
      pool_(std::make_unique<arrow_memory_pool>(mrs.temporary())),
      schema_(to_arrow_schema(schema)),
      options_(options),
      row_group_rows_(std::clamp<std::size_t>(
        options.row_group_rows, 1, static_cast<std::size_t>(std::numeric_limits<int64_t>::max()))),
      row_group_bytes_(std::max<std::size_t>(options.row_group_bytes, 1)),
      stream_(stream),
      mrs_(mrs) {
    sink_ = value_or_throw(direct_output_stream::Open(path_, pool_.get(), DIRECT_WRITE_BYTES),
                           "cannot create Parquet file '" + path_ + "'");
  }

  ~parquet_file_writer() override {
    // Encodings in flight use the pool, the properties and their tables: they finish first.
    for (auto& group : encoding_) {
      group.encoded.Wait();
    }
    encoding_.clear();
    writer_.reset();
    if (sink_ && !sink_->closed()) {
      (void)sink_->Close();
    }
  }
  parquet_file_writer(parquet_file_writer const&)            = delete;
  parquet_file_writer& operator=(parquet_file_writer const&) = delete;
  parquet_file_writer(parquet_file_writer&&)                 = delete;
  parquet_file_writer& operator=(parquet_file_writer&&)      = delete;

  /**
   * Writes go into one row group until it holds `row_group_rows` rows or about
   * `row_group_bytes`: small writes (a shuffle's shards, a sort's output batches) still make row
   * groups of a useful size, and a write larger than a row group is cut across several.
   */
  void write(table_view const& input, std::shared_ptr<void const> const& owner) override {
    std::size_t const rows = input.num_rows();
    if (rows == 0) {
      return;
    }
    throw_if_failed();
    failure_guard guard{failed_};
    double const row_bytes = std::max(estimate_row_size(input), 1.0);
    try {
      if (!properties_) {
        make_properties(&input);
      }
      if (parallel()) {
        write_in_groups(input, owner, row_bytes);
        guard.succeeded();
        return;
      }
      if (!writer_) {
        open_writer();
      }
      std::size_t begin = 0;
      while (begin < rows) {
        if (group_full(row_bytes)) {
          check_arrow(writer_->NewBufferedRowGroup(), "cannot write Parquet file '" + path_ + "'");
          flushed_bytes_ += group_bytes_;
          group_rows_  = 0;
          group_bytes_ = 0;
        }
        std::size_t const take = rows_to_take(rows - begin, row_bytes);
        auto const part        = slice(input, begin, begin + take);
        for (auto const& batch :
             to_arrow_batches(part, schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
          check_arrow(writer_->WriteRecordBatch(*batch),
                      "cannot write Parquet file '" + path_ + "'");
        }
        add_to_group(take, row_bytes);
        begin += take;
      }
      guard.succeeded();
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("cannot write Parquet file '" + path_ + "': " + error.what(), io_error);
    }
  }

  /// The bytes in the file plus those of the row groups not in it yet, guessed from the file
  /// bytes per in-memory byte of the row groups already in it (1 before the first).
  [[nodiscard]] std::size_t bytes_written() const override {
    auto const position   = sink_->Tell();
    std::size_t const out = position.ok() ? static_cast<std::size_t>(*position) : 0;
    double const ratio    = flushed_bytes_ > 0 && out > 0
                              ? static_cast<double>(out) / static_cast<double>(flushed_bytes_)
                              : 1.0;
    std::size_t waiting   = group_bytes_;
    for (auto const& group : encoding_) {
      waiting += group.bytes;
    }
    return out + static_cast<std::size_t>(static_cast<double>(waiting) * ratio);
  }

  void close() override {
    throw_if_failed();
    failure_guard guard{failed_};
    try {
      if (!properties_) {
        make_properties(nullptr);
      }
      if (parallel() && (group_rows_ > 0 || !encoding_.empty() || metadata_)) {
        if (group_rows_ > 0) {
          encode_group();
        }
        while (!encoding_.empty()) {
          append_oldest();
        }
        write_footer();
      } else {
        // Nothing written (or one thread): Arrow's writer finishes the file.
        if (!writer_) {
          open_writer();
        }
        check_arrow(writer_->Close(), "cannot finish Parquet file '" + path_ + "'");
      }
      check_arrow(sink_->Close(), "cannot close Parquet file '" + path_ + "'");
      guard.succeeded();
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("cannot finish Parquet file '" + path_ + "': " + error.what(), io_error);
    }
  }

 private:
  /// Marks the writer failed unless `succeeded()` is called: a row group may be lost by then
  /// (taken off the encodings, not appended), so nothing may be written or closed after it.
  class failure_guard {
   public:
    explicit failure_guard(bool& failed) noexcept : failed_(failed) {}
    ~failure_guard() {
      if (!done_) {
        failed_ = true;
      }
    }
    failure_guard(failure_guard const&)            = delete;
    failure_guard& operator=(failure_guard const&) = delete;
    void succeeded() noexcept { done_ = true; }

   private:
    bool& failed_;
    bool done_ = false;
  };

  /// The file's size so far.
  [[nodiscard]] int64_t position() const {
    return value_or_throw(sink_->Tell(), "cannot write Parquet file '" + path_ + "'");
  }
  /// Appends `bytes` bytes of `data` to the file.
  void put(void const* data, std::size_t bytes) {
    check_arrow(sink_->Write(data, static_cast<int64_t>(bytes)),
                "cannot write Parquet file '" + path_ + "'");
  }

  void throw_if_failed() const {
    SPILLWAY_EXPECTS(!failed_,
                     "cannot write Parquet file '" + path_ + "': an earlier write to it failed",
                     io_error);
  }

  /// A row group being encoded on the pool into a Parquet file of its own.
  struct encoding_group {
    arrow::Future<std::shared_ptr<arrow::Buffer>> encoded;
    std::size_t bytes = 0;  ///< about its rows' bytes in memory
  };

  [[nodiscard]] bool parallel() const noexcept { return options_.encode_threads > 0; }

  /// Whether the row group being filled takes no more rows of `row_bytes` each.
  [[nodiscard]] bool group_full(double row_bytes) const noexcept {
    return group_rows_ >= row_group_rows_ ||
           (group_rows_ > 0 &&
            static_cast<double>(group_bytes_) + row_bytes > static_cast<double>(row_group_bytes_));
  }

  /// Rows (of `remaining`) that fit the row group being filled, at least one.
  [[nodiscard]] std::size_t rows_to_take(std::size_t remaining, double row_bytes) const noexcept {
    auto const room_by_bytes = static_cast<std::size_t>(
      std::max(0.0, static_cast<double>(row_group_bytes_ - group_bytes_)) / row_bytes);
    return std::min(
      {remaining, row_group_rows_ - group_rows_, std::max<std::size_t>(room_by_bytes, 1)});
  }

  void add_to_group(std::size_t rows, double row_bytes) noexcept {
    group_rows_ += rows;
    group_bytes_ +=
      std::min(row_group_bytes_, static_cast<std::size_t>(static_cast<double>(rows) * row_bytes));
  }

  /**
   * Cuts `input` into the row groups being filled. Rows without an owner are borrowed: full
   * groups are encoded from them and appended before this returns, and only the rows left
   * waiting for the next write (less than a row group) are copied.
   */
  void write_in_groups(table_view const& input,
                       std::shared_ptr<void const> const& owner,
                       double row_bytes) {
    try {
      fill_groups(input, owner, row_bytes);
    } catch (...) {
      if (!owner) {
        // Encodings may still read the borrowed rows: they finish before the caller frees them.
        for (auto& group : encoding_) {
          group.encoded.Wait();
        }
      }
      throw;
    }
  }

  void fill_groups(table_view const& input,
                   std::shared_ptr<void const> const& owner,
                   double row_bytes) {
    std::size_t const rows = input.num_rows();
    std::size_t begin      = 0;
    while (begin < rows) {
      std::size_t const take = rows_to_take(rows - begin, row_bytes);
      table_view const part  = slice(input, begin, begin + take);
      add_to_group(take, row_bytes);
      begin += take;
      if (owner || group_full(row_bytes)) {
        for (auto& batch :
             to_arrow_batches(part, schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
          group_batches_.push_back(std::move(batch));
          group_owners_.push_back(owner);
        }
      } else {
        // The last rows of a borrowed input wait for the next write: a copy of them does.
        std::shared_ptr<table const> copied = spillway::copy(part, stream_, mrs_.temporary());
        for (auto& batch : to_arrow_batches(
               copied->view(), schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
          group_batches_.push_back(std::move(batch));
          group_owners_.push_back(copied);
        }
      }
      if (group_full(row_bytes)) {
        encode_group();
      }
    }
    if (!owner) {
      while (!encoding_.empty()) {
        append_oldest();  // the borrowed rows are encoded before the caller may free them
      }
    }
    // Row groups done meanwhile go into the file now: their tables are freed, and the file's
    // size (for the next file's cut) is learned early.
    while (!encoding_.empty() && encoding_.front().encoded.is_finished()) {
      append_oldest();
    }
  }

  /// Hands the row group being filled to the pool, once fewer than `encode_threads` are there.
  void encode_group() {
    while (encoding_.size() >= options_.encode_threads) {
      append_oldest();
    }
    auto batches = std::move(group_batches_);
    auto owners  = std::move(group_owners_);
    group_batches_.clear();
    group_owners_.clear();
    // The file of a row group is sized like the last one's (5% more, at least 1 MiB), so that it
    // seldom grows (each growth copies what is there).
    int64_t const capacity = std::max<int64_t>(
      int64_t{1} << 20, static_cast<int64_t>(last_encoded_bytes_ + last_encoded_bytes_ / 20));
    auto task = [batches = std::move(batches),
                 owners  = std::move(owners),
                 capacity,
                 schema     = schema_,
                 properties = properties_,
                 arrow      = arrow_properties_,
                 pool       = pool_.get()]() -> arrow::Result<std::shared_ptr<arrow::Buffer>> {
      try {
        ARROW_ASSIGN_OR_RAISE(auto sink, arrow::io::BufferOutputStream::Create(capacity, pool));
        ARROW_ASSIGN_OR_RAISE(
          auto writer, parquet::arrow::FileWriter::Open(*schema, pool, sink, properties, arrow));
        // One row group written column after column straight into the sink (a buffered row
        // group would hold every column's pages and copy them out at its close).
        ARROW_ASSIGN_OR_RAISE(auto group, arrow::Table::FromRecordBatches(schema, batches));
        ARROW_RETURN_NOT_OK(writer->WriteTable(*group, std::max<int64_t>(group->num_rows(), 1)));
        ARROW_RETURN_NOT_OK(writer->Close());
        return sink->Finish();
      } catch (std::bad_alloc const&) {
        return arrow::Status::OutOfMemory("out of memory encoding a Parquet row group");
      } catch (std::exception const& error) {  // parquet::ParquetException and the like
        return arrow::Status::IOError(error.what());
      } catch (...) {
        return arrow::Status::UnknownError("encoding a Parquet row group failed");
      }
    };
    encoding_.push_back(
      encoding_group{value_or_throw(encoders_->Submit(std::move(task)),
                                    "cannot start encoding Parquet file '" + path_ + "'"),
                     group_bytes_});
    group_rows_  = 0;
    group_bytes_ = 0;
  }

  /// Waits for the oldest row group in flight and appends it to the file.
  void append_oldest() {
    encoding_group group = std::move(encoding_.front());
    encoding_.pop_front();
    auto const encoded =
      value_or_throw(group.encoded.result(), "cannot write Parquet file '" + path_ + "'");
    auto const* bytes      = encoded->data();
    auto const size        = static_cast<std::size_t>(encoded->size());
    last_encoded_bytes_    = size;
    std::size_t const tail = PARQUET_FOOTER_LENGTH + PARQUET_MAGIC.size();
    SPILLWAY_EXPECTS(size >= PARQUET_MAGIC.size() + tail &&
                       std::string_view(reinterpret_cast<char const*>(bytes), 4) == PARQUET_MAGIC,
                     "cannot write Parquet file '" + path_ + "': a row group encoded to " +
                       std::to_string(size) + " bytes that are not a Parquet file",
                     io_error);
    std::uint32_t footer_bytes = 0;
    std::memcpy(&footer_bytes, bytes + size - tail, sizeof(footer_bytes));
    SPILLWAY_EXPECTS(footer_bytes <= size - PARQUET_MAGIC.size() - tail,
                     "cannot write Parquet file '" + path_ + "': a row group's footer of " +
                       std::to_string(footer_bytes) + " bytes is longer than its file",
                     io_error);
    SPILLWAY_EXPECTS(row_groups_ < PARQUET_MAX_ROW_GROUPS,
                     "cannot write Parquet file '" + path_ + "': more than " +
                       std::to_string(PARQUET_MAX_ROW_GROUPS) + " row groups",
                     io_error);
    std::size_t const footer_at = size - tail - footer_bytes;
    std::span<std::uint8_t const> const footer_in(bytes + footer_at, footer_bytes);
    // Its page indexes follow its column chunks: where they begin, the data ends.
    auto const original =
      parquet::FileMetaData::Make(footer_in.data(), static_cast<int64_t>(footer_in.size()));
    SPILLWAY_EXPECTS(original->num_row_groups() == 1,
                     "cannot write Parquet file '" + path_ + "': a row group encoded to " +
                       std::to_string(original->num_row_groups()) + " row groups",
                     io_error);
    auto const row_group   = original->RowGroup(0);
    auto const num_columns = static_cast<std::size_t>(row_group->num_columns());
    std::vector<std::optional<parquet::IndexLocation>> column_indexes(num_columns);
    std::vector<std::optional<parquet::IndexLocation>> offset_indexes(num_columns);
    std::size_t data_end    = footer_at;
    std::size_t index_bytes = 0;
    for (std::size_t column = 0; column < num_columns; ++column) {
      auto const chunk       = row_group->ColumnChunk(static_cast<int>(column));
      column_indexes[column] = chunk->GetColumnIndexLocation();
      offset_indexes[column] = chunk->GetOffsetIndexLocation();
      for (auto const& location : {column_indexes[column], offset_indexes[column]}) {
        if (location) {
          data_end = std::min(data_end, static_cast<std::size_t>(location->offset));
          index_bytes += static_cast<std::size_t>(location->length);
        }
      }
    }
    SPILLWAY_EXPECTS(data_end >= PARQUET_MAGIC.size() && data_end + index_bytes == footer_at,
                     "cannot write Parquet file '" + path_ +
                       "': a row group's file holds more than column chunks and page indexes",
                     io_error);
    if (row_groups_ == 0) {
      put(PARQUET_MAGIC.data(), PARQUET_MAGIC.size());
    }
    auto const base  = position();
    auto const delta = base - static_cast<std::int64_t>(PARQUET_MAGIC.size());
    // The column chunks at `base`, then the page indexes, their page offsets moved too.
    put(bytes + PARQUET_MAGIC.size(), data_end - PARQUET_MAGIC.size());
    std::vector<page_index_location> moved(num_columns);
    for (std::size_t column = 0; column < num_columns; ++column) {
      if (auto const& location = column_indexes[column]) {
        moved[column].column_index_offset = position();
        moved[column].column_index_length = location->length;
        put(bytes + location->offset, static_cast<std::size_t>(location->length));
      }
    }
    for (std::size_t column = 0; column < num_columns; ++column) {
      if (auto const& location = offset_indexes[column]) {
        auto const rebased = rebase_offset_index(
          std::span<std::uint8_t const>(bytes + location->offset,
                                        static_cast<std::size_t>(location->length)),
          delta);
        moved[column].offset_index_offset = position();
        moved[column].offset_index_length = static_cast<std::int32_t>(rebased.size());
        put(rebased.data(), rebased.size());
      }
    }
    auto footer =
      rebase_parquet_footer(footer_in, delta, static_cast<std::int16_t>(row_groups_), moved);
    auto metadata = parquet::FileMetaData::Make(footer.data(), static_cast<int64_t>(footer.size()));
    if (metadata_) {
      metadata_->AppendRowGroups(*metadata);
    } else {
      metadata_ = std::move(metadata);
    }
    ++row_groups_;
    flushed_bytes_ += group.bytes;
  }

  void write_footer() {
    auto const start = position();
    metadata_->WriteTo(sink_.get());
    auto const length = static_cast<std::uint32_t>(position() - start);
    put(&length, sizeof(length));
    put(PARQUET_MAGIC.data(), PARQUET_MAGIC.size());
  }

  /**
   * The writer properties, once the first rows are known (`first`; null for a file without
   * rows): dictionary encoding is decided per column from them (parquet_dictionary::AUTO).
   */
  void make_properties(table_view const* first) {
    parquet::WriterProperties::Builder builder;
    builder.memory_pool(pool_.get())
      ->compression(to_parquet(options_.compression))
      ->max_row_group_length(static_cast<int64_t>(row_group_rows_));
    if (options_.dictionary == parquet_dictionary::OFF) {
      builder.disable_dictionary();
    } else if (options_.dictionary == parquet_dictionary::AUTO && first != nullptr) {
      for (std::size_t index = 0; index < first->num_columns(); ++index) {
        if (mostly_distinct(first->column(index))) {
          builder.disable_dictionary(std::make_shared<parquet::schema::ColumnPath>(
            std::vector<std::string>{schema_->field(static_cast<int>(index))->name()}));
        }
      }
    }
    parquet::ArrowWriterProperties::Builder arrow_builder;
    arrow_builder.store_schema();  // keeps second timestamps and large_string
    if (parallel()) {
      // A pool of this writer's own: writers sharing Arrow's CPU pool can deadlock when
      // several files are written at once (as a shuffle's ranks do).
      encoders_ =
        value_or_throw(arrow::internal::ThreadPool::Make(static_cast<int>(options_.encode_threads)),
                       "cannot start Parquet encoding threads");
    }
    properties_       = builder.build();
    arrow_properties_ = arrow_builder.build();
  }

  void open_writer() {
    writer_ = value_or_throw(parquet::arrow::FileWriter::Open(
                               *schema_, pool_.get(), sink_, properties_, arrow_properties_),
                             "cannot write Parquet file '" + path_ + "'");
  }

  std::string path_;
  std::unique_ptr<arrow_memory_pool> pool_;
  std::shared_ptr<arrow::Schema> schema_;
  parquet_write_options options_;
  std::size_t row_group_rows_;
  std::size_t row_group_bytes_;
  stream_view stream_;
  memory_resources mrs_;
  std::size_t group_rows_         = 0;  ///< rows in the row group being filled
  std::size_t group_bytes_        = 0;  ///< about their bytes in memory
  std::size_t last_encoded_bytes_ = 0;  ///< the size of the last row group's own file
  std::size_t flushed_bytes_      = 0;  ///< about the in-memory bytes of the row groups in the file
  std::shared_ptr<parquet::WriterProperties> properties_;
  std::shared_ptr<parquet::ArrowWriterProperties> arrow_properties_;
  /// Encoding threads (options.encode_threads > 0); they outlive the encodings that use them.
  std::shared_ptr<arrow::internal::ThreadPool> encoders_;
  std::shared_ptr<direct_output_stream> sink_;
  std::unique_ptr<parquet::arrow::FileWriter> writer_;  ///< one encoding thread
  // Several: the row group being filled, those being encoded, and the footer of those appended.
  std::vector<std::shared_ptr<arrow::RecordBatch>> group_batches_;
  std::vector<std::shared_ptr<void const>> group_owners_;
  std::deque<encoding_group> encoding_;
  std::shared_ptr<parquet::FileMetaData> metadata_;
  arrow_dictionaries dictionaries_;  ///< of the dictionary-encoded columns
  std::size_t row_groups_ = 0;       ///< appended to the file
  bool failed_            = false;   ///< a write or close threw: the file is void
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
  arrow_dictionaries dictionaries_;  ///< of the dictionary-encoded columns
};

}  // namespace

std::vector<std::vector<std::uint64_t>> parquet_row_group_rows(
  std::vector<std::string> const& files) {
  std::vector<std::vector<std::uint64_t>> rows;
  for (auto const& file : files) {
    auto const metadata = read_parquet_footer(file);
    auto& counts        = rows.emplace_back();
    for (int g = 0; g < metadata->num_row_groups(); ++g) {
      counts.push_back(
        static_cast<std::uint64_t>(std::max<int64_t>(0, metadata->RowGroup(g)->num_rows())));
    }
  }
  return rows;
}

std::unique_ptr<format_writer> make_parquet_writer(std::string const& path,
                                                   table_schema const& schema,
                                                   parquet_write_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs) {
  return std::make_unique<parquet_file_writer>(path, schema, options, stream, mrs);
}

std::unique_ptr<format_writer> make_arrow_ipc_writer(std::string const& path,
                                                     table_schema const& schema,
                                                     file_format format,
                                                     stream_view,
                                                     memory_resources mrs) {
  return std::make_unique<ipc_file_writer>(path, schema, format, mrs);
}

std::unique_ptr<batch_reader> open_parquet_files(std::vector<parquet_piece> pieces,
                                                 parquet_read_options const& options,
                                                 stream_view stream,
                                                 memory_resources mrs) {
  std::size_t const target = options.target_batch_bytes;
  bool const parallel      = options.parallel_columns;
  std::vector<std::string> files;
  for (auto const& piece : pieces) {
    files.push_back(piece.path);
    if (piece.row_groups) {
      // Every run checked before any row is read: later files open only as the reader reaches
      // them.
      auto const groups =
        static_cast<std::size_t>(read_parquet_footer(piece.path)->num_row_groups());
      auto const [first, end] = *piece.row_groups;
      SPILLWAY_EXPECTS(first < end && end <= groups,
                       "'" + piece.path + "' has " + std::to_string(groups) +
                         " row groups, not row groups [" + std::to_string(first) + ", " +
                         std::to_string(end) + ")",
                       invalid_argument);
    }
  }
  return std::make_unique<arrow_batch_reader>(
    std::move(files),
    options.columns,
    target,
    [pieces = std::move(pieces), target, parallel](std::size_t index, arrow::MemoryPool* pool) {
      auto const& piece = pieces[index];
      return std::make_unique<parquet_batches>(
        piece.path, piece.row_groups, target, parallel, pool);
    },
    stream,
    mrs);
}

std::unique_ptr<batch_reader> open_arrow_ipc_files(std::vector<std::string> files,
                                                   file_format format,
                                                   arrow_ipc_read_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs) {
  auto paths = files;
  return std::make_unique<arrow_batch_reader>(
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

}  // namespace detail
}  // namespace spillway
