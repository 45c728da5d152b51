/**
 * @file csv.cpp
 * @brief CSV reading and writing without Arrow: a quoting-aware tokenizer, text forms of every
 * type, and a streaming reader that stages raw text in the temporary resource.
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
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace spillway {
namespace detail::csv {
namespace {

/** @return days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
constexpr std::int64_t days_from_civil(std::int64_t year, unsigned month, unsigned day) noexcept {
  year -= month <= 2 ? 1 : 0;
  std::int64_t const era     = (year >= 0 ? year : year - 399) / 400;
  auto const year_of_era     = static_cast<unsigned>(year - era * 400);
  unsigned const day_of_year = (153 * (month > 2 ? month - 3 : month + 9) + 2) / 5 + day - 1;
  unsigned const day_of_era = year_of_era * 365 + year_of_era / 4 - year_of_era / 100 + day_of_year;
  return era * 146097 + static_cast<std::int64_t>(day_of_era) - 719468;
}

struct civil_date {
  std::int64_t year;
  unsigned month;
  unsigned day;
};

/** @return the date `days` after 1970-01-01 (H. Hinnant's algorithm). */
constexpr civil_date civil_from_days(std::int64_t days) noexcept {
  days += 719468;
  std::int64_t const era = (days >= 0 ? days : days - 146096) / 146097;
  auto const day_of_era  = static_cast<unsigned>(days - era * 146097);
  unsigned const year_of_era =
    (day_of_era - day_of_era / 1460 + day_of_era / 36524 - day_of_era / 146096) / 365;
  unsigned const day_of_year =
    day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
  unsigned const mp    = (5 * day_of_year + 2) / 153;
  unsigned const day   = day_of_year - (153 * mp + 2) / 5 + 1;
  unsigned const month = mp < 10 ? mp + 3 : mp - 9;
  std::int64_t const year =
    static_cast<std::int64_t>(year_of_era) + era * 400 + (month <= 2 ? 1 : 0);
  return {year, month, day};
}

constexpr std::int64_t floor_div(std::int64_t value, std::int64_t divisor) noexcept {
  std::int64_t const quotient = value / divisor;
  return (value % divisor != 0 && ((value < 0) != (divisor < 0))) ? quotient - 1 : quotient;
}

/** @brief Reads exactly `count` digits at `*p` into `out`. */
bool read_digits(char const*& p, char const* end, int count, std::int64_t& out) noexcept {
  out = 0;
  for (int i = 0; i < count; ++i, ++p) {
    if (p == end || *p < '0' || *p > '9') {
      return false;
    }
    out = out * 10 + (*p - '0');
  }
  return true;
}

bool expect_char(char const*& p, char const* end, char c) noexcept {
  if (p == end || *p != c) {
    return false;
  }
  ++p;
  return true;
}

}  // namespace

void append_timestamp(std::string& out, std::int64_t value, time_unit unit) {
  std::int64_t const per_second = units_per_second(unit);
  std::int64_t const seconds    = floor_div(value, per_second);
  std::int64_t const fraction   = value - seconds * per_second;
  std::int64_t const days       = floor_div(seconds, 86400);
  std::int64_t const of_day     = seconds - days * 86400;
  auto const date               = civil_from_days(days);
  std::array<char, 64> text{};
  int length = std::snprintf(text.data(),
                             text.size(),
                             "%04lld-%02u-%02uT%02lld:%02lld:%02lld",
                             static_cast<long long>(date.year),
                             date.month,
                             date.day,
                             static_cast<long long>(of_day / 3600),
                             static_cast<long long>(of_day / 60 % 60),
                             static_cast<long long>(of_day % 60));
  out.append(text.data(), static_cast<std::size_t>(length));
  int const digits = fraction_digits(unit);
  if (digits > 0) {
    length =
      std::snprintf(text.data(), text.size(), ".%0*lld", digits, static_cast<long long>(fraction));
    out.append(text.data(), static_cast<std::size_t>(length));
  }
}

void append_date(std::string& out, std::int64_t days) {
  auto const date = civil_from_days(days);
  std::array<char, 32> text{};
  int const length = std::snprintf(text.data(),
                                   text.size(),
                                   "%04lld-%02u-%02u",
                                   static_cast<long long>(date.year),
                                   date.month,
                                   date.day);
  out.append(text.data(), static_cast<std::size_t>(length));
}

