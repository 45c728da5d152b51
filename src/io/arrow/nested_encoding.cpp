/**
 * @file nested_encoding.cpp
 * @brief Nested Arrow values as order-preserving bytes, and back (see nested_encoding.hpp).
 */
#include "io/arrow/nested_codec.hpp"
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/null_mask.hpp>

#include <arrow/util/bit_util.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace spillway::detail {
namespace {

using namespace nested_codec;  // NOLINT(google-build-using-namespace): this file's vocabulary

/**
 * @brief One row's encoding as it is written: its body, and the exact bits of its floats that
 * the body writes canonically (every zero as +0.0, every NaN alike, since DuckDB ties them),
 * appended after the body so that they break ties only.
 */
struct row_writer {
  std::string& body;
  std::string exact         = {};
  std::uint32_t exact_count = 0;

  void push_back(char c) { body.push_back(c); }
  void append(char const* bytes, std::size_t size) { body.append(bytes, size); }
  void keep_exact(std::uint64_t bits) {
    put_big_endian(bits, EXACT_BYTES, exact);
    ++exact_count;
  }
  /// Ends the row: the exact bits and their count, for a type with floats.
  void finish(bool floats) {
    if (floats) {
      body += exact;
      put_big_endian(exact_count, EXACT_COUNT_BYTES, body);
    }
    exact.clear();
    exact_count = 0;
  }
};

// ---------------------------------------------------------------------------------------------
// Encoding

/// One level of a nested array being encoded, with its children.
struct encoder_node {
  arrow::Array const* array = nullptr;
  std::shared_ptr<arrow::Array> owner;  ///< holds `array` for the children
  arrow::Type::type id = arrow::Type::NA;
  int width            = 0;  ///< numbers and fixed_size_binary: bytes per value
  std::uint8_t const* values =
    nullptr;                ///< numbers and fixed_size_binary: row 0's bytes; bool: the bits
  std::int64_t offset = 0;  ///< bool: row 0's bit
  std::vector<encoder_node> children;  ///< a dictionary's: its values
};

encoder_node make_encoder(arrow::Array const& array, std::shared_ptr<arrow::Array> owner) {
  encoder_node node;
  node.array       = &array;
  node.owner       = std::move(owner);
  node.id          = array.type_id();
  auto const& data = *array.data();
  if (is_number(node.id) || is_decimal_type(node.id) || is_interval_type(node.id) ||
      node.id == arrow::Type::FIXED_SIZE_BINARY) {
    node.width = array.type()->byte_width();
    if (data.buffers.size() > 1 && data.buffers[1]) {
      node.values = data.buffers[1]->data() + data.offset * node.width;
    }
  } else if (node.id == arrow::Type::BOOL) {
    if (data.buffers.size() > 1 && data.buffers[1]) {
      node.values = data.buffers[1]->data();
    }
    node.offset = data.offset;
  }
  auto const add = [&node](std::shared_ptr<arrow::Array> child) {
    auto const* raw = child.get();
    node.children.push_back(make_encoder(*raw, std::move(child)));
  };
  switch (node.id) {
    case arrow::Type::LIST:
    case arrow::Type::MAP:
      add(static_cast<arrow::ListArray const&>(array).values());
      break;
    case arrow::Type::LARGE_LIST:
      add(static_cast<arrow::LargeListArray const&>(array).values());
      break;
    case arrow::Type::FIXED_SIZE_LIST:
      add(static_cast<arrow::FixedSizeListArray const&>(array).values());
      break;
    case arrow::Type::LIST_VIEW:
      add(static_cast<arrow::ListViewArray const&>(array).values());
      break;
    case arrow::Type::LARGE_LIST_VIEW:
      add(static_cast<arrow::LargeListViewArray const&>(array).values());
      break;
    case arrow::Type::DICTIONARY:
      add(static_cast<arrow::DictionaryArray const&>(array).dictionary());
      break;
    case arrow::Type::STRUCT: {
      auto const& structs = static_cast<arrow::StructArray const&>(array);
      for (int k = 0; k < structs.num_fields(); ++k) {
        add(structs.field(k));
      }
      break;
    }
    default:
      break;
  }
  return node;
}

std::string_view string_value(arrow::Array const& array, std::int64_t row) {
  switch (array.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return static_cast<arrow::BinaryArray const&>(array).GetView(row);
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return static_cast<arrow::LargeBinaryArray const&>(array).GetView(row);
    default:
      return static_cast<arrow::BinaryViewArray const&>(array).GetView(row);
  }
}

void encode_value(encoder_node const& node, std::int64_t row, row_writer& out);

/// The index of row `row` of a dictionary's node into its values.
std::int64_t value_index(encoder_node const& node, std::int64_t row) {
  return static_cast<arrow::DictionaryArray const&>(*node.array).GetValueIndex(row);
}

/**
 * @brief Appends the body of an interval: its length as DuckDB has it, in microseconds (a month
 * is 30 days, nanoseconds are cut toward zero), big-endian with the sign bit flipped; and its
 * fields, exact, after the body (a month and 30 days are tied, as in DuckDB).
 */
void encode_interval(encoder_node const& node, std::int64_t row, row_writer& out) {
  auto const* value = node.values + row * node.width;
  if (node.id == arrow::Type::INTERVAL_DAY_TIME) {
    arrow::DayTimeIntervalType::DayMilliseconds parts;
    std::memcpy(&parts, value, sizeof(parts));
    // Milliseconds: fits 64 bits, and orders as DuckDB's microseconds do.
    std::int64_t const length = std::int64_t{parts.days} * MILLIS_PER_DAY + parts.milliseconds;
    put_big_endian(static_cast<std::uint64_t>(length) ^ sign_bit(8), 8, out.body);
    out.keep_exact((std::uint64_t{static_cast<std::uint32_t>(parts.days)} << 32U) |
                   static_cast<std::uint32_t>(parts.milliseconds));
    return;
  }
  arrow::MonthDayNanoIntervalType::MonthDayNanos parts{};
  std::memcpy(&parts, value, sizeof(parts));
  out.append(interval_length_bytes(parts.months, parts.days, parts.nanoseconds).data(),
             MONTH_DAY_NANO_BYTES);
  out.keep_exact((std::uint64_t{static_cast<std::uint32_t>(parts.months)} << 32U) |
                 static_cast<std::uint32_t>(parts.days));
  out.keep_exact(static_cast<std::uint64_t>(parts.nanoseconds));
}

void encode_body(encoder_node const& node, std::int64_t row, row_writer& out) {
  auto const id = node.id;
  if (id == arrow::Type::DICTIONARY) {
    encode_body(node.children[0], value_index(node, row), out);  // by value, not by index
    return;
  }
  if (id == arrow::Type::INTERVAL_DAY_TIME || id == arrow::Type::INTERVAL_MONTH_DAY_NANO) {
    encode_interval(node, row, out);
    return;
  }
  if (id == arrow::Type::BOOL) {
    out.push_back(
      arrow::bit_util::GetBit(node.values, static_cast<std::uint64_t>(node.offset + row)) ? 1 : 0);
    return;
  }
  if (is_number(id)) {
    std::uint64_t bits = 0;
    std::memcpy(&bits, node.values + row * node.width, static_cast<std::size_t>(node.width));
    if (is_float(id)) {
      if ((bits & ~sign_bit(node.width)) == 0) {
        // A zero: written as +0.0, which DuckDB ties with -0.0, its sign kept after the body.
        out.keep_exact(bits);
        bits = 0;
      }
      // Negative numbers: every bit flipped (the larger the magnitude, the smaller); positive
      // ones: the sign bit set.
      bits = (bits & sign_bit(node.width)) != 0 ? ~bits & all_bits(node.width)
                                                : bits | sign_bit(node.width);
    } else if (is_flipped_integer(id)) {
      bits ^= sign_bit(node.width);
    }
    put_big_endian(bits, node.width, out.body);
    return;
  }
  if (is_decimal_type(id)) {
    // Big-endian, the sign bit flipped: bytewise order is the order of the unscaled values.
    auto const* value = node.values + row * node.width;
    for (int byte = node.width - 1; byte >= 0; --byte) {
      auto const bits =
        static_cast<std::uint8_t>(value[byte] ^ (byte == node.width - 1 ? 0x80 : 0));
      out.body.push_back(static_cast<char>(bits));
    }
    return;
  }
  if (id == arrow::Type::FIXED_SIZE_BINARY) {
    out.append(reinterpret_cast<char const*>(node.values + row * node.width),
               static_cast<std::size_t>(node.width));
    return;
  }
  if (is_string_like(id)) {
    for (char const c : string_value(*node.array, row)) {
      auto const byte = static_cast<std::uint8_t>(c);
      if (byte <= ESCAPE) {
        out.push_back(static_cast<char>(ESCAPE));
        out.push_back(static_cast<char>(byte + 1));
      } else {
        out.push_back(c);
      }
    }
    out.push_back(static_cast<char>(END));
    return;
  }
  switch (id) {
    case arrow::Type::LIST:
    case arrow::Type::MAP:
    case arrow::Type::LARGE_LIST: {
      std::int64_t begin = 0;
      std::int64_t end   = 0;
      if (id == arrow::Type::LARGE_LIST) {
        auto const& lists = static_cast<arrow::LargeListArray const&>(*node.array);
        begin             = lists.value_offset(row);
        end               = begin + lists.value_length(row);
      } else {
        auto const& lists = static_cast<arrow::ListArray const&>(*node.array);
        begin             = lists.value_offset(row);
        end               = begin + lists.value_length(row);
      }
      for (std::int64_t element = begin; element < end; ++element) {
        encode_value(node.children[0], element, out);
      }
      out.push_back(static_cast<char>(END));
      return;
    }
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW: {
      // As the list it views: its elements from its offset, in order.
      std::int64_t begin = 0;
      std::int64_t size  = 0;
      if (id == arrow::Type::LARGE_LIST_VIEW) {
        auto const& lists = static_cast<arrow::LargeListViewArray const&>(*node.array);
        begin             = lists.value_offset(row);
        size              = lists.value_length(row);
      } else {
        auto const& lists = static_cast<arrow::ListViewArray const&>(*node.array);
        begin             = lists.value_offset(row);
        size              = lists.value_length(row);
      }
      for (std::int64_t element = begin; element < begin + size; ++element) {
        encode_value(node.children[0], element, out);
      }
      out.push_back(static_cast<char>(END));
      return;
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      auto const& lists        = static_cast<arrow::FixedSizeListArray const&>(*node.array);
      std::int64_t const begin = lists.value_offset(row);
      for (std::int64_t element = begin; element < begin + lists.value_length(row); ++element) {
        encode_value(node.children[0], element, out);
      }
      return;
    }
    case arrow::Type::STRUCT:
      for (auto const& field : node.children) {
        encode_value(field, row, out);
      }
      return;
    default:
      break;
  }
  SPILLWAY_FAIL("encoding a nested value: " + node.array->type()->ToString() + " has no encoding",
                logic_error);
}

void encode_value(encoder_node const& node, std::int64_t row, row_writer& out) {
  if (node.id == arrow::Type::DICTIONARY && !node.array->IsNull(row)) {
    encode_value(node.children[0], value_index(node, row), out);  // null where its value is
    return;
  }
  if (node.id == arrow::Type::NA || node.array->IsNull(row)) {
    out.push_back(static_cast<char>(NULL_VALUE));
    return;
  }
  if (is_float(node.id)) {
    bool const nan = node.id == arrow::Type::FLOAT
                       ? std::isnan(static_cast<arrow::FloatArray const&>(*node.array).Value(row))
                       : std::isnan(static_cast<arrow::DoubleArray const&>(*node.array).Value(row));
    if (nan) {
      // After every number, before null, every NaN alike (as DuckDB has them); its bits kept
      // after the body, so that the NaN comes back.
      out.push_back(static_cast<char>(NAN_VALUE));
      std::uint64_t bits = 0;
      std::memcpy(&bits, node.values + row * node.width, static_cast<std::size_t>(node.width));
      out.keep_exact(bits);
      return;
    }
  }
  out.push_back(static_cast<char>(VALUE));
  encode_body(node, row, out);
}

// ---------------------------------------------------------------------------------------------
// Types

/// The text of a leaf type in a layout: what its encoding depends on.
std::string leaf_layout(arrow::DataType const& type) {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
    case arrow::Type::STRING_VIEW:
      return "string";
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::BINARY_VIEW:
      return "binary";
    case arrow::Type::TIMESTAMP:
      return arrow::timestamp(static_cast<arrow::TimestampType const&>(type).unit())->ToString();
    default:
      return type.ToString();
  }
}

