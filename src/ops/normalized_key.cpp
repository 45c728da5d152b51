#include "ops/normalized_key.hpp"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string_view>
#include <type_traits>

namespace spillway::detail {
namespace {

/// The top `bytes` bytes set (all of them from 8 bytes on: a wide decimal's segment).
constexpr std::uint64_t high_bytes_mask(std::size_t bytes) noexcept {
  return bytes == 0 ? 0 : bytes >= 8 ? ~std::uint64_t{0} : ~std::uint64_t{0} << (64 - 8 * bytes);
}

/// ORs the top `count` bytes of `value` (1..8) into the prefix at byte `offset`.
template <std::size_t Words>
void put_bytes(key_record<Words>& record,
               std::size_t offset,
               std::size_t count,
               std::uint64_t value) noexcept {
  std::size_t const word  = offset / 8;
  std::size_t const shift = offset % 8;
  record.key[word] |= value >> (8 * shift);
  if (shift + count > 8 && word + 1 < Words) {  // the layout never spills past the end
    record.key[word + 1] |= value << (8 * (8 - shift));
  }
}

/// The order-preserving unsigned image of `value`, left-aligned in 64 bits.
template <typename T>
std::uint64_t order_preserving_bits(T value) noexcept {
  constexpr std::size_t bits = 8 * sizeof(T);
  std::uint64_t image        = 0;
  if constexpr (std::is_floating_point_v<T>) {
    using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    bits_type raw   = 0;
    if (std::isnan(value)) {
      value = std::numeric_limits<T>::quiet_NaN();
      value = std::copysign(value, T{1});
    } else if (value == T{0}) {
      value = T{0};  // -0.0 ties with 0.0
    }
    std::memcpy(&raw, &value, sizeof(T));
    constexpr bits_type sign = bits_type{1} << (bits - 1);
    raw                      = (raw & sign) != 0 ? static_cast<bits_type>(~raw) : (raw | sign);
    image                    = raw;
  } else if constexpr (std::is_signed_v<T>) {
    image = static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(value)) ^
            (std::uint64_t{1} << (bits - 1));
    image &= bits == 64 ? ~std::uint64_t{0} : ((std::uint64_t{1} << bits) - 1);
  } else {
    image = static_cast<std::uint64_t>(value);
  }
  return bits == 64 ? image : image << (64 - bits);
}

/// Word `index` (0 the most significant) of the order-preserving image of a wide decimal: its
/// 64-bit words from the top, the sign bit of the top one flipped.
template <typename T>
std::uint64_t decimal_word(T const& value, std::size_t index) noexcept {
  if constexpr (std::is_same_v<T, decimal128_storage>) {
    return index == 0 ? static_cast<std::uint64_t>(value.hi) ^ (std::uint64_t{1} << 63U) : value.lo;
  } else {
    std::uint64_t const word = value.words[3 - index];
    return index == 0 ? word ^ (std::uint64_t{1} << 63U) : word;
  }
}

/// The 8 bytes at `data` as a big-endian word (one load; no bounds of its own).
std::uint64_t load_big_endian(char const* data) noexcept {
  std::uint64_t word = 0;
  std::memcpy(&word, data, 8);
  if constexpr (std::endian::native == std::endian::little) {
    word = __builtin_bswap64(word);
  }
  return word;
}

/// Bytes `[from, from + 8)` of `text`, zero-padded, big-endian in a word. Reads only bytes of
/// `text`: a tail of a string of at least 8 bytes is its last 8 bytes shifted up.
std::uint64_t string_chunk(std::string_view text, std::size_t from) noexcept {
  if (from >= text.size()) {
    return 0;
  }
  std::size_t const left = text.size() - from;
  if (left >= 8) {
    return load_big_endian(text.data() + from);
  }
  if (text.size() >= 8) {
    return load_big_endian(text.data() + text.size() - 8) << (8 * (8 - left));
  }
  std::uint64_t word = 0;
  for (std::size_t index = 0; index < 8; ++index) {
    word = (word << 8) | (index < left ? static_cast<unsigned char>(text[from + index]) : 0U);
  }
  return word;
}

template <std::size_t Words>
void encode_segment(normalized_key_layout::segment const& segment,
                    column_view const& column,
                    std::size_t begin,
                    std::size_t end,
                    key_record<Words>* records) noexcept {
  std::size_t const value_offset = segment.offset + (segment.null_byte ? 1 : 0);
  std::uint64_t const first_byte = std::uint64_t{segment.nulls_before ? 1U : 0U} << 56;
  std::uint64_t const nulls_byte = std::uint64_t{segment.nulls_before ? 0U : 1U} << 56;
  if (is_fixed_width(column.type())) {
    std::uint64_t const invert = segment.descending ? ~std::uint64_t{0} : 0;
    std::uint64_t const keep   = high_bytes_mask(segment.value_bytes);
    visit_fixed_width(column.type(), [&]<typename T>() {
      T const* values = column.data<T>();
      for (std::size_t row = begin; row < end; ++row) {
        key_record<Words>& record = records[row - begin];
        bool const valid          = !segment.null_byte || column.is_valid(row);
        if (segment.null_byte) {
          put_bytes(record, segment.offset, 1, valid ? first_byte : nulls_byte);
        }
        if constexpr (is_wide_decimal_v<T>) {
          // Wider than a word: its words from the top, each cut as a string's chunks are.
          for (std::size_t from = 0; valid && from < segment.value_bytes; from += 8) {
            std::size_t const count = std::min<std::size_t>(8, segment.value_bytes - from);
            put_bytes(record,
                      value_offset + from,
                      count,
                      (decimal_word(values[row], from / 8) ^ invert) & high_bytes_mask(count));
          }
        } else if (valid && segment.value_bytes > 0) {
          put_bytes(record,
                    value_offset,
                    segment.value_bytes,
                    (order_preserving_bits(values[row]) ^ invert) & keep);
        }
      }
    });
    return;
  }
  for (std::size_t row = begin; row < end; ++row) {
    key_record<Words>& record = records[row - begin];
    bool const valid          = !segment.null_byte || column.is_valid(row);
    if (segment.null_byte) {
      put_bytes(record, segment.offset, 1, valid ? first_byte : nulls_byte);
    }
    if (!valid) {
      continue;
    }
    std::string_view const text = column.string_at(row);
    for (std::size_t from = 0; from < segment.value_bytes; from += 8) {
      std::size_t const count = std::min<std::size_t>(8, segment.value_bytes - from);
      std::uint64_t chunk     = string_chunk(text, from);
      if (segment.descending) {
        chunk = ~chunk;
      }
      put_bytes(record, value_offset + from, count, chunk & high_bytes_mask(count));
    }
  }
}

}  // namespace

