/**
 * @file csv.cpp
 * @brief CSV reading without Arrow: a streaming reader that stages raw text in the temporary
 * resource and tokenizes it quoting-aware. The writer is in csv_writer.cpp, the text forms of
 * the values in csv_text.cpp.
 */
#include "io/csv_inference.hpp"
#include "io/csv_text.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/table/column.hpp>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace spillway {
namespace {

using detail::csv::field_text;
using detail::csv::scan_status;

/** @brief Streams the CSV files of a dataset. */
class csv_reader final : public batch_reader {
 public:
  csv_reader(std::vector<std::string> files,
             csv_read_options options,
             stream_view stream,
             memory_resources mrs)
    : files_(std::move(files)), options_(std::move(options)), stream_(stream), mrs_(mrs) {
    SPILLWAY_EXPECTS(options_.target_batch_bytes > 0,
                     std::string{"csv: target_batch_bytes must be positive"},
                     invalid_argument);
    capacity_ = std::max<std::size_t>(options_.target_batch_bytes, MIN_BLOCK_BYTES);
    block_    = buffer(capacity_, stream_, mrs_.temporary());
    open_file(0);
    // The schema: given, or inferred from every value of the dataset.
    if (options_.schema) {
      SPILLWAY_EXPECTS(options_.column_types.empty(),
                       std::string{"csv: give either a schema or column types, not both"},
                       invalid_argument);
      file_schema_ = *options_.schema;
      SPILLWAY_EXPECTS(file_schema_.size() == header_.size(),
                       "csv: the schema has " + std::to_string(file_schema_.size()) +
                         " columns but '" + files_[0] + "' has " + std::to_string(header_.size()),
                       invalid_argument);
      for (std::size_t i = 0; i < header_.size(); ++i) {
        SPILLWAY_EXPECTS(file_schema_[i].name == header_[i],
                         "csv: schema column " + std::to_string(i) + " is '" +
                           file_schema_[i].name + "' but the header of '" + files_[0] + "' says '" +
                           header_[i] + "'",
                         invalid_argument);
      }
    } else {
      infer_schema();
    }
    // The selection.
    if (options_.columns.empty()) {
      for (std::size_t i = 0; i < file_schema_.size(); ++i) {
        selected_.push_back(i);
      }
    } else {
      for (auto const& name : options_.columns) {
        auto const found = std::find(header_.begin(), header_.end(), name);
        SPILLWAY_EXPECTS(found != header_.end(),
                         "csv: unknown column '" + name + "' in '" + files_[0] +
                           "' (columns: " + to_string(file_schema_) + ")",
                         invalid_argument);
        selected_.push_back(static_cast<std::size_t>(found - header_.begin()));
      }
    }
    output_of_.assign(file_schema_.size(), NOT_SELECTED);
    for (std::size_t i = 0; i < selected_.size(); ++i) {
      output_of_[selected_[i]] = i;
      schema_.push_back(file_schema_[selected_[i]]);
    }
  }

  ~csv_reader() override { close_file(); }
  csv_reader(csv_reader const&)            = delete;
  csv_reader& operator=(csv_reader const&) = delete;
  csv_reader(csv_reader&&)                 = delete;
  csv_reader& operator=(csv_reader&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }

  std::unique_ptr<table> next() override {
    while (true) {
      if (file_ == nullptr) {
        if (file_index_ + 1 >= files_.size()) {
          return nullptr;
        }
        open_file(file_index_ + 1);
      }
      std::size_t const records_end = fill_to_complete_records();
      if (records_end > begin_) {
        auto result = parse_block(begin_, records_end);
        begin_      = records_end;
        return result;
      }
      // Nothing left in this file.
      close_file();
    }
  }

 private:
  static constexpr std::size_t MIN_BLOCK_BYTES = 64U << 10U;  ///< the smallest raw-text block
  static constexpr std::size_t NOT_SELECTED    = std::numeric_limits<std::size_t>::max();

  [[nodiscard]] char* block() noexcept { return static_cast<char*>(block_.data()); }
  [[nodiscard]] std::string const& path() const { return files_[file_index_]; }

