/**
 * @file compact_metadata.cpp
 * @brief Pack metadata as variable-length integers (see compact_metadata.hpp).
 */
#include "spill/compact_metadata.hpp"

#include <spillway/core/error.hpp>

#include <cstring>
#include <string>

namespace spillway::detail {
namespace {

constexpr std::size_t WORD_BYTES = sizeof(std::uint64_t);
/// A 64-bit word takes at most this many bytes of 7 bits.
constexpr std::size_t MAX_WORD_BYTES = 10;

}  // namespace

std::vector<std::uint8_t> compact_metadata(std::span<std::uint8_t const> metadata) {
  SPILLWAY_EXPECTS(metadata.size() % WORD_BYTES == 0,
                   "pack metadata of " + std::to_string(metadata.size()) +
                     " bytes is not a whole number of 8-byte words",
                   logic_error);
  std::vector<std::uint8_t> out;
  out.reserve(metadata.size() / 2);
  for (std::size_t at = 0; at < metadata.size(); at += WORD_BYTES) {
    std::uint64_t word = 0;
    std::memcpy(&word, metadata.data() + at, WORD_BYTES);
    while (word >= 0x80U) {
      out.push_back(static_cast<std::uint8_t>(word | 0x80U));
      word >>= 7U;
    }
    out.push_back(static_cast<std::uint8_t>(word));
  }
  out.shrink_to_fit();
  return out;
}

std::vector<std::uint8_t> expand_metadata(std::span<std::uint8_t const> compact) {
  std::vector<std::uint8_t> out;
  out.reserve(compact.size() * 3);
  std::size_t at = 0;
  while (at < compact.size()) {
    std::uint64_t word = 0;
    std::size_t bytes  = 0;
    while (true) {
      SPILLWAY_EXPECTS(
        at < compact.size(), "compact pack metadata ends inside a word", corruption_error);
      std::uint8_t const byte = compact[at++];
      SPILLWAY_EXPECTS(bytes < MAX_WORD_BYTES && (bytes + 1 < MAX_WORD_BYTES || byte <= 1U),
                       "compact pack metadata holds a word longer than 64 bits",
                       corruption_error);
      word |= static_cast<std::uint64_t>(byte & 0x7FU) << (7U * bytes);
      ++bytes;
      if ((byte & 0x80U) == 0) {
        break;
      }
    }
    auto const end = out.size();
    out.resize(end + WORD_BYTES);
    std::memcpy(out.data() + end, &word, WORD_BYTES);
  }
  return out;
}

}  // namespace spillway::detail
