/**
 * @file arrow_c_stream.cpp
 * @brief `arrow_stream_reader` and `export_arrow_stream`: Arrow C streams through Arrow C++'s
 * bridge (arrow/c/bridge.h), batches viewed in place where the layouts agree.
 */
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/arrow_c_stream.hpp>

#include <arrow/c/abi.h>
#include <arrow/c/bridge.h>

#include <cstdint>
#include <deque>
#include <exception>
#include <new>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/// The characters of a large_string array without a value buffer (no characters at all).
alignas(8) constexpr char NO_CHARS[1] = {0};

/**
 * @return whether spillway can view `array` (of spillway type `type`) where Arrow holds it: only
 * when Arrow's layout is spillway's (large strings and binaries: 64-bit offsets; fixed-width
 * values of the same width). Dictionaries (indices), fixed_size_binary (no offsets), views,
 * booleans (bits) and nested columns are converted.
 */
bool viewable(arrow::Array const& array, data_type type) {
  auto const arrow_id = array.type_id();
  if (detail::is_nested_type(*array.type()) || arrow_id == arrow::Type::DICTIONARY) {
    return false;  // encoded (nested_encoding.hpp), or decoded to its values
  }
  auto const& buffers = array.data()->buffers;
  if (!is_fixed_width(type)) {
    return (arrow_id == arrow::Type::LARGE_STRING || arrow_id == arrow::Type::LARGE_BINARY) &&
           buffers.size() == 3 && buffers[1] != nullptr;
  }
  if (type.id() == type_id::BOOL8 || arrow_id == arrow::Type::FIXED_SIZE_BINARY) {
    return false;
  }
  auto const* fixed = dynamic_cast<arrow::FixedWidthType const*>(array.type().get());
  return fixed != nullptr && fixed->bit_width() == static_cast<int>(8 * size_of(type)) &&
         buffers.size() == 2 && (buffers[1] != nullptr || array.length() == 0);
}

}  // namespace

class arrow_stream_reader::impl {
 public:
  impl(ArrowArrayStream* stream, std::string source, resource_ref scratch)
    : source_(std::move(source)), scratch_(scratch) {
    reader_ = detail::value_or_throw(arrow::ImportRecordBatchReader(stream),
                                     "importing the Arrow stream of " + source_);
    schema_ = detail::from_arrow_schema(*reader_->schema(), source_);
  }

  [[nodiscard]] table_schema const& schema() const noexcept { return schema_; }

  std::optional<table_view> next() {
    converted_.clear();
    batch_.reset();
    // Empty batches carry no rows: skip them, so that a view is never of no rows but the end.
    while (true) {
      detail::check_arrow(reader_->ReadNext(&batch_), "reading the next batch of " + source_);
      if (batch_ == nullptr) {
        return std::nullopt;
      }
      if (batch_->num_rows() > 0) {
        break;
      }
    }
    std::vector<column_view> columns;
    columns.reserve(schema_.size());
    for (std::size_t c = 0; c < schema_.size(); ++c) {
      auto const& array = *batch_->column(static_cast<int>(c));
      auto const type   = schema_[c].type;
      if (!viewable(array, type)) {
        converted_.push_back(
          detail::from_arrow_chunks({batch_->column(static_cast<int>(c))}, type, {}, scratch_));
        columns.push_back(converted_.back()->view());
        continue;
      }
      auto const& buffers = array.data()->buffers;
      auto const* mask    = buffers[0] != nullptr ? buffers[0]->data() : nullptr;
      auto const nulls    = static_cast<std::size_t>(array.null_count());
      auto const rows     = static_cast<std::size_t>(array.length());
      auto const offset   = static_cast<std::size_t>(array.offset());
      if (!is_fixed_width(type)) {
        void const* chars = buffers[2] != nullptr && buffers[2]->data() != nullptr
                              ? static_cast<void const*>(buffers[2]->data())
                              : NO_CHARS;
        columns.emplace_back(type,
                             rows,
                             chars,
                             nulls > 0 ? mask : nullptr,
                             nulls,
                             offset,
                             reinterpret_cast<std::int64_t const*>(buffers[1]->data()));
      } else {
        columns.emplace_back(type,
                             rows,
                             buffers[1] != nullptr ? buffers[1]->data() : nullptr,
                             nulls > 0 ? mask : nullptr,
                             nulls,
                             offset);
      }
    }
    return table_view{std::move(columns)};
  }

 private:
  std::string source_;
  resource_ref scratch_;
  std::shared_ptr<arrow::RecordBatchReader> reader_;
  table_schema schema_;
  std::shared_ptr<arrow::RecordBatch> batch_;       ///< the batch the last view is of
  std::vector<std::unique_ptr<column>> converted_;  ///< its converted columns
};

