/**
 * @file parquet_reader.cpp
 * @brief Reading Parquet files through Arrow C++: their footers, and their record batches by
 * row group.
 */
#include "io/arrow/arrow_batch_reader.hpp"
#include "io/arrow/parquet_sizes.hpp"
#include "io/arrow/string_arrays.hpp"
#include "io/arrow/type_conversion.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/parquet.hpp>

#include <parquet/arrow/reader.h>
#include <parquet/arrow/schema.h>
#include <parquet/exception.h>
#include <parquet/file_reader.h>
#include <parquet/metadata.h>
#include <parquet/properties.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway::detail {
namespace {

/// Most rows Arrow decodes into one record batch before we cut it to the target size.
constexpr int64_t MAX_DECODE_ROWS = 64 * 1024;
/// `parquet_decode_scratch_bytes` reads the footers of at most this many files of a dataset,
/// spread over it (each reader decodes files like its neighbours').
constexpr std::size_t MAX_SCRATCH_FILES = 16;

/// @return the footer of the Parquet file `path`, parsed
std::shared_ptr<parquet::FileMetaData> parse_parquet_footer(std::string const& path) {
  try {
    auto input = value_or_throw(open_mapped(path), "cannot open Parquet file '" + path + "'");
    return parquet::ReadMetaData(input);
  } catch (parquet::ParquetException const& error) {
    SPILLWAY_FAIL("'" + path + "' is not a valid Parquet file: " + error.what(), corruption_error);
  }
}

/**
 * @return the footer of the Parquet file `path`: the one parsed already while something still
 * holds it and the file has the same size and modification time, else a new one. The readers of
 * one file's row groups side by side share it: a large file's footer takes megabytes (a row
 * group's statistics for every column), and each reader parsed and kept its own.
 */
std::shared_ptr<parquet::FileMetaData> read_parquet_footer(std::string const& path) {
  struct parsed {
    std::uintmax_t size = 0;
    std::filesystem::file_time_type modified;
    std::weak_ptr<parquet::FileMetaData> footer;
  };
  static std::mutex mutex;
  static std::unordered_map<std::string, parsed> footers;
  std::error_code error;
  auto const size = std::filesystem::file_size(path, error);
  auto const modified =
    error ? std::filesystem::file_time_type{} : std::filesystem::last_write_time(path, error);
  if (error) {
    return parse_parquet_footer(path);  // which names what is wrong with the file
  }
  {
    std::scoped_lock const lock(mutex);
    if (auto const found = footers.find(path); found != footers.end() &&
                                               found->second.size == size &&
                                               found->second.modified == modified) {
      if (auto footer = found->second.footer.lock()) {
        return footer;
      }
    }
  }
  auto footer = parse_parquet_footer(path);
  std::scoped_lock const lock(mutex);
  std::erase_if(footers, [](auto const& entry) { return entry.second.footer.expired(); });
  footers[path] = parsed{size, modified, footer};
  return footer;
}

/// Whether `type` holds a dictionary inside a nested type (at `depth` 0, `type` is a column's).
bool has_inner_dictionary(arrow::DataType const& type, int depth = 0) {
  if (type.id() == arrow::Type::DICTIONARY && depth > 0) {
    return true;
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [depth](auto const& field) {
    return has_inner_dictionary(*field->type(), depth + 1);
  });
}

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
      check_arrow(builder.Open(std::move(input), properties, read_parquet_footer(path)),
                  "'" + path + "' is not a valid Parquet file");
      auto const metadata = builder.raw_reader()->metadata();
      builder.memory_pool(pool)->properties(arrow_properties);
      reader_ = value_or_throw(builder.Build(), "cannot read Parquet file '" + path + "'");
      std::shared_ptr<arrow::Schema> schema;
      check_arrow(reader_->GetSchema(&schema), "cannot read Parquet file '" + path + "'");
      // String views are decoded as large strings; the columns keep the file's types. The
      // schema's metadata is the footer's (as a batch's schema has it), not only what the stored
      // Arrow schema holds: writers add pairs to the footer alone.
      decode_views_as_large_strings(*reader_);
      // Rows per decoded piece: 1/PARQUET_DECODE_PIECES of the target, at the size the columns
      // decode to. A batch is cut from whole pieces, so the rows decoded past it (kept for the
      // next) are at most one piece.
      // The row groups this reader reads.
      auto const [first, end] =
        row_groups.value_or(std::pair<std::size_t, std::size_t>{0, metadata->num_row_groups()});
      auto const row_bytes = decoded_row_bytes(
        *metadata, reader_->manifest(), static_cast<int>(first), static_cast<int>(end));
      auto const piece = static_cast<double>(target_bytes / PARQUET_DECODE_PIECES);
      reader_->set_batch_size(
        std::clamp<int64_t>(static_cast<int64_t>(piece / row_bytes), 1, MAX_DECODE_ROWS));
      schema  = arrow::schema(schema->fields(), reader_->manifest().schema_metadata);
      schema_ = schema;
      if (std::any_of(schema->fields().begin(), schema->fields().end(), [](auto const& field) {
            return has_inner_dictionary(*field->type());
          })) {
        // Arrow cannot make one batch of row groups whose dictionaries inside a nested column
        // differ: a batch per row group, never across two.
        for (std::size_t group = first; group < end; ++group) {
          groups_.push_back(static_cast<int>(group));
        }
        batches_ = value_or_throw(reader_->GetRecordBatchReader(std::vector<int>{}),
                                  "cannot read Parquet file '" + path + "'");
      } else if (!row_groups) {
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

  /// The file's columns as its stored Arrow schema says (string_view ones too, which its
  /// batches hold as large strings: see `decode_views_as_large_strings`).
  [[nodiscard]] std::shared_ptr<arrow::Schema> schema() const override { return schema_; }

  std::shared_ptr<arrow::RecordBatch> next() override {
    try {
      auto batch = value_or_throw(batches_->Next(), "cannot read Parquet file '" + path_ + "'");
      while (batch == nullptr && next_group_ < groups_.size()) {
        batches_ = value_or_throw(reader_->GetRecordBatchReader({groups_[next_group_++]}),
                                  "cannot read Parquet file '" + path_ + "'");
        batch    = value_or_throw(batches_->Next(), "cannot read Parquet file '" + path_ + "'");
      }
      return batch;
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("Parquet file '" + path_ + "' is corrupt: " + error.what(), corruption_error);
    }
  }

 private:
  std::string path_;
  std::shared_ptr<arrow::Schema> schema_;
  std::unique_ptr<parquet::arrow::FileReader> reader_;
  std::unique_ptr<arrow::RecordBatchReader> batches_;
  std::vector<int> groups_;     ///< read one by one (see has_inner_dictionary), else none
  std::size_t next_group_ = 0;  ///< the next of them
};

}  // namespace

