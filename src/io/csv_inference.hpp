/**
 * @file csv_inference.hpp
 * @brief The type of a CSV column, inferred from the text of its values.
 */
#pragma once

#include "io/csv_text.hpp"

#include <spillway/table/data_type.hpp>

#include <cstdint>
#include <string_view>

namespace spillway::detail::csv {

/**
 * @brief What inference learns about one column from the values it is shown. `type()` is the
 * first of BOOL8, INT64, UINT64, FLOAT64, DATE32 (`YYYY-MM-DD`), TIMESTAMP (unit from the most
 * fraction digits) and STRING that parses every value shown, as the CSV reader then parses it: once
 * it has been shown every value of a column, no value can contradict the type. No integer becomes a
 * FLOAT64 that would round it: integers beyond INT64 make a UINT64 column when they all fit, else a
 * STRING one, as do integers of more than 53 bits beside fractions.
 */
class column_guess {
 public:
  /** @brief Takes `field` into account (an empty unquoted field is a null, which fits any type). */
  void see(field_text const& field);

  /** @return the type of the column of the values seen; STRING when none was seen */
  [[nodiscard]] data_type type() const;

 private:
  void see_number(std::string_view text);
  void see_time(std::string_view text);

  bool any_value_  = false;
  bool can_bool_   = true;
  bool can_int64_  = true;
  bool can_uint64_ = true;
  bool can_double_ = true;
  bool can_date_   = true;
  bool can_time_   = true;
  int time_digits_ = 0;
  parsed_timestamp earliest_;  ///< of the timestamps seen, while `can_time_`
  parsed_timestamp latest_;
};

}  // namespace spillway::detail::csv
