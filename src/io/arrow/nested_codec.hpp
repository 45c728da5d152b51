/**
 * @file nested_codec.hpp
 * @brief What the encoder and the decoder of nested values share (nested_encoding.cpp,
 * nested_decoding.cpp): the markers of the encoding, the leaf types' kinds, the integer bit
 * helpers and the exact-float trailer's sizes.
 */
#pragma once

#include <arrow/type.h>

#include <algorithm>
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

/// Bytes of the count of exact float bits at the end of a row of a type with floats.
inline constexpr int EXACT_COUNT_BYTES = 4;
/// Bytes of one exact float's bits there.
inline constexpr int EXACT_BYTES = 8;

/// Whether `type` holds floats or doubles at some level: its rows end with their exact bits.
inline bool has_floats(arrow::DataType const& type) {
  if (is_float(type.id())) {
    return true;
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [](auto const& field) {
    return has_floats(*field->type());
  });
}
}  // namespace spillway::detail::nested_codec
