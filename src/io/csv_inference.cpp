/**
 * @file csv_inference.cpp
 * @brief CSV column types from the text of their values.
 */
#include "io/csv_inference.hpp"

#include <algorithm>
#include <cstddef>

namespace spillway::detail::csv {
namespace {

/// The largest integer magnitude a double holds exactly.
constexpr std::int64_t EXACT_IN_DOUBLE = std::int64_t{1} << 53;

/** @return whether `text` is an integer: an optional sign and decimal digits only */
bool is_integer_text(std::string_view text) noexcept {
  std::size_t const first = !text.empty() && (text[0] == '-' || text[0] == '+') ? 1 : 0;
  return text.size() > first && std::all_of(text.begin() + static_cast<std::ptrdiff_t>(first),
                                            text.end(),
                                            [](char c) { return c >= '0' && c <= '9'; });
}

/** @return whether `lhs` is earlier than `rhs` */
bool before(parsed_timestamp const& lhs, parsed_timestamp const& rhs) noexcept {
  return lhs.seconds < rhs.seconds ||
         (lhs.seconds == rhs.seconds && lhs.nanoseconds < rhs.nanoseconds);
}

}  // namespace

void column_guess::see(field_text const& field) {
  if (!field.quoted && field.raw.empty()) {
    return;  // null
  }
  if (field.quoted) {
    // Only text is quoted by writers; a quoted value stays a string.
    any_value_ = true;
    can_bool_ = can_int64_ = can_uint64_ = can_double_ = can_date_ = can_time_ = false;
    return;
  }
  auto const text = field.raw;
  if (can_bool_) {
    can_bool_ = text == "true" || text == "false" || text == "TRUE" || text == "FALSE" ||
                text == "True" || text == "False";
  }
  if (can_int64_ || can_uint64_ || can_double_) {
    see_number(text);
  }
  if (can_date_) {
    can_date_ =
      !is_integer_text(text) && parse_temporal(text, data_type{type_id::DATE32}).has_value();
  }
  if (can_time_) {
    see_time(text);
  }
  any_value_ = true;
}

data_type column_guess::type() const {
  if (!any_value_) {
    return type_id::STRING;
  }
  if (can_bool_) {
    return type_id::BOOL8;
  }
  if (can_int64_) {
    return type_id::INT64;
  }
  if (can_uint64_) {
    return type_id::UINT64;
  }
  if (can_double_) {
    return type_id::FLOAT64;
  }
  if (can_date_) {
    return type_id::DATE32;
  }
  if (can_time_) {
    // Every timestamp seen fits the unit when the earliest and the latest do.
    auto const unit = unit_for_digits(time_digits_);
    if (timestamp_in(earliest_, unit) && timestamp_in(latest_, unit)) {
      return data_type{type_id::TIMESTAMP, unit};
    }
  }
  return type_id::STRING;
}

void column_guess::see_number(std::string_view text) {
  if (!is_integer_text(text)) {
    can_int64_ = can_uint64_ = false;
    can_double_              = can_double_ && parse_number<double>(text).has_value();
    return;
  }
  if (auto const value = parse_number<std::int64_t>(text)) {
    can_uint64_ = can_uint64_ && text[0] != '-';  // "-0" is no uint64
    can_double_ = can_double_ && *value <= EXACT_IN_DOUBLE && *value >= -EXACT_IN_DOUBLE;
    return;
  }
  // Beyond int64: uint64 when it fits; never a double, which would round it.
  can_int64_  = false;
  can_double_ = false;
  can_uint64_ = can_uint64_ && parse_number<std::uint64_t>(text).has_value();
}

void column_guess::see_time(std::string_view text) {
  auto const parsed = parse_timestamp(text);
  if (!parsed) {
    can_time_ = false;
    return;
  }
  // Every value seen so far was a timestamp too, so `earliest_` and `latest_` hold when
  // `any_value_`.
  if (!any_value_ || before(*parsed, earliest_)) {
    earliest_ = *parsed;
  }
  if (!any_value_ || before(latest_, *parsed)) {
    latest_ = *parsed;
  }
  time_digits_ = std::max(time_digits_, parsed->digits);
}

}  // namespace spillway::detail::csv
