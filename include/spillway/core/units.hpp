/**
 * @file units.hpp
 * @brief Byte-size literals (`64_MiB`), formatting of sizes for messages and parsing of sizes from
 * the command line and the environment.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace spillway {

inline namespace literals {
constexpr std::size_t operator""_B(unsigned long long value) { return value; }
constexpr std::size_t operator""_KiB(unsigned long long value) { return value << 10U; }
constexpr std::size_t operator""_MiB(unsigned long long value) { return value << 20U; }
constexpr std::size_t operator""_GiB(unsigned long long value) { return value << 30U; }
}  // namespace literals

/**
 * @brief Rounds `value` up to a multiple of `alignment`.
 * @param alignment a power of two
 */
constexpr std::size_t align_up(std::size_t value, std::size_t alignment) noexcept {
  return (value + alignment - 1) & ~(alignment - 1);
}

/** @brief True when `value` is a power of two (zero is not). */
constexpr bool is_power_of_two(std::size_t value) noexcept {
  return value != 0 && (value & (value - 1)) == 0;
}

/**
 * @brief Formats a byte count for people: "512 B", "1.50 KiB", "64.00 MiB".
 */
std::string format_bytes(std::size_t bytes);

/**
 * @brief Parses a size such as "512MiB", "2GiB", "1.5 GB", "4096", "64k".
 *
 * Binary (KiB, MiB, GiB, TiB, K, M, G, T) and decimal (KB, MB, GB, TB) suffixes are accepted, in
 * any letter case; a bare number is bytes.
 * @throws spillway::invalid_argument naming the text when it is not a size
 */
std::size_t parse_bytes(std::string_view text);

}  // namespace spillway
