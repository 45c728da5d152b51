/**
 * @file nested_codec.hpp
 * @brief What the encoder and the decoder of nested values share (nested_encoding.cpp,
 * nested_decoding.cpp): the markers of the encoding, the leaf types' kinds, the integer bit
 * helpers and the exact trailer's sizes.
 */
#pragma once

#include <arrow/array.h>
#include <arrow/type.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <string>

namespace spillway::detail::nested_codec {

inline constexpr std::uint8_t END        = 0x00;  ///< no more elements of a list
inline constexpr std::uint8_t VALUE      = 0x01;  ///< a value follows
inline constexpr std::uint8_t NAN_VALUE  = 0x02;  ///< a NaN follows: its bits, big-endian
inline constexpr std::uint8_t NULL_VALUE = 0x03;  ///< null: after every value
inline constexpr std::uint8_t ESCAPE     = 0x01;  ///< in a string, 0x01 x stands for the byte x - 1

inline bool has_list_offsets(arrow::Type::type id) noexcept {
  return id == arrow::Type::LIST || id == arrow::Type::LARGE_LIST || id == arrow::Type::MAP;
}

/// List views: an offset and a size per list, encoded as the list they view.
inline bool is_list_view_type(arrow::Type::type id) noexcept {
  return id == arrow::Type::LIST_VIEW || id == arrow::Type::LARGE_LIST_VIEW;
}

/// Intervals: encoded by the length DuckDB orders them by (see nested_encoding.hpp).
inline bool is_interval_type(arrow::Type::type id) noexcept {
  return id == arrow::Type::INTERVAL_MONTHS || id == arrow::Type::INTERVAL_DAY_TIME ||
         id == arrow::Type::INTERVAL_MONTH_DAY_NANO;
}

/// Microseconds in DuckDB's day and month (30 days) of an interval; milliseconds in a day.
inline constexpr std::int64_t MICROS_PER_DAY   = 86'400'000'000;
inline constexpr std::int64_t MICROS_PER_MONTH = 30 * MICROS_PER_DAY;
inline constexpr std::int64_t MILLIS_PER_DAY   = 86'400'000;
/// Bytes of a month_day_nano_interval's length in microseconds (it takes at most 74 bits).
inline constexpr int MONTH_DAY_NANO_BYTES = 10;

inline bool is_string_like(arrow::Type::type id) noexcept {
  return id == arrow::Type::STRING || id == arrow::Type::LARGE_STRING ||
         id == arrow::Type::STRING_VIEW || id == arrow::Type::BINARY ||
         id == arrow::Type::LARGE_BINARY || id == arrow::Type::BINARY_VIEW;
}

/// Integers stored as two's complement: the sign bit is flipped so that they order unsigned.
inline bool is_flipped_integer(arrow::Type::type id) noexcept {
  switch (id) {
    case arrow::Type::INT8:
    case arrow::Type::INT16:
    case arrow::Type::INT32:
    case arrow::Type::INT64:
    case arrow::Type::DATE32:
    case arrow::Type::DATE64:
    case arrow::Type::TIME32:
    case arrow::Type::TIME64:
    case arrow::Type::TIMESTAMP:
    case arrow::Type::DURATION:
    case arrow::Type::INTERVAL_MONTHS:  // months alone: ordered as their count
      return true;
    default:
      return false;
  }
}

/// Decimals: two's complement integers of 4, 8, 16 or 32 bytes (little-endian), their scale
/// fixed by the type, so that they order as their unscaled values.
inline bool is_decimal_type(arrow::Type::type id) noexcept {
  return id == arrow::Type::DECIMAL32 || id == arrow::Type::DECIMAL64 ||
         id == arrow::Type::DECIMAL128 || id == arrow::Type::DECIMAL256;
}

inline bool is_plain_integer(arrow::Type::type id) noexcept {
  return id == arrow::Type::UINT8 || id == arrow::Type::UINT16 || id == arrow::Type::UINT32 ||
         id == arrow::Type::UINT64;
}

inline bool is_float(arrow::Type::type id) noexcept {
  return id == arrow::Type::FLOAT || id == arrow::Type::DOUBLE;
}

/// Whether values of `id` are a fixed number of bytes, written as a big-endian integer.
inline bool is_number(arrow::Type::type id) noexcept {
  return is_flipped_integer(id) || is_plain_integer(id) || is_float(id);
}

/// The most significant bit of a `width`-byte integer.
inline std::uint64_t sign_bit(int width) noexcept { return std::uint64_t{1} << (8 * width - 1); }

/// All the bits of a `width`-byte integer.
inline std::uint64_t all_bits(int width) noexcept {
  return width >= 8 ? ~std::uint64_t{0} : (std::uint64_t{1} << (8 * width)) - 1;
}

inline void put_big_endian(std::uint64_t bits, int width, std::string& out) {
  for (int shift = 8 * (width - 1); shift >= 0; shift -= 8) {
    out.push_back(static_cast<char>((bits >> shift) & 0xFF));
  }
}

/**
 * @return the body of a month_day_nano interval: its length in microseconds as DuckDB has it (a
 * month is 30 days, nanoseconds are cut toward zero), MONTH_DAY_NANO_BYTES big-endian with the
 * sign bit flipped
 */
inline std::array<char, MONTH_DAY_NANO_BYTES> interval_length_bytes(std::int32_t months,
                                                                    std::int32_t days,
                                                                    std::int64_t nanoseconds) {
  __extension__ typedef __int128 int128;            // NOLINT(modernize-use-using): GCC's form
  __extension__ typedef unsigned __int128 uint128;  // NOLINT(modernize-use-using)
  int128 const length =
    int128{months} * MICROS_PER_MONTH + int128{days} * MICROS_PER_DAY + nanoseconds / 1000;
  auto bits = static_cast<uint128>(length) ^ (uint128{1} << (8 * MONTH_DAY_NANO_BYTES - 1));
  std::array<char, MONTH_DAY_NANO_BYTES> bytes{};
  for (int byte = MONTH_DAY_NANO_BYTES - 1; byte >= 0; --byte) {
    bytes[static_cast<std::size_t>(byte)] = static_cast<char>(bits & 0xFFU);
    bits >>= 8U;
  }
  return bytes;
}

/// Bytes of the count of exact values' bits at the end of a row of a type with some.
inline constexpr int EXACT_COUNT_BYTES = 4;
/// Bytes of one exact value's bits there.
inline constexpr int EXACT_BYTES = 8;

/**
 * @return whether `type` holds, at some level, values whose body DuckDB's order ties with other
 * values (floats and doubles; day_time and month_day_nano intervals): its rows end with their
 * exact bits
 */
inline bool has_exact_bits(arrow::DataType const& type) {
  auto const id = type.id();
  if (is_float(id) || id == arrow::Type::INTERVAL_DAY_TIME ||
      id == arrow::Type::INTERVAL_MONTH_DAY_NANO) {
    return true;
  }
  if (id == arrow::Type::DICTIONARY) {
    return has_exact_bits(*static_cast<arrow::DictionaryType const&>(type).value_type());
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [](auto const& field) {
    return has_exact_bits(*field->type());
  });
}

/**
 * @return whether row `row` of `array` holds no value: null, or a dictionary's index of a null
 * value
 */
inline bool is_null_value(arrow::Array const& array, std::int64_t row) {
  if (array.IsNull(row)) {
    return true;
  }
  if (array.type_id() != arrow::Type::DICTIONARY) {
    return array.type_id() == arrow::Type::NA;
  }
  auto const& dictionary = static_cast<arrow::DictionaryArray const&>(array);
  return is_null_value(*dictionary.dictionary(), dictionary.GetValueIndex(row));
}
}  // namespace spillway::detail::nested_codec