  void open_file(std::size_t index) {
    close_file();
    file_index_ = index;
    file_       = std::fopen(path().c_str(), "rb");
    SPILLWAY_EXPECTS(
      file_ != nullptr, "cannot open CSV file '" + path() + "': " + std::strerror(errno), io_error);
    at_eof_ = false;
    begin_ = end_                = 0;
    row_                         = 0;
    std::size_t const header_end = fill_to_complete_records(1);
    // A UTF-8 byte order mark (spreadsheets write one) is not part of the first column's name.
    constexpr std::string_view BYTE_ORDER_MARK = "\xEF\xBB\xBF";
    if (std::string_view(block(), header_end).starts_with(BYTE_ORDER_MARK)) {
      begin_ = BYTE_ORDER_MARK.size();
    }
    std::vector<std::string> header;
    char const* position = block() + begin_;
    auto const status    = detail::csv::scan_record(
      &position, block() + header_end, true, options_.delimiter, [&](field_text const& field) {
        std::string name(detail::csv::unescaped_size(field), '\0');
        detail::csv::unescape_to(field, name.data());
        header.push_back(std::move(name));
      });
    SPILLWAY_EXPECTS(status == scan_status::RECORD,
                     "CSV file '" + path() + "' has no header line",
                     corruption_error);
    begin_ = static_cast<std::size_t>(position - block());
    if (index == 0) {
      header_ = std::move(header);
    } else {
      SPILLWAY_EXPECTS(header == header_,
                       "CSV file '" + path() + "' has a header unlike that of '" + files_[0] + "'",
                       io_error);
    }
  }

  void close_file() noexcept {
    if (file_ != nullptr) {
      std::fclose(file_);
      file_ = nullptr;
    }
  }

  /**
   * @brief Reads until the block holds at least one complete record after `begin_` (or the file
   * ends), growing the block for a record longer than it.
   * @return the end of the last complete record in the block, stopping after `max_records`
   */
  std::size_t fill_to_complete_records(std::size_t max_records = NOT_SELECTED) {
    while (true) {
      if (!at_eof_ && begin_ > 0) {
        std::memmove(block(), block() + begin_, end_ - begin_);
        end_ -= begin_;
        begin_ = 0;
      }
      if (!at_eof_ && end_ < capacity_) {
        std::size_t const count = std::fread(block() + end_, 1, capacity_ - end_, file_);
        SPILLWAY_EXPECTS(!std::ferror(file_),
                         "cannot read CSV file '" + path() + "': " + std::strerror(errno),
                         io_error);
        end_ += count;
        at_eof_ = std::feof(file_) != 0;
      }
      char const* position = block() + begin_;
      char const* last_end = position;
      std::size_t records  = 0;
      while (records < max_records) {
        auto const status = detail::csv::scan_record(
          &position, block() + end_, at_eof_, options_.delimiter, [](field_text const&) {});
        if (status == scan_status::MALFORMED) {
          SPILLWAY_FAIL("CSV file '" + path() + "' is malformed near data row " +
                          std::to_string(row_ + records + 1) + ": a stray or unclosed quote",
                        corruption_error);
        }
        if (status != scan_status::RECORD) {
          break;
        }
        last_end = position;
        ++records;
      }
      if (records > 0 || at_eof_) {
        return static_cast<std::size_t>(last_end - block());
      }
      if (begin_ == 0 && end_ == capacity_) {
        // One record is longer than the block: double the block.
        buffer larger(capacity_ * 2, stream_, mrs_.temporary());
        std::memcpy(larger.data(), block_.data(), end_);
        block_ = std::move(larger);
        capacity_ *= 2;
      }
    }
  }

  /**
   * @brief The types of `column_types`, and for every other column the first type of
   * `column_guess` that parses each of its values in every file: a first pass over the whole
   * dataset, so that the schema depends on the data alone, not on the batch size, and no later
   * value can contradict it.
   */
  void infer_schema() {
    std::string header_names;
    for (auto const& name : header_) {
      header_names += (header_names.empty() ? "" : ", ") + name;
    }
    std::vector<std::optional<data_type>> given(header_.size());
    for (auto const& column : options_.column_types) {
      auto const found = std::find(header_.begin(), header_.end(), column.name);
      SPILLWAY_EXPECTS(found != header_.end(),
                       "csv: a type is given for column '" + column.name + "', which '" +
                         files_[0] + "' lacks (columns: " + header_names + ")",
                       invalid_argument);
      auto& type = given[static_cast<std::size_t>(found - header_.begin())];
      SPILLWAY_EXPECTS(
        !type, "csv: the type of column '" + column.name + "' is given twice", invalid_argument);
      type = column.type;
    }
    std::vector<detail::csv::column_guess> guesses(header_.size());
    if (std::find(given.begin(), given.end(), std::nullopt) != given.end()) {
      for (std::size_t index = 0; index < files_.size(); ++index) {
        if (index > 0) {
          open_file(index);
        }
        see_file(guesses, given);
      }
      open_file(0);
    }
    for (std::size_t i = 0; i < header_.size(); ++i) {
      file_schema_.push_back({header_[i], given[i] ? *given[i] : guesses[i].type()});
    }
  }

