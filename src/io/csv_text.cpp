/**
 * @file csv_text.cpp
 * @brief The text forms of CSV values: ISO 8601 dates, times and timestamps, and booleans.
 */
#include "io/csv_text.hpp"

#include <spillway/table/data_type.hpp>

#include <array>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <string_view>

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

}  // namespace spillway