void append_time_of_day(std::string& out, std::int64_t value, time_unit unit) {
  std::string stamp;
  append_timestamp(stamp, value, unit);
  out.append(stamp, stamp.find('T') + 1);  // the date is 1970-01-01 for a time of day
}

std::optional<std::int64_t> parse_temporal(std::string_view text, data_type type) noexcept {
  constexpr std::int64_t SECONDS_PER_DAY = 86400;
  std::optional<std::int64_t> result;
  if (type.id() == type_id::DATE32 || type.id() == type_id::DATE64) {
    std::array<char, 64> stamp{};
    if (text.size() + 10 < stamp.size()) {
      std::memcpy(stamp.data(), text.data(), text.size());
      std::memcpy(stamp.data() + text.size(), "T00:00:00", 9);
      auto const parsed = parse_timestamp({stamp.data(), text.size() + 9});
      if (parsed && parsed->seconds % SECONDS_PER_DAY == 0) {
        std::int64_t const days = parsed->seconds / SECONDS_PER_DAY;
        result = type.id() == type_id::DATE32 ? days : days * SECONDS_PER_DAY * 1000;
      }
    }
  } else if (type.id() == type_id::TIME32 || type.id() == type_id::TIME64) {
    std::array<char, 64> stamp{};
    if (text.size() + 12 < stamp.size()) {
      std::memcpy(stamp.data(), "1970-01-01T", 11);
      std::memcpy(stamp.data() + 11, text.data(), text.size());
      auto const parsed = parse_timestamp({stamp.data(), text.size() + 11});
      if (parsed && parsed->seconds >= 0 && parsed->seconds < SECONDS_PER_DAY) {
        result = timestamp_in(*parsed, type.unit());
      }
    }
  }
  if (!result) {
    result = parse_number<std::int64_t>(text);
  }
  if (result && size_of(type) == 4 &&
      (*result < std::numeric_limits<std::int32_t>::min() ||
       *result > std::numeric_limits<std::int32_t>::max())) {
    return std::nullopt;
  }
  return result;
}

std::optional<parsed_timestamp> parse_timestamp(std::string_view text) noexcept {
  char const* p   = text.data();
  char const* end = text.data() + text.size();
  bool negative   = false;
  if (p != end && *p == '-') {
    negative = true;
    ++p;
  }
  // The year: four or more digits.
  std::int64_t year = 0;
  int year_digits   = 0;
  while (p != end && *p >= '0' && *p <= '9' && year_digits < 12) {
    year = year * 10 + (*p - '0');
    ++p;
    ++year_digits;
  }
  if (year_digits < 4) {
    return std::nullopt;
  }
  year               = negative ? -year : year;
  std::int64_t month = 0, day = 0, hour = 0, minute = 0, second = 0;
  if (!expect_char(p, end, '-') || !read_digits(p, end, 2, month) || !expect_char(p, end, '-') ||
      !read_digits(p, end, 2, day)) {
    return std::nullopt;
  }
  if (p == end || (*p != 'T' && *p != ' ')) {
    return std::nullopt;
  }
  ++p;
  if (!read_digits(p, end, 2, hour) || !expect_char(p, end, ':') ||
      !read_digits(p, end, 2, minute) || !expect_char(p, end, ':') ||
      !read_digits(p, end, 2, second)) {
    return std::nullopt;
  }
  if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || minute > 59 || second > 60) {
    return std::nullopt;
  }
  parsed_timestamp result;
  if (p != end && *p == '.') {
    ++p;
    std::int64_t fraction = 0;
    while (p != end && *p >= '0' && *p <= '9') {
      if (result.digits == 9) {
        return std::nullopt;
      }
      fraction = fraction * 10 + (*p - '0');
      ++p;
      ++result.digits;
    }
    if (result.digits == 0) {
      return std::nullopt;
    }
    for (int i = result.digits; i < 9; ++i) {
      fraction *= 10;
    }
    result.nanoseconds = fraction;
  }
  if (p != end && *p == 'Z') {
    ++p;
  }
  if (p != end) {
    return std::nullopt;
  }
  std::int64_t const days =
    days_from_civil(year, static_cast<unsigned>(month), static_cast<unsigned>(day));
  if (__builtin_mul_overflow(days, 86400, &result.seconds) ||
      __builtin_add_overflow(result.seconds, hour * 3600 + minute * 60 + second, &result.seconds)) {
    return std::nullopt;
  }
  return result;
}