normalized_key_layout plan_normalized_keys(table_view const& keys, sort_order const& orders) {
  return plan_normalized_keys(std::span<table_view const>{&keys, 1}, orders);
}

normalized_key_layout plan_normalized_keys(std::span<table_view const> tables,
                                           sort_order const& orders) {
  normalized_key_layout layout;
  if (tables.empty()) {
    return layout;
  }
  table_view const& keys = tables.front();
  std::size_t used       = 0;
  for (std::size_t index = 0; index < keys.num_columns(); ++index) {
    column_view const& column = keys.column(index);
    bool null_byte            = false;
    for (auto const& table : tables) {
      null_byte = null_byte || table.column(index).has_nulls();
    }
    std::size_t const needed = null_byte ? 1 : 0;
    if (used + needed >= MAX_PREFIX_BYTES) {
      layout.complete = false;
      break;
    }
    std::size_t const room  = MAX_PREFIX_BYTES - used - needed;
    std::size_t value_bytes = 0;
    if (is_fixed_width(column.type())) {
      value_bytes = std::min(size_of(column.type()), room);
      if (value_bytes < size_of(column.type())) {
        layout.complete = false;
      }
    } else {
      // A string may go on beyond its prefix, and then the bytes of later keys would order
      // rows that its unseen bytes decide: a string ends the prefix and takes all the room.
      value_bytes     = room;
      layout.complete = false;
    }
    layout.segments.push_back({index,
                               used,
                               null_byte,
                               value_bytes,
                               orders[index].direction == order::DESCENDING,
                               orders[index].nulls == null_order::BEFORE});
    used += needed + value_bytes;
    if (!is_fixed_width(column.type())) {
      break;
    }
    if (used == MAX_PREFIX_BYTES && index + 1 < keys.num_columns()) {
      layout.complete = false;
      break;
    }
  }
  layout.bytes = used;
  return layout;
}

