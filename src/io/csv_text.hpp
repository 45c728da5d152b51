/**
 * @file csv_text.hpp
 * @brief The text forms of CSV values (numbers, booleans, ISO 8601 timestamps) and the record
 * tokenizer shared by the CSV reader and writer.
 */
#pragma once

#include <spillway/table/data_type.hpp>

#include <charconv>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <system_error>

namespace spillway::detail::csv {

/** @brief One field of a record: its raw text and whether it was quoted. */
struct field_text {
  std::string_view raw;  ///< between the quotes when quoted, with `""` not yet undone
  bool quoted  = false;
  bool escaped = false;  ///< the quoted text holds `""`, so `raw` must be unescaped
};

/** @return the unescaped length of `field` */
inline std::size_t unescaped_size(field_text const& field) noexcept {
  if (!field.escaped) {
    return field.raw.size();
  }
  std::size_t size = 0;
  for (std::size_t i = 0; i < field.raw.size(); ++i, ++size) {
    if (field.raw[i] == '"') {
      ++i;  // `""` is one quote
    }
  }
  return size;
}

/** @brief Copies the unescaped text of `field` to `out`; returns the bytes written. */
inline std::size_t unescape_to(field_text const& field, char* out) noexcept {
  std::size_t size = 0;
  for (std::size_t i = 0; i < field.raw.size(); ++i) {
    out[size++] = field.raw[i];
    if (field.escaped && field.raw[i] == '"') {
      ++i;
    }
  }
  return size;
}

/** @brief The outcome of scanning one record. */
enum class scan_status : std::uint8_t {
  RECORD,      ///< a complete record was scanned
  INCOMPLETE,  ///< the text ends inside the record and more may follow
  END,         ///< no text left
  MALFORMED,   ///< a quote in the wrong place
};

/**
 * @brief Scans one record starting at `*position`, calling `on_field(field_text)` per field; on
 * RECORD, `*position` moves past the record's line end.
 * @param at_eof whether `end` is the end of the file (a last record without a newline counts)
 */
template <typename OnField>
scan_status scan_record(
  char const** position, char const* end, bool at_eof, char delimiter, OnField&& on_field) {
  char const* p = *position;
  if (p == end) {
    return scan_status::END;
  }
  while (true) {
    field_text field;
    if (p < end && *p == '"') {
      field.quoted      = true;
      char const* start = ++p;
      while (true) {
        if (p == end) {
          return at_eof ? scan_status::MALFORMED : scan_status::INCOMPLETE;
        }
        if (*p == '"') {
          if (p + 1 == end && !at_eof) {
            return scan_status::INCOMPLETE;
          }
          if (p + 1 < end && p[1] == '"') {
            field.escaped = true;
            p += 2;
            continue;
          }
          break;
        }
        ++p;
      }
      field.raw = std::string_view{start, static_cast<std::size_t>(p - start)};
      ++p;  // the closing quote
      if (p < end && *p != delimiter && *p != '\n' && *p != '\r') {
        return scan_status::MALFORMED;
      }
    } else {
      char const* start = p;
      while (p < end && *p != delimiter && *p != '\n' && *p != '\r') {
        if (*p == '"') {
          return scan_status::MALFORMED;
        }
        ++p;
      }
      field.raw = std::string_view{start, static_cast<std::size_t>(p - start)};
    }
    if (p == end) {
      if (!at_eof) {
        return scan_status::INCOMPLETE;
      }
      on_field(field);
      *position = p;
      return scan_status::RECORD;
    }
    if (*p == delimiter) {
      on_field(field);
      ++p;
      continue;
    }
    // A line end: LF or CRLF (a lone CR ends the line too).
    if (*p == '\r') {
      if (p + 1 == end && !at_eof) {
        return scan_status::INCOMPLETE;
      }
      ++p;
      if (p < end && *p == '\n') {
        ++p;
      }
    } else {
      ++p;
    }
    on_field(field);
    *position = p;
    return scan_status::RECORD;
  }
}

/** @return the number of `unit`s in a second */
constexpr std::int64_t units_per_second(time_unit unit) noexcept {
  switch (unit) {
    case time_unit::SECOND:
      return 1;
    case time_unit::MILLISECOND:
      return 1'000;
    case time_unit::MICROSECOND:
      return 1'000'000;
    case time_unit::NANOSECOND:
      return 1'000'000'000;
  }
  return 1;
}

/** @return the fraction digits written for `unit` */
constexpr int fraction_digits(time_unit unit) noexcept {
  switch (unit) {
    case time_unit::SECOND:
      return 0;
    case time_unit::MILLISECOND:
      return 3;
    case time_unit::MICROSECOND:
      return 6;
    case time_unit::NANOSECOND:
      return 9;
  }
  return 0;
}

/** @brief Appends `value` (a count of `unit` since the epoch) as `YYYY-MM-DDTHH:MM:SS[.f]`. */
void append_timestamp(std::string& out, std::int64_t value, time_unit unit);

/** @brief Appends `days` since the epoch as `YYYY-MM-DD`. */
void append_date(std::string& out, std::int64_t days);

/** @brief Appends `value` (a count of `unit` since midnight) as `HH:MM:SS[.f]`. */
void append_time_of_day(std::string& out, std::int64_t value, time_unit unit);

/**
 * @return the value of `text` as a column of `type` (DATE32, DATE64, TIME32, TIME64 or
 * DURATION) holds it: a date as `YYYY-MM-DD`, a time of day as `HH:MM:SS[.f]`, or any of them
 * as an integer count of its unit (days for DATE32, milliseconds for DATE64); nothing when it is
 * none of these or does not fit
 */
std::optional<std::int64_t> parse_temporal(std::string_view text, data_type type) noexcept;

/** @brief A parsed ISO 8601 timestamp: nanoseconds since the epoch and the fraction digits. */
struct parsed_timestamp {
  std::int64_t seconds     = 0;  ///< whole seconds since the epoch
  std::int64_t nanoseconds = 0;  ///< the fraction, in ns
  int digits               = 0;  ///< fraction digits present
};

/** @return the timestamp in `text`, or nothing when it is not `YYYY-MM-DD[T ]HH:MM:SS[.f{1,9}]` */
std::optional<parsed_timestamp> parse_timestamp(std::string_view text) noexcept;

/** @return `parsed` in `unit`, or nothing when the fraction is finer than `unit` or overflows */
std::optional<std::int64_t> timestamp_in(parsed_timestamp const& parsed, time_unit unit) noexcept;

/** @return the unit whose fraction digits hold `digits` */
time_unit unit_for_digits(int digits) noexcept;

/** @return `text` as T (an integer or floating type), or nothing */
template <typename T>
std::optional<T> parse_number(std::string_view text) noexcept {
  T value{};
  char const* first = text.data();
  char const* last  = text.data() + text.size();
  // from_chars rejects a leading '+'; accept it as writers elsewhere produce it (not "+-1").
  if (first != last && *first == '+') {
    ++first;
    if (first != last && (*first == '-' || *first == '+')) {
      return std::nullopt;
    }
  }
  auto const [end, error] = std::from_chars(first, last, value);
  if (error != std::errc{} || end != last || first == last) {
    return std::nullopt;
  }
  return value;
}

/** @return `text` as a boolean (`true`/`false` in any case, `1`/`0`), or nothing */
std::optional<bool> parse_bool(std::string_view text) noexcept;

}  // namespace spillway::detail::csv