std::string layout_of(arrow::DataType const& type) {
  switch (type.id()) {
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW:
      return "list<" + layout_of(*type.field(0)->type()) + ">";
    case arrow::Type::DICTIONARY:
      return layout_of(*static_cast<arrow::DictionaryType const&>(type).value_type());
    case arrow::Type::FIXED_SIZE_LIST:
      return "fixed_size_list<" + layout_of(*type.field(0)->type()) + ">[" +
             std::to_string(static_cast<arrow::FixedSizeListType const&>(type).list_size()) + "]";
    case arrow::Type::MAP: {
      auto const& map = static_cast<arrow::MapType const&>(type);
      return "map<" + layout_of(*map.key_type()) + ", " + layout_of(*map.item_type()) + ">";
    }
    case arrow::Type::STRUCT: {
      std::string result = "struct<";
      for (int k = 0; k < type.num_fields(); ++k) {
        result += (k > 0 ? ", " : "") + layout_of(*type.field(k)->type());
      }
      return result + ">";
    }
    default:
      return leaf_layout(type);
  }
}

bool is_encodable_leaf(arrow::Type::type id) noexcept {
  return id == arrow::Type::NA || id == arrow::Type::BOOL || is_number(id) || is_decimal_type(id) ||
         is_string_like(id) || is_interval_type(id) || id == arrow::Type::FIXED_SIZE_BINARY;
}

