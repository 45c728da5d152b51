/**
 * @file row_hash.hpp
 * @brief The row hash of `hash_rows` (partition.hpp) as one host-and-device function over the key
 * columns of row_compare.hpp, for the CUDA partition kernels; the host tests check it against
 * `hash_rows`. Private to the ops layer.
 */
#pragma once

#include "ops/cuda/row_compare.hpp"
#include "ops/cuda/xxh3.hpp"

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>

namespace spillway::detail::cuda {

/// The hashed bytes of a fixed-width value: its bits, little-endian, floats with -0.0 as +0.0
/// and every NaN as the positive quiet NaN.
template <typename Bits, typename T>
SPILLWAY_HOST_DEVICE inline Bits canonical_value_bits(void const* values, std::size_t at) {
  T value = static_cast<T const*>(values)[at];
  Bits bits{};
  if constexpr (std::is_floating_point_v<T>) {
    if (value != value) {
      bits =
        sizeof(T) == 4 ? static_cast<Bits>(0x7FC00000U) : static_cast<Bits>(0x7FF8000000000000ULL);
      return bits;
    }
    if (value == T{0}) {
      value = T{0};
    }
  }
  std::memcpy(&bits, &value, sizeof(T));
  return bits;
}

/**
 * @return the hash of row `row` of the `count` key columns, from `seed`: for each column,
 * `h = XXH3_64bits_withSeed(bytes, h)`, a null hashing no bytes with seed `h ^ null_salt`
 */
SPILLWAY_HOST_DEVICE inline std::uint64_t row_hash(key_column const* columns,
                                                   std::size_t count,
                                                   std::size_t row,
                                                   std::uint64_t seed,
                                                   std::uint64_t null_salt) {
  std::uint64_t hash = seed;
  for (std::size_t c = 0; c < count; ++c) {
    key_column const& column = columns[c];
    std::size_t const at     = column.offset + row;
    if (!valid_at(column.mask, at)) {
      hash = xxh3_64(nullptr, 0, hash ^ null_salt);
      continue;
    }
    switch (column.type) {
      case type_id::STRING:
      case type_id::BINARY: {
        std::int64_t const begin = column.offsets[at];
        std::int64_t const end   = column.offsets[at + 1];
        hash                     = xxh3_64(static_cast<char const*>(column.values) + begin,
                       static_cast<std::size_t>(end - begin),
                       hash);
        break;
      }
      case type_id::BOOL8:
      case type_id::INT8:
      case type_id::UINT8: {
        auto const bits = canonical_value_bits<std::uint8_t, std::uint8_t>(column.values, at);
        hash            = xxh3_64(&bits, 1, hash);
        break;
      }
      case type_id::INT16:
      case type_id::UINT16: {
        auto const bits = canonical_value_bits<std::uint16_t, std::uint16_t>(column.values, at);
        hash            = xxh3_64(&bits, 2, hash);
        break;
      }
      case type_id::INT32:
      case type_id::UINT32:
      case type_id::DATE32:
      case type_id::TIME32:
      case type_id::DECIMAL32: {
        auto const bits = canonical_value_bits<std::uint32_t, std::uint32_t>(column.values, at);
        hash            = xxh3_64(&bits, 4, hash);
        break;
      }
      case type_id::FLOAT32: {
        auto const bits = canonical_value_bits<std::uint32_t, float>(column.values, at);
        hash            = xxh3_64(&bits, 4, hash);
        break;
      }
      case type_id::FLOAT64: {
        auto const bits = canonical_value_bits<std::uint64_t, double>(column.values, at);
        hash            = xxh3_64(&bits, 8, hash);
        break;
      }
      case type_id::DECIMAL128:
      case type_id::DECIMAL256: {  // their bytes, little-endian, as they are stored
        std::size_t const width = column.type == type_id::DECIMAL128 ? 16 : 32;
        hash = xxh3_64(static_cast<unsigned char const*>(column.values) + at * width, width, hash);
        break;
      }
      default: {  // INT64, UINT64, TIMESTAMP, DATE64, TIME64, DURATION, DECIMAL64
        auto const bits = canonical_value_bits<std::uint64_t, std::uint64_t>(column.values, at);
        hash            = xxh3_64(&bits, 8, hash);
        break;
      }
    }
  }
  return hash;
}

}  // namespace spillway::detail::cuda