std::optional<std::int64_t> timestamp_in(parsed_timestamp const& parsed, time_unit unit) noexcept {
  std::int64_t const per_second  = units_per_second(unit);
  std::int64_t const ns_per_unit = 1'000'000'000 / per_second;
  if (parsed.nanoseconds % ns_per_unit != 0) {
    return std::nullopt;
  }
  std::int64_t result = 0;
  if (__builtin_mul_overflow(parsed.seconds, per_second, &result) ||
      __builtin_add_overflow(result, parsed.nanoseconds / ns_per_unit, &result)) {
    return std::nullopt;
  }
  return result;
}

time_unit unit_for_digits(int digits) noexcept {
  if (digits == 0) {
    return time_unit::SECOND;
  }
  if (digits <= 3) {
    return time_unit::MILLISECOND;
  }
  if (digits <= 6) {
    return time_unit::MICROSECOND;
  }
  return time_unit::NANOSECOND;
}

std::optional<bool> parse_bool(std::string_view text) noexcept {
  auto const equals = [&](std::string_view word) {
    return text.size() == word.size() &&
           std::equal(text.begin(), text.end(), word.begin(), [](char a, char b) {
             return (a | 0x20) == b;
           });
  };
  if (equals("true") || text == "1") {
    return true;
  }
  if (equals("false") || text == "0") {
    return false;
  }
  return std::nullopt;
}

}  // namespace detail::csv

namespace {

using detail::csv::field_text;
using detail::csv::scan_status;

/** @brief Appends `text` to `out`, quoted when it needs to be. */
void append_string_field(std::string& out, std::string_view text, char delimiter) {
  bool const needs_quotes =
    text.empty() || text.find_first_of(std::string{delimiter} + "\"\r\n") != std::string_view::npos;
  if (!needs_quotes) {
    out.append(text);
    return;
  }
  out.push_back('"');
  for (char const c : text) {
    out.push_back(c);
    if (c == '"') {
      out.push_back('"');
    }
  }
  out.push_back('"');
}

/** @brief Appends a number in its shortest exact form. */
template <typename T>
void append_number(std::string& out, T value) {
  std::array<char, 64> text{};
  auto const result = std::to_chars(text.data(), text.data() + text.size(), value);
  out.append(text.data(), result.ptr);
}

/** @brief Writes CSV to one file. */
class csv_file_writer final : public detail::format_writer {
 public:
  csv_file_writer(std::string path, table_schema schema, csv_write_options const& options)
    : path_(std::move(path)), schema_(std::move(schema)), delimiter_(options.delimiter) {
    SPILLWAY_EXPECTS(delimiter_ != '"' && delimiter_ != '\n' && delimiter_ != '\r',
                     std::string{"csv: the delimiter cannot be a quote or a line end"},
                     invalid_argument);
    for (auto const& column : schema_) {
      // CSV is text: bytes that are not text have no faithful field there, nor has a nested
      // value (held encoded, as BINARY).
      SPILLWAY_EXPECTS(!column.nested || column.type.id() != type_id::BINARY,
                       "csv: column '" + column.name + "' is " + column.nested->arrow_type +
                         ", which CSV cannot hold; write it as Parquet or Arrow IPC",
                       not_supported);
      SPILLWAY_EXPECTS(column.type.id() != type_id::BINARY,
                       "csv: column '" + column.name +
                         "' is binary, which CSV cannot hold; write it as Parquet or Arrow IPC",
                       not_supported);
    }
    file_ = std::fopen(path_.c_str(), "wb");
    SPILLWAY_EXPECTS(file_ != nullptr,
                     "cannot create CSV file '" + path_ + "': " + std::strerror(errno),
                     io_error);
    for (std::size_t i = 0; i < schema_.size(); ++i) {
      if (i > 0) {
        pending_.push_back(delimiter_);
      }
      append_string_field(pending_, schema_[i].name, delimiter_);
    }
    pending_.push_back('\n');
  }

  ~csv_file_writer() override {
    if (file_ != nullptr) {
      std::fclose(file_);
    }
  }
  csv_file_writer(csv_file_writer const&)            = delete;
  csv_file_writer& operator=(csv_file_writer const&) = delete;
  csv_file_writer(csv_file_writer&&)                 = delete;
  csv_file_writer& operator=(csv_file_writer&&)      = delete;

