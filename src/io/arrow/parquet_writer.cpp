/**
 * @file parquet_writer.cpp
 * @brief Writing Parquet files through Arrow C++, with row groups encoded on several threads.
 */
#include "io/arrow/arrow_memory_pool.hpp"
#include "io/arrow/direct_output_stream.hpp"
#include "io/arrow/parquet_encoders.hpp"
#include "io/arrow/parquet_footer.hpp"
#include "io/arrow/string_arrays.hpp"
#include "io/arrow/type_conversion.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table_view.hpp>

#include <arrow/io/memory.h>
#include <arrow/util/key_value_metadata.h>
#include <arrow/util/thread_pool.h>
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
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway::detail {
namespace {

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

/**
 * @return the first part of `type` that Parquet cannot hold (an interval, a dictionary of nested
 * values), or "" when it holds all of it
 */
std::string parquet_unholdable(arrow::DataType const& type) {
  switch (type.id()) {
    case arrow::Type::INTERVAL_MONTHS:
    case arrow::Type::INTERVAL_DAY_TIME:
    case arrow::Type::INTERVAL_MONTH_DAY_NANO:
      return type.ToString();
    case arrow::Type::DICTIONARY: {
      auto const& values = *static_cast<arrow::DictionaryType const&>(type).value_type();
      return values.num_fields() > 0 ? type.ToString() : parquet_unholdable(values);
    }
    default:
      break;
  }
  for (auto const& field : type.fields()) {
    auto part = parquet_unholdable(*field->type());
    if (!part.empty()) {
      return part;
    }
  }
  return {};
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

/// The longest value a Parquet BYTE_ARRAY holds: Arrow's encoder refuses 2 GiB or more.
constexpr std::int64_t MAX_PARQUET_VALUE_BYTES = std::numeric_limits<std::int32_t>::max();

/** @return whether column `field` is written as Parquet byte arrays of spillway's own values */
bool holds_byte_arrays(arrow::DataType const& field) noexcept {
  switch (field.id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW:
      return true;
    case arrow::Type::DICTIONARY:  // decoded to its values in spillway, encoded again on write
      return holds_byte_arrays(*static_cast<arrow::DictionaryType const&>(field).value_type());
    default:
      return false;  // nested columns hold spillway's encoding of their values
  }
}

/**
 * @throws not_supported naming the file, the column and the size of the first value of a string
 * or binary column of `input` longer than a Parquet byte array holds (`MAX_PARQUET_VALUE_BYTES`),
 * before any of its bytes are read: Arrow's encoder would fail on it without saying which
 */
void refuse_values_parquet_cannot_hold(table_view const& input,
                                       arrow::Schema const& schema,
                                       std::string const& path) {
  for (std::size_t c = 0; c < input.num_columns(); ++c) {
    auto const view = input.column(c);
    if (view.size() == 0 || view.offsets() == nullptr ||
        !holds_byte_arrays(*schema.field(static_cast<int>(c))->type())) {
      continue;
    }
    std::int64_t const* offsets = view.offsets() + view.offset();
    if (offsets[view.size()] - offsets[0] <= MAX_PARQUET_VALUE_BYTES) {
      continue;  // no value is longer than all of them together
    }
    for (std::size_t row = 0; row < view.size(); ++row) {
      std::int64_t const bytes = offsets[row + 1] - offsets[row];
      if (bytes > MAX_PARQUET_VALUE_BYTES) {
        SPILLWAY_FAIL("cannot write Parquet file '" + path + "': column '" +
                        schema.field(static_cast<int>(c))->name() + "' has a value of " +
                        std::to_string(bytes) + " bytes, more than a Parquet value holds (" +
                        std::to_string(MAX_PARQUET_VALUE_BYTES) +
                        "); Arrow IPC's large_string and large_binary hold it",
                      not_supported);
      }
    }
  }
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
/**
 * Arrow computes a schema's fingerprints (and its fields' and types') on first use, as
 * Table::FromRecordBatches does comparing schemas, and publishes them with atomics of its own,
 * which ThreadSanitizer does not see in the wheel's uninstrumented library. Computed here, before
 * any row group is handed to an encoding thread, and under one lock for every writer (a type such
 * as int64() is one object shared by the whole process), they are only read on those threads.
 */
void compute_fingerprints(arrow::Schema const& schema) {
  static std::mutex computing;
  std::lock_guard const lock(computing);
  static_cast<void>(schema.fingerprint());
  static_cast<void>(schema.metadata_fingerprint());
}

class parquet_file_writer final : public format_writer {
 public:
  parquet_file_writer(std::string path,
                      table_schema const& schema,
                      parquet_write_options const& options,
                      stream_view stream,
                      memory_resources mrs)
    : path_(std::move(path)),
      pool_(std::make_shared<arrow_memory_pool>(mrs.temporary())),
      schema_(to_arrow_schema(schema)),
      encoded_schema_(with_large_strings(*schema_, false)),
      options_(options),
      row_group_rows_(std::clamp<std::size_t>(
        options.row_group_rows, 1, static_cast<std::size_t>(std::numeric_limits<int64_t>::max()))),
      row_group_bytes_(std::max<std::size_t>(options.row_group_bytes, 1)),
      stream_(stream),
      mrs_(mrs) {
    for (auto const& field : schema_->fields()) {
      auto const part = parquet_unholdable(*field->type());
      SPILLWAY_EXPECTS(part.empty(),
                       "parquet: column '" + field->name() + "' is " + field->type()->ToString() +
                         ", which Parquet cannot hold (" + part + "); write it as Arrow IPC",
                       not_supported);
    }
    if (encoded_schema_) {
      // Encoded from the columns' own characters and offsets, stored as the schema says.
      stored_schema_ =
        arrow::key_value_metadata({ARROW_SCHEMA_KEY}, {stored_arrow_schema(*schema_)});
    } else {
      encoded_schema_ = schema_;
    }
    compute_fingerprints(*schema_);
    compute_fingerprints(*encoded_schema_);
    sink_ = value_or_throw(direct_output_stream::Open(path_, pool_.get(), DIRECT_WRITE_BYTES),
                           "cannot create Parquet file '" + path_ + "'");
  }

  ~parquet_file_writer() override {
    // Encodings in flight use the pool, the properties and their tables: they finish first.
    for (auto& group : encoding_) {
      group.encoded.Wait();
      static_cast<void>(group.encoded.MoveResult());  // its bytes freed here, into the pool
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
    refuse_values_parquet_cannot_hold(input, *schema_, path_);
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
        for (auto const& batch : to_arrow_batches(
               part, encoded_schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
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
        if (stored_schema_) {
          check_arrow(writer_->AddKeyValueMetadata(stored_schema_),
                      "cannot finish Parquet file '" + path_ + "'");
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
    encode_slot slot;       ///< of shared encoders, until it is appended (or dropped)
  };

  [[nodiscard]] bool parallel() const noexcept {
    return options_.encode_threads > 0 || options_.encoders != nullptr;
  }

  /// A slot of the shared encoders for the next row group: this writer's oldest row groups are
  /// appended while none is free, and only a writer with none in flight waits for another's.
  [[nodiscard]] encode_slot take_slot() {
    auto const& shared = options_.encoders->shared();
    while (!shared->slots.try_acquire()) {
      if (encoding_.empty()) {
        shared->slots.acquire();
        break;
      }
      append_oldest();
    }
    return encode_slot{shared};
  }

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
   * waiting for the next write (less than a row group) are copied. With shared encoders, borrowed
   * rows are copied instead (into the writer's temporary memory), so that their row groups
   * encode on while the caller goes on: a copy costs a tenth of the encoding it no longer waits
   * for, and the slots bound what the copies hold.
   */
  void write_in_groups(table_view const& input,
                       std::shared_ptr<void const> const& owner,
                       double row_bytes) {
    if (!owner && options_.encoders) {
      std::shared_ptr<table const> const copied = spillway::copy(input, stream_, mrs_.temporary());
      fill_groups(copied->view(), copied, row_bytes);
      return;
    }
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
        for (auto& batch : to_arrow_batches(
               part, encoded_schema_, pool_.get(), MAX_STRING_ARRAY_CHARS, &dictionaries_)) {
          group_batches_.push_back(std::move(batch));
          group_owners_.push_back(owner);
        }
      } else {
        // The last rows of a borrowed input wait for the next write: a copy of them does.
        std::shared_ptr<table const> copied = spillway::copy(part, stream_, mrs_.temporary());
        for (auto& batch : to_arrow_batches(copied->view(),
                                            encoded_schema_,
                                            pool_.get(),
                                            MAX_STRING_ARRAY_CHARS,
                                            &dictionaries_)) {
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

  /// Hands the row group being filled to the pool, once fewer than `encode_threads` are there
  /// (or once it has a slot of the shared encoders).
  void encode_group() {
    encode_slot slot = options_.encoders ? take_slot() : encode_slot{};
    while (!options_.encoders && encoding_.size() >= options_.encode_threads) {
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
                 schema     = encoded_schema_,
                 stored     = stored_schema_,
                 properties = properties_,
                 arrow      = arrow_properties_,
                 pool       = pool_]() mutable -> arrow::Result<std::shared_ptr<arrow::Buffer>> {
      // The rows are let go when this returns, before the encoded bytes are handed over (a
      // thread pool lets go of the task itself later, perhaps after the writer is gone).
      auto const held = std::move(owners);
      auto const rows = std::move(batches);
      try {
        ARROW_ASSIGN_OR_RAISE(auto sink,
                              arrow::io::BufferOutputStream::Create(capacity, pool.get()));
        ARROW_ASSIGN_OR_RAISE(
          auto writer,
          parquet::arrow::FileWriter::Open(*schema, pool.get(), sink, properties, arrow));
        // One row group written column after column straight into the sink (a buffered row
        // group would hold every column's pages and copy them out at its close).
        ARROW_ASSIGN_OR_RAISE(auto group, arrow::Table::FromRecordBatches(schema, rows));
        ARROW_RETURN_NOT_OK(writer->WriteTable(*group, std::max<int64_t>(group->num_rows(), 1)));
        if (stored) {
          ARROW_RETURN_NOT_OK(writer->AddKeyValueMetadata(stored));
        }
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
                     group_bytes_,
                     std::move(slot)});
    group_rows_  = 0;
    group_bytes_ = 0;
  }

  /// Waits for the oldest row group in flight and appends it to the file.
  void append_oldest() {
    encoding_group group = std::move(encoding_.front());
    encoding_.pop_front();
    // Moved out of the future: the bytes are freed here, not by whichever thread lets go of it.
    auto const encoded =
      value_or_throw(group.encoded.MoveResult(), "cannot write Parquet file '" + path_ + "'");
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
      ->max_row_group_length(static_cast<int64_t>(row_group_rows_))
      // Decimals of up to 18 digits as INT32/INT64, as the format recommends and as DuckDB and
      // other writers store them: cheaper to encode, compare and read than fixed-size binary.
      ->enable_store_decimal_as_integer();
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
    if (options_.encoders) {
      encoders_ = options_.encoders->shared()->threads;
    } else if (parallel()) {
      // A pool of this writer's own (or shared encoders'): writers sharing Arrow's CPU pool can
      // deadlock when several files are written at once (as a shuffle's ranks do).
      encoders_ =
        value_or_throw(arrow::internal::ThreadPool::Make(static_cast<int>(options_.encode_threads)),
                       "cannot start Parquet encoding threads");
    }
    properties_       = builder.build();
    arrow_properties_ = arrow_builder.build();
  }

  void open_writer() {
    writer_ =
      value_or_throw(parquet::arrow::FileWriter::Open(
                       *encoded_schema_, pool_.get(), sink_, properties_, arrow_properties_),
                     "cannot write Parquet file '" + path_ + "'");
  }

  std::string path_;
  /// Shared with the encodings, which may be let go by a shared encoder's thread after the
  /// writer is gone.
  std::shared_ptr<arrow_memory_pool> pool_;
  std::shared_ptr<arrow::Schema> schema_;  ///< the columns' types, as the file stores them
  /// What Arrow's encoder is handed: `schema_` with large strings (`with_large_strings`).
  std::shared_ptr<arrow::Schema> encoded_schema_;
  /// `schema_` as the file's stored Arrow schema, when the encoded one differs; else null.
  std::shared_ptr<arrow::KeyValueMetadata const> stored_schema_;
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

}  // namespace

std::unique_ptr<format_writer> make_parquet_writer(std::string const& path,
                                                   table_schema const& schema,
                                                   parquet_write_options const& options,
                                                   stream_view stream,
                                                   memory_resources mrs) {
  return std::make_unique<parquet_file_writer>(
    path, schema, parquet_write_options_within(options), stream, mrs);
}

}  // namespace spillway::detail