  /** @brief Shows `guesses` every value of the open file in the columns without a `given` type. */
  void see_file(std::vector<detail::csv::column_guess>& guesses,
                std::vector<std::optional<data_type>> const& given) {
    while (true) {
      std::size_t const records_end = fill_to_complete_records();
      if (records_end == begin_) {
        return;
      }
      char const* position  = block() + begin_;
      char const* const end = block() + records_end;
      while (position < end) {
        std::size_t field = 0;
        auto const status = detail::csv::scan_record(
          &position, end, true, options_.delimiter, [&](field_text const& text) {
            if (field < guesses.size() && !given[field]) {
              guesses[field].see(text);
            }
            ++field;
          });
        if (status != scan_status::RECORD) {
          break;  // not reached: the block holds complete records only
        }
        expect_fields(field, row_);
        ++row_;
      }
      begin_ = records_end;
    }
  }

  /** @brief Throws when data row `row` (from 0) of the open file has not one field per column. */
  void expect_fields(std::size_t fields, std::size_t row) const {
    SPILLWAY_EXPECTS(fields == header_.size(),
                     "CSV file '" + path() + "', data row " + std::to_string(row + 1) + ": " +
                       std::to_string(fields) + " fields, the header has " +
                       std::to_string(header_.size()),
                     corruption_error);
  }

  [[noreturn]] void fail_value(std::size_t row, std::size_t column, field_text const& field) const {
    SPILLWAY_FAIL("CSV file '" + path() + "', data row " + std::to_string(row + 1) + ", column '" +
                    header_[column] + "': '" + std::string{field.raw} + "' is not a " +
                    to_string(file_schema_[column].type) + " value",
                  io_error);
  }

  /** @brief Parses the complete records in `[begin, end)` of the block into a table. */
  std::unique_ptr<table> parse_block(std::size_t begin, std::size_t end) {
    std::size_t const columns = header_.size();
    // Pass 1: rows, nulls and characters per selected column.
    std::size_t rows = 0;
    std::vector<bool> has_nulls(columns, false);
    std::vector<std::size_t> chars(columns, 0);
    char const* position = block() + begin;
    while (true) {
      std::size_t field = 0;
      auto const status = detail::csv::scan_record(
        &position, block() + end, true, options_.delimiter, [&](field_text const& text) {
          if (field < columns && output_of_[field] != NOT_SELECTED) {
            if (!text.quoted && text.raw.empty()) {
              has_nulls[field] = true;
            } else if (file_schema_[field].type.id() == type_id::STRING) {
              chars[field] += detail::csv::unescaped_size(text);
            }
          }
          ++field;
        });
      if (status != scan_status::RECORD) {
        break;
      }
      expect_fields(field, row_ + rows);
      ++rows;
    }
    // The output columns, exactly sized.
    std::vector<std::unique_ptr<column>> outputs(selected_.size());
    for (std::size_t i = 0; i < selected_.size(); ++i) {
      std::size_t const source = selected_[i];
      auto const state = has_nulls[source] ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
      auto const type  = file_schema_[source].type;
      outputs[i]       = is_fixed_width(type)
                           ? make_fixed_width_column(type, rows, state, stream_, mrs_.output())
                           : make_strings_column(rows, chars[source], state, stream_, mrs_.output());
      if (!is_fixed_width(type)) {
        outputs[i]->mutable_offsets()[0] = 0;
      }
    }
    // Pass 2: the values.
    std::vector<std::int64_t> char_at(selected_.size(), 0);
    position = block() + begin;
    for (std::size_t row = 0; row < rows; ++row) {
      std::size_t field = 0;
      detail::csv::scan_record(
        &position, block() + end, true, options_.delimiter, [&](field_text const& text) {
          std::size_t const out = output_of_[field];
          if (out != NOT_SELECTED) {
            store(*outputs[out], row, field, text, char_at[out]);
          }
          ++field;
        });
    }
    for (auto& output : outputs) {
      if (output->nullable()) {
        output->recount_nulls();
      }
    }
    row_ += rows;
    return std::make_unique<table>(std::move(outputs));
  }

