/**
 * @file arrow_batch_reader.cpp
 * @brief The reader of Parquet and Arrow IPC datasets: each file's record batches, cut and joined
 * into spillway tables of about the target size.
 */
#include "io/arrow/arrow_batch_reader.hpp"
#include "io/arrow/arrow_memory_pool.hpp"
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/table/table.hpp>

#include <arrow/io/file.h>
#include <arrow/io/memory.h>

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace spillway::detail {

arrow::Result<std::shared_ptr<arrow::io::RandomAccessFile>> open_mapped(std::string const& path) {
  ARROW_ASSIGN_OR_RAISE(auto mapped,
                        arrow::io::MemoryMappedFile::Open(path, arrow::io::FileMode::READ));
  ARROW_ASSIGN_OR_RAISE(auto const size, mapped->GetSize());
  ARROW_ASSIGN_OR_RAISE(auto whole, mapped->ReadAt(0, size));
  return std::make_shared<arrow::io::BufferReader>(std::move(whole));
}

namespace {

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

}  // namespace

std::unique_ptr<batch_reader> make_arrow_batch_reader(
  std::vector<std::string> files,
  std::vector<std::string> columns,
  std::size_t target_bytes,
  std::function<std::unique_ptr<file_batches>(std::size_t, arrow::MemoryPool*)> open,
  stream_view stream,
  memory_resources mrs) {
  return std::make_unique<arrow_batch_reader>(
    std::move(files), std::move(columns), target_bytes, std::move(open), stream, mrs);
}

}  // namespace spillway::detail
