/**
 * @file type_conversion.cpp
 * @brief spillway ↔ Arrow types and arrays.
 */
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/null_mask.hpp>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace spillway::detail {
namespace {

arrow::TimeUnit::type to_arrow_unit(time_unit unit) noexcept {
  switch (unit) {
    case time_unit::SECOND:
      return arrow::TimeUnit::SECOND;
    case time_unit::MILLISECOND:
      return arrow::TimeUnit::MILLI;
    case time_unit::MICROSECOND:
      return arrow::TimeUnit::MICRO;
    case time_unit::NANOSECOND:
      return arrow::TimeUnit::NANO;
  }
  return arrow::TimeUnit::NANO;
}

time_unit from_arrow_unit(arrow::TimeUnit::type unit) noexcept {
  switch (unit) {
    case arrow::TimeUnit::SECOND:
      return time_unit::SECOND;
    case arrow::TimeUnit::MILLI:
      return time_unit::MILLISECOND;
    case arrow::TimeUnit::MICRO:
      return time_unit::MICROSECOND;
    case arrow::TimeUnit::NANO:
      return time_unit::NANOSECOND;
  }
  return time_unit::NANOSECOND;
}

/** @brief Wraps memory that Arrow must not free. */
std::shared_ptr<arrow::Buffer> wrap(void const* data, std::size_t bytes) {
  return std::make_shared<arrow::Buffer>(static_cast<uint8_t const*>(data),
                                         static_cast<int64_t>(bytes));
}

/// The offsets of an empty STRING column that has no offsets buffer.
alignas(8) constexpr std::int64_t EMPTY_OFFSETS[1] = {0};
/// The characters of a STRING column without any (all null or empty): an allocation of no bytes
/// has no address, but Arrow requires a value buffer, of no bytes, with one.
alignas(8) constexpr char NO_CHARS[1] = {0};

/**
 * @return an Arrow string (utf8) array of `view`: its characters shared, its offsets rebased to 0
 * and narrowed to int32, and its mask when `masked`, copied into memory from `pool`
 */
std::shared_ptr<arrow::Array> to_string_array(column_view const& view,
                                              bool masked,
                                              arrow::MemoryPool* pool) {
  auto const rows = static_cast<int64_t>(view.size());
  auto offsets    = value_or_throw(
    arrow::AllocateBuffer(static_cast<int64_t>((view.size() + 1) * sizeof(std::int32_t)), pool),
    "narrowing the offsets of a string column");
  auto* narrow             = reinterpret_cast<std::int32_t*>(offsets->mutable_data());
  char const* chars        = NO_CHARS;
  std::int64_t first       = 0;
  std::int64_t const* wide = view.offsets();
  if (wide != nullptr) {
    wide += view.offset();
    first = wide[0];
    SPILLWAY_EXPECTS(wide[view.size()] - first <= MAX_STRING_ARRAY_CHARS,
                     "to_string_array: " + std::to_string(wide[view.size()] - first) +
                       " characters do not fit int32 offsets",
                     logic_error);
    if (view.chars() != nullptr) {
      chars = view.chars() + first;
    }
  }
  narrow[0] = 0;
  for (std::size_t row = 0; row < view.size(); ++row) {
    narrow[row + 1] = static_cast<std::int32_t>(wide[row + 1] - first);
  }
  auto const bytes = static_cast<std::size_t>(narrow[view.size()]);
  // The array starts at row 0 of its offsets, so the mask is copied to start at bit 0 too.
  std::shared_ptr<arrow::Buffer> mask;
  if (masked) {
    auto packed = value_or_throw(arrow::AllocateBitmap(rows, pool), "copying a string mask");
    copy_bits(packed->mutable_data(), 0, view.null_mask(), view.offset(), view.size());
    mask = std::move(packed);
  }
  return arrow::MakeArray(arrow::ArrayData::Make(
    arrow::utf8(),
    rows,
    {std::move(mask), std::shared_ptr<arrow::Buffer>(std::move(offsets)), wrap(chars, bytes)},
    static_cast<int64_t>(view.null_count()),
    0));
}

}  // namespace

std::shared_ptr<arrow::DataType> to_arrow_type(data_type type,
                                               string_storage storage,
                                               std::string const& time_zone) {
  switch (type.id()) {
    case type_id::BOOL8:
      return arrow::boolean();
    case type_id::INT8:
      return arrow::int8();
    case type_id::INT16:
      return arrow::int16();
    case type_id::INT32:
      return arrow::int32();
    case type_id::INT64:
      return arrow::int64();
    case type_id::UINT8:
      return arrow::uint8();
    case type_id::UINT16:
      return arrow::uint16();
    case type_id::UINT32:
      return arrow::uint32();
    case type_id::UINT64:
      return arrow::uint64();
    case type_id::FLOAT32:
      return arrow::float32();
    case type_id::FLOAT64:
      return arrow::float64();
    case type_id::TIMESTAMP:
      return arrow::timestamp(to_arrow_unit(type.unit()), time_zone);
    case type_id::STRING:
      return storage == string_storage::STRING ? arrow::utf8() : arrow::large_utf8();
    case type_id::DATE32:
      return arrow::date32();
    case type_id::DATE64:
      return arrow::date64();
    case type_id::TIME32:
      return arrow::time32(to_arrow_unit(type.unit()));
    case type_id::TIME64:
      return arrow::time64(to_arrow_unit(type.unit()));
    case type_id::DURATION:
      return arrow::duration(to_arrow_unit(type.unit()));
    case type_id::DECIMAL32:
      return arrow::decimal32(type.precision(), type.scale());
    case type_id::DECIMAL64:
      return arrow::decimal64(type.precision(), type.scale());
    case type_id::DECIMAL128:
      return arrow::decimal128(type.precision(), type.scale());
    case type_id::DECIMAL256:
      return arrow::decimal256(type.precision(), type.scale());
  }
  SPILLWAY_FAIL("to_arrow_type: unknown type id", logic_error);
}

data_type from_arrow_type(arrow::DataType const& type,
                          std::string const& column,
                          std::string const& file) {
  switch (type.id()) {
    case arrow::Type::BOOL:
      return type_id::BOOL8;
    case arrow::Type::INT8:
      return type_id::INT8;
    case arrow::Type::INT16:
      return type_id::INT16;
    case arrow::Type::INT32:
      return type_id::INT32;
    case arrow::Type::INT64:
      return type_id::INT64;
    case arrow::Type::UINT8:
      return type_id::UINT8;
    case arrow::Type::UINT16:
      return type_id::UINT16;
    case arrow::Type::UINT32:
      return type_id::UINT32;
    case arrow::Type::UINT64:
      return type_id::UINT64;
    case arrow::Type::FLOAT:
      return type_id::FLOAT32;
    case arrow::Type::DOUBLE:
      return type_id::FLOAT64;
    case arrow::Type::TIMESTAMP:
      // Values are UTC instants whatever the zone; the zone is kept in the column's schema.
      return data_type{type_id::TIMESTAMP,
                       from_arrow_unit(static_cast<arrow::TimestampType const&>(type).unit())};
    case arrow::Type::STRING:
    case arrow::Type::LARGE_STRING:
      return type_id::STRING;
    case arrow::Type::DATE32:
      return type_id::DATE32;
    case arrow::Type::DATE64:
      return type_id::DATE64;
    case arrow::Type::TIME32:
      return data_type{type_id::TIME32,
                       from_arrow_unit(static_cast<arrow::Time32Type const&>(type).unit())};
    case arrow::Type::TIME64:
      return data_type{type_id::TIME64,
                       from_arrow_unit(static_cast<arrow::Time64Type const&>(type).unit())};
    case arrow::Type::DURATION:
      return data_type{type_id::DURATION,
                       from_arrow_unit(static_cast<arrow::DurationType const&>(type).unit())};
    case arrow::Type::DECIMAL32:
    case arrow::Type::DECIMAL64:
    case arrow::Type::DECIMAL128:
    case arrow::Type::DECIMAL256: {
      auto const& decimal = static_cast<arrow::DecimalType const&>(type);
      type_id const id    = type.id() == arrow::Type::DECIMAL32    ? type_id::DECIMAL32
                            : type.id() == arrow::Type::DECIMAL64  ? type_id::DECIMAL64
                            : type.id() == arrow::Type::DECIMAL128 ? type_id::DECIMAL128
                                                                   : type_id::DECIMAL256;
      return data_type{id, decimal.precision(), decimal.scale()};
    }
    default:
      break;
  }
  SPILLWAY_FAIL("column '" + column + "' of '" + file + "' has type " + type.ToString() +
                  ", which spillway does not support (supported: bool, int8-64, uint8-64, "
                  "float, double, timestamp, date32, date64, time32, time64, duration, "
                  "decimal32-256, string)",
                not_supported);
}

std::shared_ptr<arrow::Schema> to_arrow_schema(table_schema const& schema) {
  arrow::FieldVector fields;
  fields.reserve(schema.size());
  for (auto const& column : schema) {
    fields.push_back(arrow::field(
      column.name, to_arrow_type(column.type, column.storage, column.time_zone), true));
  }
  return arrow::schema(std::move(fields));
}

column_schema from_arrow_field(arrow::Field const& field, std::string const& file) {
  column_schema result{field.name(),
                       from_arrow_type(*field.type(), field.name(), file),
                       field.type()->id() == arrow::Type::STRING ? string_storage::STRING
                                                                 : string_storage::LARGE_STRING};
  if (field.type()->id() == arrow::Type::TIMESTAMP) {
    result.time_zone = static_cast<arrow::TimestampType const&>(*field.type()).timezone();
  }
  return result;
}

table_schema from_arrow_schema(arrow::Schema const& schema, std::string const& file) {
  table_schema result;
  for (auto const& field : schema.fields()) {
    result.push_back(from_arrow_field(*field, file));
  }
  return result;
}

std::shared_ptr<arrow::Array> to_arrow_array(column_view const& view,
                                             arrow::MemoryPool* pool,
                                             string_storage storage,
                                             std::string const& time_zone) {
  auto const type       = view.type();
  auto const rows       = static_cast<int64_t>(view.size());
  auto const offset     = static_cast<int64_t>(view.offset());
  std::size_t const end = view.offset() + view.size();
  std::shared_ptr<arrow::Buffer> validity;
  if (view.nullable() && view.null_count() > 0) {
    validity = wrap(view.null_mask(), (end + 7) / 8);
  }
  auto const nulls = static_cast<int64_t>(view.null_count());
  if (type.id() == type_id::STRING && storage == string_storage::STRING) {
    return to_string_array(view, validity != nullptr, pool);
  }
  if (type.id() == type_id::STRING) {
    std::int64_t const* offsets = view.offsets() != nullptr ? view.offsets() : EMPTY_OFFSETS;
    std::size_t const chars =
      view.offsets() != nullptr ? static_cast<std::size_t>(offsets[end]) : 0;
    auto data =
      arrow::ArrayData::Make(arrow::large_utf8(),
                             rows,
                             {validity,
                              wrap(offsets, (end + 1) * sizeof(std::int64_t)),
                              wrap(view.chars() != nullptr ? view.chars() : NO_CHARS, chars)},
                             nulls,
                             view.offsets() != nullptr ? offset : 0);
    return arrow::MakeArray(data);
  }
  if (type.id() == type_id::BOOL8) {
    // Bytes to bits; the packed array starts at bit 0 and its mask is re-based to match.
    auto values = value_or_throw(arrow::AllocateBitmap(rows, pool), "packing a BOOL8 column");
    std::memset(values->mutable_data(), 0, static_cast<std::size_t>(values->size()));
    auto const* bytes = view.data<std::uint8_t>();
    for (std::size_t row = 0; row < view.size(); ++row) {
      if (bytes[row] != 0) {
        set_bit(values->mutable_data(), row, true);
      }
    }
    std::shared_ptr<arrow::Buffer> mask;
    if (validity) {
      auto packed = value_or_throw(arrow::AllocateBitmap(rows, pool), "copying a BOOL8 mask");
      copy_bits(packed->mutable_data(), 0, view.null_mask(), view.offset(), view.size());
      mask = std::move(packed);
    }
    return arrow::MakeArray(
      arrow::ArrayData::Make(arrow::boolean(), rows, {mask, std::move(values)}, nulls, 0));
  }
  auto data = arrow::ArrayData::Make(to_arrow_type(type, storage, time_zone),
                                     rows,
                                     {validity, wrap(view.head(), end * size_of(type))},
                                     nulls,
                                     offset);
  return arrow::MakeArray(data);
}

std::vector<std::shared_ptr<arrow::RecordBatch>> to_arrow_batches(
  table_view const& input,
  std::shared_ptr<arrow::Schema> const& schema,
  arrow::MemoryPool* pool,
  std::int64_t max_chars) {
  std::vector<string_storage> storages;
  std::vector<std::string> time_zones;
  std::vector<std::size_t> narrow;  // the string (int32 offsets) columns
  for (std::size_t c = 0; c < input.num_columns(); ++c) {
    auto const& field_type = *schema->field(static_cast<int>(c))->type();
    bool const is_narrow   = field_type.id() == arrow::Type::STRING;
    storages.push_back(is_narrow ? string_storage::STRING : string_storage::LARGE_STRING);
    time_zones.push_back(field_type.id() == arrow::Type::TIMESTAMP
                           ? static_cast<arrow::TimestampType const&>(field_type).timezone()
                           : std::string{});
    if (is_narrow && input.column(c).offsets() != nullptr) {
      narrow.push_back(c);
    }
  }
  auto const batch_of = [&](table_view const& rows) {
    arrow::ArrayVector columns;
    columns.reserve(rows.num_columns());
    for (std::size_t c = 0; c < rows.num_columns(); ++c) {
      columns.push_back(to_arrow_array(rows.column(c), pool, storages[c], time_zones[c]));
    }
    return arrow::RecordBatch::Make(schema, static_cast<int64_t>(rows.num_rows()), columns);
  };
  std::size_t const rows = input.num_rows();
  if (rows == 0) {
    return {batch_of(input)};
  }
  std::vector<std::shared_ptr<arrow::RecordBatch>> batches;
  std::size_t begin = 0;
  do {
    // The most rows from `begin` whose characters fit `max_chars` in every string column.
    std::size_t end = rows;
    for (auto const c : narrow) {
      auto const view          = input.column(c);
      std::int64_t const* base = view.offsets() + view.offset();
      std::int64_t const limit = base[begin] + max_chars;
      std::size_t const fits =
        static_cast<std::size_t>(std::upper_bound(base + begin + 1, base + end + 1, limit) - base) -
        1;
      if (fits == begin) {
        SPILLWAY_FAIL("column '" + schema->field(static_cast<int>(c))->name() +
                        "' has a value of " + std::to_string(base[begin + 1] - base[begin]) +
                        " bytes, more than Arrow's string type holds (" +
                        std::to_string(max_chars) + ")",
                      not_supported);
      }
      end = fits;
    }
    batches.push_back(begin == 0 && end == rows ? batch_of(input)
                                                : batch_of(slice(input, begin, end)));
    begin = end;
  } while (begin < rows);
  return batches;
}

namespace {

/** @return the characters and the offset of row `row` of a string chunk (int32 or int64 offsets) */
std::int64_t string_offset(arrow::Array const& chunk, int64_t row) {
  if (chunk.type_id() == arrow::Type::LARGE_STRING) {
    return static_cast<arrow::LargeStringArray const&>(chunk).value_offset(row);
  }
  return static_cast<arrow::StringArray const&>(chunk).value_offset(row);
}

uint8_t const* string_chars(arrow::Array const& chunk) {
  return chunk.data()->buffers[2] ? chunk.data()->buffers[2]->data() : nullptr;
}

}  // namespace

std::size_t spillway_size(arrow::Array const& chunk) {
  auto const rows        = static_cast<std::size_t>(chunk.length());
  std::size_t const mask = chunk.null_count() > 0 ? (rows + 7) / 8 : 0;
  if (chunk.type_id() == arrow::Type::STRING || chunk.type_id() == arrow::Type::LARGE_STRING) {
    auto const chars =
      rows == 0
        ? 0
        : static_cast<std::size_t>(string_offset(chunk, chunk.length()) - string_offset(chunk, 0));
    return chars + (rows + 1) * sizeof(std::int64_t) + mask;
  }
  if (chunk.type_id() == arrow::Type::BOOL) {
    return rows + mask;
  }
  auto const width = chunk.type()->byte_width();
  return rows * static_cast<std::size_t>(width > 0 ? width : 1) + mask;
}

std::unique_ptr<column> from_arrow_chunks(std::vector<std::shared_ptr<arrow::Array>> const& chunks,
                                          data_type type,
                                          stream_view stream,
                                          resource_ref resource) {
  std::size_t rows  = 0;
  std::size_t nulls = 0;
  std::size_t chars = 0;
  for (auto const& chunk : chunks) {
    rows += static_cast<std::size_t>(chunk->length());
    nulls += static_cast<std::size_t>(chunk->null_count());
    if (type.id() == type_id::STRING && chunk->length() > 0) {
      chars +=
        static_cast<std::size_t>(string_offset(*chunk, chunk->length()) - string_offset(*chunk, 0));
    }
  }
  auto const state     = nulls > 0 ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  auto result          = type.id() == type_id::STRING
                           ? make_strings_column(rows, chars, state, stream, resource)
                           : make_fixed_width_column(type, rows, state, stream, resource);
  std::size_t at       = 0;
  std::int64_t char_at = 0;
  if (type.id() == type_id::STRING) {
    result->mutable_offsets()[0] = 0;
  }
  for (auto const& chunk : chunks) {
    auto const length = static_cast<std::size_t>(chunk->length());
    auto const offset = static_cast<std::size_t>(chunk->offset());
    if (nulls > 0 && chunk->null_count() > 0) {
      copy_bits(result->mutable_null_mask(), at, chunk->null_bitmap_data(), offset, length);
    }
    if (type.id() == type_id::STRING) {
      std::int64_t const first = length > 0 ? string_offset(*chunk, 0) : 0;
      auto* offsets            = result->mutable_offsets();
      for (std::size_t row = 0; row < length; ++row) {
        offsets[at + row + 1] =
          char_at + string_offset(*chunk, static_cast<int64_t>(row + 1)) - first;
      }
      std::int64_t const bytes = length > 0 ? offsets[at + length] - char_at : 0;
      if (bytes > 0) {
        std::memcpy(result->mutable_chars() + char_at,
                    string_chars(*chunk) + first,
                    static_cast<std::size_t>(bytes));
      }
      char_at += bytes;
    } else if (type.id() == type_id::BOOL8) {
      auto const* bits = chunk->data()->buffers[1]->data();
      auto* bytes      = result->mutable_data<std::uint8_t>() + at;
      for (std::size_t row = 0; row < length; ++row) {
        bytes[row] = bit_is_set(bits, offset + row) ? 1 : 0;
      }
    } else if (length > 0) {
      std::size_t const width = size_of(type);
      std::memcpy(result->mutable_data<std::uint8_t>() + at * width,
                  chunk->data()->buffers[1]->data() + offset * width,
                  length * width);
    }
    at += length;
  }
  result->set_null_count(nulls);
  return result;
}

void throw_arrow_error(arrow::Status const& status, std::string const& what) {
  std::string const message = what + ": " + status.ToString();
  if (status.IsIOError()) {
    SPILLWAY_FAIL(message, io_error);
  }
  if (status.IsOutOfMemory()) {
    throw out_of_memory(message);
  }
  if (status.IsNotImplemented()) {
    SPILLWAY_FAIL(message, not_supported);
  }
  // Invalid, SerializationError, corrupt metadata and the rest: the bytes are not what they
  // should be.
  SPILLWAY_FAIL(message, corruption_error);
}

}  // namespace spillway::detail