  void store(column& output,
             std::size_t row,
             std::size_t field,
             field_text const& text,
             std::int64_t& char_at) const {
    auto const type = output.type();
    bool const null = !text.quoted && text.raw.empty();
    if (type.id() == type_id::STRING) {
      if (!null) {
        char_at += static_cast<std::int64_t>(
          detail::csv::unescape_to(text, output.mutable_chars() + char_at));
      } else {
        set_bit(output.mutable_null_mask(), row, false);
      }
      output.mutable_offsets()[row + 1] = char_at;
      return;
    }
    if (null) {
      set_bit(output.mutable_null_mask(), row, false);
      std::memset(output.mutable_data<std::uint8_t>() + row * size_of(type), 0, size_of(type));
      return;
    }
    std::string unescaped;
    std::string_view value = text.raw;
    if (text.escaped) {
      unescaped.resize(detail::csv::unescaped_size(text));
      detail::csv::unescape_to(text, unescaped.data());
      value = unescaped;
    }
    std::size_t const file_row = row_ + row;
    switch (type.id()) {
      case type_id::BOOL8: {
        auto const parsed = detail::csv::parse_bool(value);
        if (!parsed) {
          fail_value(file_row, field, text);
        }
        output.mutable_data<std::uint8_t>()[row] = *parsed ? 1 : 0;
        return;
      }
      case type_id::TIMESTAMP: {
        auto const parsed = detail::csv::parse_timestamp(value);
        auto const in_unit =
          parsed ? detail::csv::timestamp_in(*parsed, type.unit()) : std::optional<std::int64_t>{};
        if (!in_unit) {
          // An integer is taken as a count of the unit, as other tools write timestamps.
          auto const count = detail::csv::parse_number<std::int64_t>(value);
          if (!count) {
            fail_value(file_row, field, text);
          }
          output.mutable_data<std::int64_t>()[row] = *count;
          return;
        }
        output.mutable_data<std::int64_t>()[row] = *in_unit;
        return;
      }
      case type_id::DATE32:
      case type_id::DATE64:
      case type_id::TIME32:
      case type_id::TIME64:
      case type_id::DURATION: {
        auto const parsed = detail::csv::parse_temporal(value, type);
        if (!parsed) {
          fail_value(file_row, field, text);
        }
        visit_fixed_width(type, [&]<typename T>() {
          if constexpr (std::is_arithmetic_v<T>) {
            output.mutable_data<T>()[row] = static_cast<T>(*parsed);
          }
        });
        return;
      }
      case type_id::DECIMAL32:
      case type_id::DECIMAL64:
      case type_id::DECIMAL128:
      case type_id::DECIMAL256:
        if (!parse_decimal(value, type, output.mutable_data<std::byte>() + row * size_of(type))) {
          fail_value(file_row, field, text);
        }
        return;
      default:
        visit_fixed_width(type, [&]<typename T>() {
          if constexpr (std::is_arithmetic_v<T>) {
            auto const parsed = detail::csv::parse_number<T>(value);
            if (!parsed) {
              fail_value(file_row, field, text);
            }
            output.mutable_data<T>()[row] = *parsed;
          }
        });
    }
  }

  std::vector<std::string> files_;
  csv_read_options options_;
  stream_view stream_;
  memory_resources mrs_;
  std::size_t capacity_ = 0;
  buffer block_;
  std::size_t begin_      = 0;  ///< the first unparsed byte of the block
  std::size_t end_        = 0;  ///< the end of the text in the block
  bool at_eof_            = false;
  std::FILE* file_        = nullptr;
  std::size_t file_index_ = 0;
  std::size_t row_        = 0;  ///< data rows of this file returned so far
  std::vector<std::string> header_;
  table_schema file_schema_;
  std::vector<std::size_t> selected_;
  std::vector<std::size_t> output_of_;
  table_schema schema_;
};

}  // namespace

std::unique_ptr<batch_reader> open_csv(std::string const& source,
                                       csv_read_options const& options,
                                       stream_view stream,
                                       memory_resources mrs) {
  return detail::open_decoding_on_host(
    [&](memory_resources decoding) {
      return std::make_unique<csv_reader>(expand_dataset(source), options, stream, decoding);
    },
    stream,
    mrs,
    "open_csv('" + source + "')");
}

std::unique_ptr<table> read_csv(std::string const& source,
                                csv_read_options const& options,
                                stream_view stream,
                                memory_resources mrs) {
  return detail::read_whole(
    [&](memory_resources reading) { return open_csv(source, options, stream, reading); },
    stream,
    mrs,
    "read_csv('" + source + "')");
}

}  // namespace spillway
