/**
 * @file null_mask.hpp
 * @brief Validity bitmasks: one bit per row, 1 = valid, least significant bit first (Arrow's
 * layout), padded to whole 64-byte blocks.
 */
#pragma once

#include <cstddef>
#include <cstdint>

namespace spillway {

/** @brief The unit of a validity mask. */
using bitmask_type = std::uint8_t;

/** @brief Whether a new column gets a mask, and how it starts. */
enum class mask_state : std::uint8_t {
  UNALLOCATED,    ///< no mask: every row is valid
  UNINITIALIZED,  ///< a mask whose bits the caller sets
  ALL_VALID,      ///< a mask with every bit set
  ALL_NULL,       ///< a mask with every bit clear
};

/** @return bytes of a mask for `rows` rows, padded to a multiple of 64 */
constexpr std::size_t bitmask_allocation_size(std::size_t rows) noexcept {
  return ((rows + 7) / 8 + 63) / 64 * 64;
}

/** @return whether bit `index` of `mask` is set */
inline bool bit_is_set(bitmask_type const* mask, std::size_t index) noexcept {
  return ((static_cast<unsigned>(mask[index / 8]) >> (index % 8)) & 1U) != 0;
}

/** @brief Sets bit `index` of `mask` to `valid`. */
inline void set_bit(bitmask_type* mask, std::size_t index, bool valid) noexcept {
  auto const bit = static_cast<bitmask_type>(1U << (index % 8));
  if (valid) {
    mask[index / 8] = static_cast<bitmask_type>(mask[index / 8] | bit);
  } else {
    mask[index / 8] = static_cast<bitmask_type>(mask[index / 8] & ~bit);
  }
}

/** @return the number of clear bits (nulls) in `[begin, end)` of `mask` */
std::size_t count_unset_bits(bitmask_type const* mask, std::size_t begin, std::size_t end) noexcept;

/**
 * @brief Copies `count` bits from `source` starting at bit `source_offset` to `destination`
 * starting at bit `destination_offset`. Bits of `destination` outside the range are kept.
 */
void copy_bits(bitmask_type* destination,
               std::size_t destination_offset,
               bitmask_type const* source,
               std::size_t source_offset,
               std::size_t count) noexcept;

/** @brief Sets bits `[begin, end)` of `mask` to `valid`. */
void fill_bits(bitmask_type* mask, std::size_t begin, std::size_t end, bool valid) noexcept;

}  // namespace spillway