void decode_views_as_large_strings(parquet::arrow::FileReader& reader) {
  std::shared_ptr<arrow::Schema> schema;
  check_arrow(reader.GetSchema(&schema), "reading the schema of a Parquet file");
  auto const large = with_large_strings(*schema, true);
  if (!large) {
    return;
  }
  // The manifest's top-level fields are the schema's, in order. The reader owns its manifest and
  // hands it out read-only; it is changed before any batch is read.
  auto& fields = const_cast<parquet::arrow::SchemaManifest&>(reader.manifest()).schema_fields;
  for (std::size_t index = 0; index < fields.size(); ++index) {
    auto& field = fields[index];
    if (!field.is_leaf() || field.field == nullptr ||
        index >= static_cast<std::size_t>(large->num_fields())) {
      continue;
    }
    auto const& wanted = large->field(static_cast<int>(index));
    auto const id      = field.field->type()->id();
    if (wanted->name() == field.field->name() &&
        (id == arrow::Type::STRING_VIEW || id == arrow::Type::BINARY_VIEW)) {
      field.field = field.field->WithType(wanted->type());
    }
  }
}

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

std::size_t parquet_decode_scratch_bytes(std::vector<std::string> const& files) {
  std::size_t most    = 0;
  std::size_t const n = std::min(files.size(), MAX_SCRATCH_FILES);
  for (std::size_t sample = 0; sample < n; ++sample) {
    auto const& file = files[sample * files.size() / n];
    try {
      most = std::max(most, decode_scratch_bytes(*read_parquet_footer(file)));
    } catch (parquet::ParquetException const& error) {
      SPILLWAY_FAIL("'" + file + "' is not a valid Parquet file: " + error.what(),
                    corruption_error);
    }
  }
  return most;
}

std::unique_ptr<batch_reader> open_parquet_files(std::vector<parquet_piece> pieces,
                                                 parquet_read_options const& options,
                                                 stream_view stream,
                                                 memory_resources mrs) {
  std::size_t const target = options.target_batch_bytes;
  bool const parallel      = options.parallel_columns;
  std::vector<std::string> files;
  // The first piece's footer is kept until it is opened (right away), so that its reader and
  // those of the file's other pieces parse it only once.
  std::shared_ptr<parquet::FileMetaData> first_footer;
  for (auto const& piece : pieces) {
    files.push_back(piece.path);
    if (piece.row_groups) {
      // Every run checked before any row is read: later files open only as the reader reaches
      // them.
      auto footer       = read_parquet_footer(piece.path);
      auto const groups = static_cast<std::size_t>(footer->num_row_groups());
      if (files.size() == 1) {
        first_footer = std::move(footer);
      }
      auto const [first, end] = *piece.row_groups;
      SPILLWAY_EXPECTS(first < end && end <= groups,
                       "'" + piece.path + "' has " + std::to_string(groups) +
                         " row groups, not row groups [" + std::to_string(first) + ", " +
                         std::to_string(end) + ")",
                       invalid_argument);
    }
  }
  return make_arrow_batch_reader(
    std::move(files),
    options.columns,
    target,
    [pieces = std::move(pieces),
     target,
     parallel,
     first = std::make_shared<std::shared_ptr<parquet::FileMetaData>>(std::move(first_footer))](
      std::size_t index, arrow::MemoryPool* pool) {
      auto const& piece = pieces[index];
      auto batches =
        std::make_unique<parquet_batches>(piece.path, piece.row_groups, target, parallel, pool);
      if (index == 0) {
        first->reset();  // its reader holds it now
      }
      return batches;
    },
    stream,
    mrs);
}

}  // namespace spillway::detail