void narrow_string_prefix(normalized_key_layout& layout, std::span<table_view const> keys) {
  constexpr std::size_t SAMPLED_ROWS = 1024;
  if (layout.segments.empty() || layout.words() < 2 ||
      is_fixed_width(keys.front().column(layout.segments.back().column).type())) {
    return;
  }
  std::size_t rows = 0;
  for (auto const& table : keys) {
    rows += table.num_rows();
  }
  if (rows < 4 * SAMPLED_ROWS) {
    return;
  }
  // Every sampled row's full prefix, from rows spread evenly over all the tables.
  std::vector<key_record<3>> sample;
  sample.reserve(SAMPLED_ROWS);
  normalized_key_layout full = layout;
  std::size_t table          = 0;
  std::size_t before         = 0;  // rows of the tables before `table`
  for (std::size_t taken = 0; taken < SAMPLED_ROWS; ++taken) {
    std::size_t const row = taken * rows / SAMPLED_ROWS;
    while (row >= before + keys[table].num_rows()) {
      before += keys[table].num_rows();
      ++table;
    }
    key_record<3> record{};
    if (full.words() == 3) {
      encode_normalized_keys<3>(full, keys[table], row - before, row - before + 1, &record);
    } else {
      key_record<2> narrow{};
      encode_normalized_keys<2>(full, keys[table], row - before, row - before + 1, &narrow);
      record.key[0] = narrow.key[0];
      record.key[1] = narrow.key[1];
    }
    sample.push_back(record);
  }
  // Distinct values of the first `words` words of the sorted sample.
  auto const distinct = [&](std::size_t words) {
    std::size_t count = 1;
    for (std::size_t index = 1; index < sample.size(); ++index) {
      bool same = true;
      for (std::size_t word = 0; word < words; ++word) {
        same = same && sample[index].key[word] == sample[index - 1].key[word];
      }
      count += same ? 0 : 1;
    }
    return count;
  };
  std::sort(sample.begin(), sample.end(), [](auto const& left, auto const& right) {
    return std::lexicographical_compare(left.key, left.key + 3, right.key, right.key + 3);
  });
  std::size_t const all          = distinct(layout.words());
  auto& last                     = layout.segments.back();
  std::size_t const end_of_fixed = last.offset + (last.null_byte ? 1 : 0);
  for (std::size_t words = 1; words < layout.words(); ++words) {
    if (8 * words <= end_of_fixed) {
      continue;  // the string would get no bytes
    }
    if (distinct(words) + all / 64 >= all) {
      last.value_bytes = 8 * words - end_of_fixed;
      layout.bytes     = 8 * words;
      return;
    }
  }
}

bool word_decodes(normalized_key_layout const& layout, std::size_t index, data_type type) noexcept {
  if (!layout.complete || index >= layout.segments.size() || !is_fixed_width(type) ||
      size_of(type) != sizeof(std::uint64_t) || type.id() == type_id::FLOAT64) {
    return false;
  }
  auto const& segment = layout.segments[index];
  return !segment.null_byte && segment.offset % sizeof(std::uint64_t) == 0 &&
         segment.value_bytes == sizeof(std::uint64_t);
}

void decode_word(normalized_key_layout::segment const& segment,
                 data_type type,
                 std::uint64_t const* words,
                 std::size_t rows,
                 void* out) noexcept {
  // The inverse of order_preserving_bits for 8-byte integers: the sign bit flipped back if
  // signed, every bit if descending.
  std::uint64_t const flip = (segment.descending ? ~std::uint64_t{0} : 0) ^
                             (type.id() == type_id::UINT64 ? 0 : std::uint64_t{1} << 63);
  auto* values = static_cast<std::uint64_t*>(out);
  for (std::size_t row = 0; row < rows; ++row) {
    values[row] = words[row] ^ flip;
  }
}

template <std::size_t Words>
void encode_normalized_keys(normalized_key_layout const& layout,
                            table_view const& keys,
                            std::size_t begin,
                            std::size_t end,
                            key_record<Words>* records) noexcept {
  for (std::size_t row = begin; row < end; ++row) {
    key_record<Words>& record = records[row - begin];
    for (std::size_t word = 0; word < Words; ++word) {
      record.key[word] = 0;
    }
    record.row = row;
  }
  for (auto const& segment : layout.segments) {
    encode_segment(segment, keys.column(segment.column), begin, end, records);
  }
}

template void encode_normalized_keys<1>(normalized_key_layout const&,
                                        table_view const&,
                                        std::size_t,
                                        std::size_t,
                                        key_record<1>*) noexcept;
template void encode_normalized_keys<2>(normalized_key_layout const&,
                                        table_view const&,
                                        std::size_t,
                                        std::size_t,
                                        key_record<2>*) noexcept;
template void encode_normalized_keys<3>(normalized_key_layout const&,
                                        table_view const&,
                                        std::size_t,
                                        std::size_t,
                                        key_record<3>*) noexcept;

}  // namespace spillway::detail