/** @return the part of `type` without an encoding, or "" */
std::string unencodable(arrow::DataType const& type) {
  auto const id = type.id();
  if (is_encodable_leaf(id)) {
    return {};
  }
  if (id == arrow::Type::DICTIONARY) {
    return unencodable(*static_cast<arrow::DictionaryType const&>(type).value_type());
  }
  if (has_list_offsets(id) || is_list_view_type(id) || id == arrow::Type::FIXED_SIZE_LIST ||
      id == arrow::Type::STRUCT) {
    for (auto const& field : type.fields()) {
      auto part = unencodable(*field->type());
      if (!part.empty()) {
        return part;
      }
    }
    return {};
  }
  return type.ToString();
}

// ---------------------------------------------------------------------------------------------
// Sizes

/// About the bytes of the encodings of rows [begin, end) of `array`.
std::size_t encoded_bytes(arrow::Array const& array, std::int64_t begin, std::int64_t end) {
  auto const rows = static_cast<std::size_t>(std::max<std::int64_t>(end - begin, 0));
  if (rows == 0) {
    return 0;
  }
  auto const id = array.type_id();
  if (id == arrow::Type::NA) {
    return rows;
  }
  if (id == arrow::Type::BOOL) {
    return 2 * rows;
  }
  if (is_number(id) || is_decimal_type(id) || id == arrow::Type::FIXED_SIZE_BINARY) {
    return rows * (1 + static_cast<std::size_t>(array.type()->byte_width()));
  }
  if (id == arrow::Type::INTERVAL_DAY_TIME) {
    return rows * (1 + 8 + EXACT_BYTES);
  }
  if (id == arrow::Type::INTERVAL_MONTH_DAY_NANO) {
    return rows * (1 + MONTH_DAY_NANO_BYTES + 2 * EXACT_BYTES);
  }
  if (id == arrow::Type::DICTIONARY) {
    // The values' average per row.
    auto const& values = *static_cast<arrow::DictionaryArray const&>(array).dictionary();
    if (values.length() == 0) {
      return rows;
    }
    auto const count = static_cast<std::size_t>(values.length());
    return rows * ((encoded_bytes(values, 0, values.length()) + count - 1) / count);
  }
  if (id == arrow::Type::STRING || id == arrow::Type::BINARY) {
    auto const& strings = static_cast<arrow::BinaryArray const&>(array);
    return static_cast<std::size_t>(strings.value_offset(end) - strings.value_offset(begin)) +
           2 * rows;
  }
  if (id == arrow::Type::LARGE_STRING || id == arrow::Type::LARGE_BINARY) {
    auto const& strings = static_cast<arrow::LargeBinaryArray const&>(array);
    return static_cast<std::size_t>(strings.value_offset(end) - strings.value_offset(begin)) +
           2 * rows;
  }
  if (is_string_like(id)) {
    return 16 * rows;  // views: about their inline size
  }
  switch (id) {
    case arrow::Type::LIST:
    case arrow::Type::MAP: {
      auto const& lists = static_cast<arrow::ListArray const&>(array);
      return 2 * rows + encoded_bytes(*lists.values(),
                                      lists.value_offset(begin),
                                      lists.value_offset(end - 1) + lists.value_length(end - 1));
    }
    case arrow::Type::LARGE_LIST: {
      auto const& lists = static_cast<arrow::LargeListArray const&>(array);
      return 2 * rows + encoded_bytes(*lists.values(),
                                      lists.value_offset(begin),
                                      lists.value_offset(end - 1) + lists.value_length(end - 1));
    }
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW: {
      // The elements each view holds, wherever they lie.
      std::size_t bytes = 2 * rows;
      for (std::int64_t row = begin; row < end; ++row) {
        if (id == arrow::Type::LIST_VIEW) {
          auto const& lists = static_cast<arrow::ListViewArray const&>(array);
          bytes += encoded_bytes(*lists.values(),
                                 lists.value_offset(row),
                                 lists.value_offset(row) + lists.value_length(row));
        } else {
          auto const& lists = static_cast<arrow::LargeListViewArray const&>(array);
          bytes += encoded_bytes(*lists.values(),
                                 lists.value_offset(row),
                                 lists.value_offset(row) + lists.value_length(row));
        }
      }
      return bytes;
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      auto const& lists = static_cast<arrow::FixedSizeListArray const&>(array);
      return rows + encoded_bytes(*lists.values(),
                                  lists.value_offset(begin),
                                  lists.value_offset(end - 1) + lists.value_length(end - 1));
    }
    case arrow::Type::STRUCT: {
      auto const& structs = static_cast<arrow::StructArray const&>(array);
      std::size_t bytes   = rows;
      for (int k = 0; k < structs.num_fields(); ++k) {
        bytes += encoded_bytes(*structs.field(k), begin, end);
      }
      return bytes;
    }
    default:
      return 8 * rows;
  }
}

}  // namespace