  void write(table_view const& input, std::shared_ptr<void const> const& /*owner*/) override {
    for (std::size_t row = 0; row < input.num_rows(); ++row) {
      for (std::size_t c = 0; c < input.num_columns(); ++c) {
        if (c > 0) {
          pending_.push_back(delimiter_);
        }
        append_value(input.column(c), row);
      }
      pending_.push_back('\n');
      if (pending_.size() >= FLUSH_BYTES) {
        flush();
      }
    }
    flush();
  }

  [[nodiscard]] std::size_t bytes_written() const override { return written_ + pending_.size(); }

  void close() override {
    flush();
    int const status = std::fclose(file_);
    file_            = nullptr;
    SPILLWAY_EXPECTS(
      status == 0, "cannot close CSV file '" + path_ + "': " + std::strerror(errno), io_error);
  }

 private:
  /// Text is handed to the file in pieces of about this size.
  static constexpr std::size_t FLUSH_BYTES = 1U << 20U;

  void append_value(column_view const& view, std::size_t row) {
    if (view.is_null(row)) {
      return;  // null: an empty unquoted field
    }
    auto const type = view.type();
    switch (type.id()) {
      case type_id::STRING:
        append_string_field(pending_, view.string_at(row), delimiter_);
        return;
      case type_id::BOOL8:
        pending_.append(view.data<std::uint8_t>()[row] != 0 ? "true" : "false");
        return;
      case type_id::TIMESTAMP:
        detail::csv::append_timestamp(pending_, view.data<std::int64_t>()[row], type.unit());
        return;
      case type_id::DATE32:
        detail::csv::append_date(pending_, view.data<std::int32_t>()[row]);
        return;
      case type_id::DATE64: {
        constexpr std::int64_t MS_PER_DAY = 86'400'000;
        std::int64_t const ms             = view.data<std::int64_t>()[row];
        detail::csv::append_date(pending_, ms / MS_PER_DAY - (ms % MS_PER_DAY < 0 ? 1 : 0));
        return;
      }
      case type_id::TIME32:
        detail::csv::append_time_of_day(pending_, view.data<std::int32_t>()[row], type.unit());
        return;
      case type_id::TIME64:
        detail::csv::append_time_of_day(pending_, view.data<std::int64_t>()[row], type.unit());
        return;
      case type_id::DECIMAL32:
      case type_id::DECIMAL64:
      case type_id::DECIMAL128:
      case type_id::DECIMAL256:
        append_decimal(
          pending_,
          type,
          static_cast<std::byte const*>(view.head()) + (view.offset() + row) * size_of(type));
        return;
      default:
        visit_fixed_width(type, [&]<typename T>() {
          if constexpr (std::is_arithmetic_v<T>) {
            append_number(pending_, view.data<T>()[row]);
          }
        });
    }
  }

  void flush() {
    if (pending_.empty()) {
      return;
    }
    std::size_t const count = std::fwrite(pending_.data(), 1, pending_.size(), file_);
    SPILLWAY_EXPECTS(count == pending_.size(),
                     "cannot write CSV file '" + path_ + "': " + std::strerror(errno),
                     io_error);
    written_ += count;
    pending_.clear();
  }

  std::string path_;
  table_schema schema_;
  char delimiter_;
  std::FILE* file_ = nullptr;
  std::string pending_;
  std::size_t written_ = 0;
};

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

namespace detail {
std::unique_ptr<format_writer> make_csv_writer(std::string const& path,
                                               table_schema const& schema,
                                               csv_write_options const& options,
                                               stream_view,
                                               memory_resources) {
  return std::make_unique<csv_file_writer>(path, schema, options);
}
}  // namespace detail

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

void write_csv(table_view const& input,
               std::vector<std::string> const& names,
               std::string const& path,
               csv_write_options const& options,
               stream_view stream,
               memory_resources mrs) {
  std::string const what = "write_csv('" + path + "')";
  auto const schema      = detail::schema_of(input, names, what);
  auto const on_host     = detail::host_copy_if_on_device(input, stream, mrs, what);
  detail::write_one_file(
    on_host ? on_host->view() : input, path, [&](std::string const& temporary) {
      return detail::make_csv_writer(temporary, schema, options, stream, mrs);
    });
}

}  // namespace spillway
