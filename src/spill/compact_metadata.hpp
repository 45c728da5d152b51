/**
 * @file compact_metadata.hpp
 * @brief Internal: the form in which the spill store keeps a table's pack metadata for as long as
 * the table is stored (spill layer only).
 */
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace spillway::detail {

/**
 * @return `metadata` (a table's pack metadata: a header and one entry per column, in 8-byte
 * little-endian words) with each word as a variable-length integer, 7 bits a byte, low bits first
 * (LEB128). Most words are small (a type, a row count, a part's offset in the packed data), so
 * the 800 bytes of a 16-column table take about 300; a store of many chunks keeps one per chunk
 * (34,500 of them, 27 MB, sorting TPC-H lineitem at scale factor 1 on a 16 MiB device).
 * @throws spillway::logic_error when the size is not a whole number of words
 */
std::vector<std::uint8_t> compact_metadata(std::span<std::uint8_t const> metadata);

/**
 * @return the pack metadata `compact` was made from
 * @throws spillway::corruption_error when `compact` ends inside a word or a word is longer than
 * 64 bits
 */
std::vector<std::uint8_t> expand_metadata(std::span<std::uint8_t const> compact);

}  // namespace spillway::detail