bool is_nested_type(arrow::DataType const& type) noexcept {
  auto const id = type.id();
  if (id == arrow::Type::DICTIONARY) {
    return is_nested_type(*static_cast<arrow::DictionaryType const&>(type).value_type());
  }
  return has_list_offsets(id) || is_list_view_type(id) || id == arrow::Type::FIXED_SIZE_LIST ||
         id == arrow::Type::STRUCT || is_interval_type(id) || id == arrow::Type::NA;
}

std::string unencodable_part(arrow::DataType const& type) { return unencodable(type); }

nested_storage make_nested_storage(std::shared_ptr<arrow::DataType> const& type) {
  return nested_storage{type->ToString(), layout_of(*type), type};
}

std::shared_ptr<arrow::DataType> arrow_type_of(nested_storage const& storage) {
  SPILLWAY_EXPECTS(storage.handle != nullptr,
                   "a nested column of " + storage.arrow_type + " without its Arrow type",
                   logic_error);
  return std::const_pointer_cast<arrow::DataType>(
    std::static_pointer_cast<arrow::DataType const>(storage.handle));
}

bool same_nested_layouts(table_schema const& lhs, table_schema const& rhs) noexcept {
  if (lhs.size() != rhs.size()) {
    return false;
  }
  for (std::size_t c = 0; c < lhs.size(); ++c) {
    auto const& left  = lhs[c].nested;
    auto const& right = rhs[c].nested;
    if (left.has_value() != right.has_value() || (left && left->layout != right->layout)) {
      return false;
    }
  }
  return true;
}

