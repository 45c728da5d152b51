/**
 * @file decimal.hpp
 * @brief The storage of the wide decimal types (DECIMAL128, DECIMAL256) and decimal text.
 *
 * A decimal value is an unscaled integer `u` standing for `u / 10^scale`; the scale is the
 * column's (`data_type::scale`). DECIMAL32 and DECIMAL64 store `u` as an int32 or int64; the wide
 * ones as Arrow does, a two's-complement integer of 16 or 32 bytes, little-endian: the low 64
 * bits first. The structs below are that layout with the order of the integers they hold, so
 * that every fixed-width code path (copies, gathers, packing, comparisons) takes them as it takes
 * an integer.
 */
#pragma once

#include <compare>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <type_traits>

namespace spillway {

class data_type;

/** @brief One DECIMAL128 value: a 128-bit two's-complement integer, the low 64 bits first. */
struct decimal128_storage {
  std::uint64_t lo;  ///< bits 0 to 63
  std::int64_t hi;   ///< bits 64 to 127, the top one the sign

  friend constexpr bool operator==(decimal128_storage, decimal128_storage) noexcept = default;
  /** @brief Orders as the integers do: by the signed high word, then the unsigned low one. */
  friend constexpr std::strong_ordering operator<=>(decimal128_storage lhs,
                                                    decimal128_storage rhs) noexcept {
    return lhs.hi != rhs.hi ? lhs.hi <=> rhs.hi : lhs.lo <=> rhs.lo;
  }
};

/** @brief One DECIMAL256 value: a 256-bit two's-complement integer, the low 64 bits first. */
struct decimal256_storage {
  /// 64-bit words, least significant first; the top bit of `words[3]` is the sign
  std::uint64_t words[4];

  friend constexpr bool operator==(decimal256_storage const&,
                                   decimal256_storage const&) noexcept = default;
  /** @brief Orders as the integers do: the top word signed, then the others unsigned. */
  friend constexpr std::strong_ordering operator<=>(decimal256_storage const& lhs,
                                                    decimal256_storage const& rhs) noexcept {
    if (lhs.words[3] != rhs.words[3]) {
      return static_cast<std::int64_t>(lhs.words[3]) <=> static_cast<std::int64_t>(rhs.words[3]);
    }
    for (std::size_t word = 3; word-- > 0;) {
      if (lhs.words[word] != rhs.words[word]) {
        return lhs.words[word] <=> rhs.words[word];
      }
    }
    return std::strong_ordering::equal;
  }
};

static_assert(sizeof(decimal128_storage) == 16 && std::is_trivially_copyable_v<decimal128_storage>);
static_assert(sizeof(decimal256_storage) == 32 && std::is_trivially_copyable_v<decimal256_storage>);

/** @brief Whether `T` is the storage of a wide decimal (DECIMAL128 or DECIMAL256). */
template <typename T>
inline constexpr bool is_wide_decimal_v =
  std::is_same_v<T, decimal128_storage> || std::is_same_v<T, decimal256_storage>;

/**
 * @brief Appends the decimal at `value` (one value of decimal `type`, `size_of(type)` bytes) as
 * plain text: an optional `-`, the integer digits (at least one) and, when the scale is positive,
 * a point and exactly `scale` digits ("-12.34", "0.05", "7.00"); a negative scale appends zeros.
 */
void append_decimal(std::string& out, data_type type, void const* value);

/** @return the text `append_decimal` appends */
std::string decimal_to_string(data_type type, void const* value);

/**
 * @brief Reads decimal text into `value` (one value of decimal `type`): an optional sign, digits
 * with an optional point ("12", "-12.3", "+.5", "12."); fewer fraction digits than the scale are
 * padded with zeros, more are taken only when the extra ones are zeros (nothing is rounded).
 * @return false, leaving `value` unspecified, when `text` is not such a number or has more
 * significant digits than the type's precision
 */
bool parse_decimal(std::string_view text, data_type type, void* value) noexcept;

}  // namespace spillway
