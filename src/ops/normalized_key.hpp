/**
 * @file normalized_key.hpp
 * @brief Binary-comparable fixed-size key prefixes: comparing two rows' prefixes as unsigned
 * words orders them as `row_comparator` does, up to ties. Private to the ops layer.
 *
 * Layout, for each key column in order while bytes remain (at most `MAX_PREFIX_BYTES`):
 * - one null byte when the column has nulls: 0 for the rows that come first (the null rows
 *   under null_order::BEFORE, the valid rows under AFTER), 1 for the others;
 * - the value, big-endian: unsigned integers and BOOL8 as they are, signed integers and
 *   timestamps with the sign bit flipped (decimals too: DECIMAL128 and DECIMAL256 as their
 *   16 or 32 bytes, big-endian, with the top bit flipped), floats with `-0.0` and NaN canonicalized
 * and then all bits flipped when negative or the sign bit flipped when not; strings as their first
 * bytes padded with zero bytes. Every value byte is inverted for DESCENDING. Null rows have
 * all-zero value bytes, so nulls tie. A column that does not fit is cut at a byte boundary
 * (big-endian cuts keep the order), and a string ends the prefix (taking all the bytes left): bytes
 * of a later key would otherwise order rows that the string's bytes beyond its prefix decide. The
 * prefix is *complete* when it encodes every key fully (no strings, nothing cut): equal
 * prefixes then mean equal keys. Otherwise equal prefixes only mean "compare the full rows".
 */
#pragma once

#include <spillway/ops/sort_order.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway::detail {

/**
 * @brief The longest prefix, in bytes. 24 bytes (3 words) hold two 8-byte keys with null bytes
 * or a string's first 23-24 bytes, without making the (prefix, row) records of an 8-byte key
 * any larger: the record size follows the bytes actually used.
 */
inline constexpr std::size_t MAX_PREFIX_BYTES = 24;

/** @brief A row's prefix as `Words` big-endian words, and the row it belongs to. */
template <std::size_t Words>
struct key_record {
  std::uint64_t key[Words];
  std::uint64_t row;
};

/** @brief Where each key column goes in the prefix. */
struct normalized_key_layout {
  /** @brief One key column's part of the prefix. */
  struct segment {
    std::size_t column;       ///< the key column
    std::size_t offset;       ///< first byte of the segment in the prefix
    bool null_byte;           ///< whether the segment starts with a null byte
    std::size_t value_bytes;  ///< value bytes encoded (after the null byte; may be cut)
    bool descending;          ///< whether value bytes are inverted
    bool nulls_before;        ///< whether null rows come first
  };
  std::vector<segment> segments;
  std::size_t bytes = 0;  ///< prefix bytes in use
  bool complete     = true;

  /** @return 64-bit words needed for `bytes` (0 to 3) */
  [[nodiscard]] std::size_t words() const noexcept { return (bytes + 7) / 8; }
};

/**
 * @brief Calls `work.template operator()<Words>()` with the prefix width in words (1, 2 or 3;
 * `words` above 3 takes 3), so that each operator's record size follows the bytes in use.
 */
template <typename Work>
decltype(auto) with_prefix_words(std::size_t words, Work&& work) {
  switch (words) {
    case 1:
      return work.template operator()<1>();
    case 2:
      return work.template operator()<2>();
    default:
      return work.template operator()<3>();
  }
}

/** @brief Lays out the prefix of `keys` under resolved `orders`. */
normalized_key_layout plan_normalized_keys(table_view const& keys, sort_order const& orders);

/**
 * @brief One layout for several key tables of the same types (the inputs of a merge): a column
 * gets a null byte when any of the tables has nulls in it, so prefixes of all of them compare.
 */
normalized_key_layout plan_normalized_keys(std::span<table_view const> keys,
                                           sort_order const& orders);

/**
 * @brief Narrows a layout that ends in a string to fewer words when a sample of the rows shows
 * they tell the same rows apart: random strings differ within their first bytes, and an 8-byte
 * prefix makes records (and the radix passes and merge comparisons over them) half the size of a
 * 24-byte one. Equal prefixes are resolved on the full rows either way, so the order is the same;
 * only the work changes.
 *
 * Samples up to `SAMPLED_ROWS` rows spread evenly over the tables; a width is taken when its
 * prefixes of the sample are as many distinct values as the full prefixes, or nearly (1/64 of
 * them may collide). Tables of fewer rows than that keep the full width.
 */
void narrow_string_prefix(normalized_key_layout& layout, std::span<table_view const> keys);

/**
 * @brief Whether segment `index` of a complete `layout` is a word of the prefix that gives back
 * its key values: an 8-byte integer or timestamp key (`type`), whole, without a null byte, at a
 * word boundary. Word `layout.segments[index].offset / 8` of the sorted prefixes is then that
 * key column in sorted order, once `decode_word` is applied.
 */
bool word_decodes(normalized_key_layout const& layout, std::size_t index, data_type type) noexcept;

/**
 * @brief Writes the key values of `rows` prefix words of `segment` into `out` (8-byte values of
 * `type`; `out` may be `words`).
 * @pre `word_decodes` of the segment
 */
void decode_word(normalized_key_layout::segment const& segment,
                 data_type type,
                 std::uint64_t const* words,
                 std::size_t rows,
                 void* out) noexcept;

/**
 * @brief Writes the prefixes and row indices of rows `[begin, end)` of `keys` into
 * `records[0 .. end - begin)`.
 * @pre `layout.words() == Words`
 */
template <std::size_t Words>
void encode_normalized_keys(normalized_key_layout const& layout,
                            table_view const& keys,
                            std::size_t begin,
                            std::size_t end,
                            key_record<Words>* records) noexcept;

extern template void encode_normalized_keys<1>(normalized_key_layout const&,
                                               table_view const&,
                                               std::size_t,
                                               std::size_t,
                                               key_record<1>*) noexcept;
extern template void encode_normalized_keys<2>(normalized_key_layout const&,
                                               table_view const&,
                                               std::size_t,
                                               std::size_t,
                                               key_record<2>*) noexcept;
extern template void encode_normalized_keys<3>(normalized_key_layout const&,
                                               table_view const&,
                                               std::size_t,
                                               std::size_t,
                                               key_record<3>*) noexcept;

}  // namespace spillway::detail