std::unique_ptr<column> encode_nested_chunks(
  std::vector<std::shared_ptr<arrow::Array>> const& chunks,
  stream_view stream,
  resource_ref resource) {
  std::size_t rows  = 0;
  std::size_t nulls = 0;
  for (auto const& chunk : chunks) {
    rows += static_cast<std::size_t>(chunk->length());
    if (chunk->type_id() == arrow::Type::DICTIONARY) {
      // Null where the index is, or the value it points to.
      for (std::int64_t row = 0; row < chunk->length(); ++row) {
        if (is_null_value(*chunk, row)) {
          ++nulls;
        }
      }
    } else {
      nulls += static_cast<std::size_t>(chunk->null_count());
    }
  }
  if (!chunks.empty() && chunks.front()->type_id() == arrow::Type::NA) {
    // Nothing but nulls: the cheapest column that holds them.
    auto result = make_fixed_width_column(data_type{type_id::INT8},
                                          rows,
                                          rows > 0 ? mask_state::ALL_NULL : mask_state::UNALLOCATED,
                                          stream,
                                          resource);
    if (rows > 0) {
      std::memset(result->mutable_data<std::int8_t>(), 0, rows);
    }
    result->set_null_count(rows);
    return result;
  }
  std::string bytes;
  std::vector<std::int64_t> offsets;
  offsets.reserve(rows + 1);
  offsets.push_back(0);
  row_writer out{bytes};
  for (auto const& chunk : chunks) {
    auto const node  = make_encoder(*chunk, nullptr);
    bool const exact = has_exact_bits(*chunk->type());
    for (std::int64_t row = 0; row < chunk->length(); ++row) {
      if (!is_null_value(*chunk, row)) {
        encode_body(node, row, out);
        out.finish(exact);
      }
      offsets.push_back(static_cast<std::int64_t>(bytes.size()));
    }
  }
  auto const state = nulls > 0 ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  auto result =
    make_strings_column(rows, bytes.size(), state, stream, resource, data_type{type_id::BINARY});
  std::memcpy(result->mutable_offsets(), offsets.data(), offsets.size() * sizeof(std::int64_t));
  if (!bytes.empty()) {
    std::memcpy(result->mutable_chars(), bytes.data(), bytes.size());
  }
  std::size_t at = 0;
  for (auto const& chunk : chunks) {
    auto const length = static_cast<std::size_t>(chunk->length());
    if (nulls > 0 && chunk->type_id() == arrow::Type::DICTIONARY) {
      for (std::size_t row = 0; row < length; ++row) {
        if (is_null_value(*chunk, static_cast<std::int64_t>(row))) {
          set_bit(result->mutable_null_mask(), at + row, false);
        }
      }
    } else if (nulls > 0 && chunk->null_count() > 0) {
      copy_bits(result->mutable_null_mask(),
                at,
                chunk->null_bitmap_data(),
                static_cast<std::size_t>(chunk->offset()),
                length);
    }
    at += length;
  }
  result->set_null_count(nulls);
  return result;
}

std::vector<std::optional<std::string>> encode_rows(arrow::Array const& array) {
  std::vector<std::optional<std::string>> keys(static_cast<std::size_t>(array.length()));
  auto const node  = make_encoder(array, nullptr);
  bool const exact = has_exact_bits(*array.type());
  for (std::int64_t row = 0; row < array.length(); ++row) {
    if (!is_null_value(array, row)) {
      auto& key = keys[static_cast<std::size_t>(row)].emplace();
      row_writer out{key};
      encode_body(node, row, out);
      out.finish(exact);
    }
  }
  return keys;
}

std::size_t nested_spillway_size(arrow::Array const& chunk) {
  auto const rows        = static_cast<std::size_t>(chunk.length());
  std::size_t const mask = chunk.null_count() > 0 ? (rows + 7) / 8 : 0;
  if (chunk.type_id() == arrow::Type::NA) {
    return rows + mask;
  }
  return encoded_bytes(chunk, 0, chunk.length()) + (rows + 1) * sizeof(std::int64_t) + mask;
}

}  // namespace spillway::detail