arrow_stream_reader::arrow_stream_reader(ArrowArrayStream* stream,
                                         std::string source,
                                         resource_ref scratch)
  : impl_(std::make_unique<impl>(stream, std::move(source), scratch)) {}

arrow_stream_reader::~arrow_stream_reader() = default;

table_schema const& arrow_stream_reader::schema() const noexcept { return impl_->schema(); }

std::optional<table_view> arrow_stream_reader::next() { return impl_->next(); }

namespace {

/** @brief An Arrow buffer over memory that `owner` (a table, or a buffer of Arrow's) keeps. */
class owned_buffer final : public arrow::Buffer {
 public:
  owned_buffer(std::shared_ptr<arrow::Buffer> const& view, std::shared_ptr<void const> owner)
    : arrow::Buffer(view->data(), view->size()), view_(view), owner_(std::move(owner)) {}

 private:
  std::shared_ptr<arrow::Buffer> view_;  ///< the buffer it stands for (owning, when Arrow's)
  std::shared_ptr<void const> owner_;    ///< the table whose memory it is
};

/** @brief Makes every buffer of `data` (and of its children) keep `owner` alive. */
void keep_alive(arrow::ArrayData& data, std::shared_ptr<void const> const& owner) {
  for (auto& buffer : data.buffers) {
    if (buffer != nullptr) {
      buffer = std::make_shared<owned_buffer>(buffer, owner);
    }
  }
  for (auto& child : data.child_data) {
    keep_alive(*child, owner);
  }
  if (data.dictionary != nullptr) {
    keep_alive(*data.dictionary, owner);
  }
}

/** @return the Arrow status that carries the exception being handled */
arrow::Status status_of_current_exception() {
  try {
    throw;
  } catch (out_of_memory const& failure) {
    return arrow::Status::OutOfMemory(failure.what());
  } catch (std::bad_alloc const&) {
    return arrow::Status::OutOfMemory("out of host memory");
  } catch (invalid_argument const& failure) {
    return arrow::Status::Invalid(failure.what());
  } catch (not_supported const& failure) {
    return arrow::Status::NotImplemented(failure.what());
  } catch (std::exception const& failure) {
    return arrow::Status::IOError(failure.what());
  } catch (...) {
    return arrow::Status::UnknownError("unknown exception");
  }
}

/** @brief The record batches of a `table_source`, for Arrow's exporter. */
class source_reader final : public arrow::RecordBatchReader {
 public:
  source_reader(std::shared_ptr<arrow::Schema> schema, table_source source)
    : schema_(std::move(schema)), source_(std::move(source)) {}

  [[nodiscard]] std::shared_ptr<arrow::Schema> schema() const override { return schema_; }

  arrow::Status ReadNext(std::shared_ptr<arrow::RecordBatch>* batch) override {
    try {
      while (pending_.empty() && source_) {
        auto next = source_();
        if (next == nullptr) {
          source_ = nullptr;  // whatever it holds goes now, not when the consumer lets go
          break;
        }
        std::shared_ptr<table const> owner{std::move(next)};
        for (auto& piece :
             detail::to_arrow_batches(owner->view(), schema_, arrow::default_memory_pool())) {
          auto data = piece->column_data();
          arrow::ArrayVector columns;
          for (auto& column : data) {
            auto copy = column->Copy();
            keep_alive(*copy, owner);
            columns.push_back(arrow::MakeArray(std::move(copy)));
          }
          pending_.push_back(arrow::RecordBatch::Make(schema_, piece->num_rows(), columns));
        }
      }
    } catch (...) {
      source_ = nullptr;
      return status_of_current_exception();
    }
    if (pending_.empty()) {
      *batch = nullptr;
      return arrow::Status::OK();
    }
    *batch = std::move(pending_.front());
    pending_.pop_front();
    return arrow::Status::OK();
  }

  arrow::Status Close() override {
    source_ = nullptr;
    pending_.clear();
    return arrow::Status::OK();
  }

 private:
  std::shared_ptr<arrow::Schema> schema_;
  table_source source_;
  std::deque<std::shared_ptr<arrow::RecordBatch>> pending_;
};

}  // namespace

void export_arrow_stream(table_schema const& schema, table_source source, ArrowArrayStream* out) {
  auto reader = std::make_shared<source_reader>(detail::to_arrow_schema(schema), std::move(source));
  detail::check_arrow(arrow::ExportRecordBatchReader(std::move(reader), out),
                      "exporting an Arrow stream");
}

}  // namespace spillway
