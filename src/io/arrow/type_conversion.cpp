/**
 * @file type_conversion.cpp
 * @brief spillway ↔ Arrow types and arrays.
 */
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/string_arrays.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/null_mask.hpp>

#include <arrow/array/concatenate.h>

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

/// The Arrow type of a dictionary's indices of spillway type `index`.
std::shared_ptr<arrow::DataType> to_arrow_index_type(type_id index) {
  switch (index) {
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
    default:
      break;
  }
  SPILLWAY_FAIL("a dictionary's indices cannot be " + to_string(data_type{index}), logic_error);
}

/// How the Arrow type `type` (not a dictionary) holds a STRING or BINARY column.
string_storage storage_of(arrow::DataType const& type) noexcept {
  switch (type.id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return string_storage::STRING;
    case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW:
      return string_storage::VIEW;
    case arrow::Type::FIXED_SIZE_BINARY:
      return string_storage::FIXED_SIZE;
    default:
      return string_storage::LARGE_STRING;
  }
}

/// Whether `type` is one of Arrow's string or binary types with int32 or int64 offsets.
bool has_offsets(arrow::Type::type type) noexcept {
  return type == arrow::Type::STRING || type == arrow::Type::LARGE_STRING ||
         type == arrow::Type::BINARY || type == arrow::Type::LARGE_BINARY;
}

/// Whether `type` is one of Arrow's string or binary types (offsets, views or fixed size).
bool is_string_or_binary(arrow::Type::type type) noexcept {
  return has_offsets(type) || type == arrow::Type::STRING_VIEW ||
         type == arrow::Type::BINARY_VIEW || type == arrow::Type::FIXED_SIZE_BINARY;
}

/// Row `row` of a chunk of one of Arrow's string or binary types (empty for a null row).
std::string_view binary_value(arrow::Array const& chunk, int64_t row) {
  if (chunk.IsNull(row)) {
    return {};
  }
  switch (chunk.type_id()) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return static_cast<arrow::BinaryArray const&>(chunk).GetView(row);
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return static_cast<arrow::LargeBinaryArray const&>(chunk).GetView(row);
    case arrow::Type::STRING_VIEW:
    case arrow::Type::BINARY_VIEW:
      return static_cast<arrow::BinaryViewArray const&>(chunk).GetView(row);
    case arrow::Type::FIXED_SIZE_BINARY:
      return static_cast<arrow::FixedSizeBinaryArray const&>(chunk).GetView(row);
    default:
      break;
  }
  SPILLWAY_FAIL("binary_value: " + chunk.type()->ToString() + " is not a string or binary type",
                logic_error);
}

}  // namespace

std::shared_ptr<arrow::DataType> to_arrow_type(data_type type,
                                               string_storage storage,
                                               std::string const& time_zone,
                                               std::int32_t fixed_size) {
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
      switch (storage) {
        case string_storage::STRING:
          return arrow::utf8();
        case string_storage::VIEW:
          return arrow::utf8_view();
        default:
          return arrow::large_utf8();
      }
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
    case type_id::BINARY:
      switch (storage) {
        case string_storage::STRING:
          return arrow::binary();
        case string_storage::VIEW:
          return arrow::binary_view();
        case string_storage::FIXED_SIZE:
          SPILLWAY_EXPECTS(
            fixed_size > 0,
            "to_arrow_type: fixed_size_binary of " + std::to_string(fixed_size) + " bytes",
            logic_error);
          return arrow::fixed_size_binary(fixed_size);
        default:
          return arrow::large_binary();
      }
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

std::shared_ptr<arrow::DataType> to_arrow_type(column_schema const& column) {
  if (column.nested) {
    return arrow_type_of(*column.nested);
  }
  auto values = to_arrow_type(column.type, column.storage, column.time_zone, column.fixed_size);
  if (!column.dictionary) {
    return values;
  }
  return arrow::dictionary(
    to_arrow_index_type(column.dictionary->index), std::move(values), column.dictionary->ordered);
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
    case arrow::Type::STRING_VIEW:
      return type_id::STRING;
    case arrow::Type::BINARY:
    case arrow::Type::LARGE_BINARY:
    case arrow::Type::BINARY_VIEW:
    case arrow::Type::FIXED_SIZE_BINARY:
      return type_id::BINARY;
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
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW:
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::STRUCT:
    case arrow::Type::MAP:
    case arrow::Type::INTERVAL_MONTHS:
    case arrow::Type::INTERVAL_DAY_TIME:
    case arrow::Type::INTERVAL_MONTH_DAY_NANO:
      // Each row's value encoded as bytes that order as the value (nested_encoding.hpp).
      if (unencodable_part(type).empty()) {
        return type_id::BINARY;
      }
      break;
    case arrow::Type::NA:
      return type_id::INT8;  // all null
    case arrow::Type::DICTIONARY: {
      // Decoded on reading: the column has its values' type, and sorts and hashes by value.
      auto const& values = *static_cast<arrow::DictionaryType const&>(type).value_type();
      if (values.id() != arrow::Type::DICTIONARY && !is_nested_type(values)) {
        return from_arrow_type(values, column, file);
      }
      if (is_nested_type(values) && unencodable_part(type).empty()) {
        return type_id::BINARY;  // nested values: encoded by value, as a nested column
      }
      break;
    }
    default:
      break;
  }
  std::string const part = is_nested_type(type) ? unencodable_part(type) : std::string{};
  SPILLWAY_FAIL("column '" + column + "' of '" + file + "' has type " + type.ToString() +
                  ", which spillway does not support (" +
                  (part.empty() ? std::string{} : part + " inside a nested type; ") +
                  "supported: bool, int8-64, uint8-64, float, double, timestamp, date32, "
                  "date64, time32, time64, duration, decimal32-256, string, large_string, "
                  "string_view, binary, large_binary, binary_view, fixed_size_binary, "
                  "month_interval, day_time_interval, month_day_nano_interval, null, "
                  "dictionaries of these, and list, large_list, list_view, large_list_view, "
                  "fixed_size_list, struct and map to any depth of these, and dictionaries of "
                  "them)",
                not_supported);
}

std::shared_ptr<arrow::KeyValueMetadata const> to_arrow_metadata(key_value_metadata const& pairs) {
  if (pairs.empty()) {
    return nullptr;
  }
  std::vector<std::string> keys;
  std::vector<std::string> values;
  for (auto const& [key, value] : pairs) {
    keys.push_back(key);
    values.push_back(value);
  }
  return arrow::key_value_metadata(std::move(keys), std::move(values));
}

key_value_metadata from_arrow_metadata(arrow::KeyValueMetadata const* metadata) {
  key_value_metadata pairs;
  if (metadata != nullptr) {
    for (int64_t i = 0; i < metadata->size(); ++i) {
      pairs.emplace_back(metadata->key(i), metadata->value(i));
    }
  }
  return pairs;
}

std::shared_ptr<arrow::Schema> to_arrow_schema(table_schema const& schema) {
  arrow::FieldVector fields;
  fields.reserve(schema.size());
  for (auto const& column : schema) {
    fields.push_back(arrow::field(
      column.name, to_arrow_type(column), column.nullable, to_arrow_metadata(column.metadata)));
  }
  return arrow::schema(std::move(fields), to_arrow_metadata(schema.metadata));
}

column_schema from_arrow_field(arrow::Field const& field, std::string const& file) {
  column_schema result{field.name(), from_arrow_type(*field.type(), field.name(), file)};
  if (is_nested_type(*field.type())) {
    result.nested   = make_nested_storage(field.type());
    result.nullable = field.nullable();
    result.metadata = from_arrow_metadata(field.metadata().get());
    return result;
  }
  arrow::DataType const* values = field.type().get();
  if (values->id() == arrow::Type::DICTIONARY) {
    auto const& dictionary = static_cast<arrow::DictionaryType const&>(*values);
    result.dictionary      = dictionary_encoding{
      from_arrow_type(*dictionary.index_type(), field.name(), file).id(), dictionary.ordered()};
    values = dictionary.value_type().get();
  }
  result.storage = storage_of(*values);
  if (values->id() == arrow::Type::FIXED_SIZE_BINARY) {
    result.fixed_size = static_cast<arrow::FixedSizeBinaryType const&>(*values).byte_width();
  }
  if (values->id() == arrow::Type::TIMESTAMP) {
    result.time_zone = static_cast<arrow::TimestampType const&>(*values).timezone();
  }
  result.nullable = field.nullable();
  result.metadata = from_arrow_metadata(field.metadata().get());
  return result;
}

table_schema from_arrow_schema(arrow::Schema const& schema, std::string const& file) {
  table_schema result;
  for (auto const& field : schema.fields()) {
    result.push_back(from_arrow_field(*field, file));
  }
  result.metadata = from_arrow_metadata(schema.metadata().get());
  return result;
}

std::shared_ptr<arrow::Array> to_arrow_array(column_view const& view,
                                             arrow::MemoryPool* pool,
                                             std::shared_ptr<arrow::DataType> const& arrow_type) {
  auto const type       = view.type();
  auto const rows       = static_cast<int64_t>(view.size());
  auto const offset     = static_cast<int64_t>(view.offset());
  std::size_t const end = view.offset() + view.size();
  std::shared_ptr<arrow::Buffer> validity;
  if (view.nullable() && view.null_count() > 0) {
    validity = wrap(view.null_mask(), (end + 7) / 8);
  }
  if (is_nested_type(*arrow_type)) {
    return decode_nested(view, arrow_type, pool);
  }
  auto const nulls = static_cast<int64_t>(view.null_count());
  auto const to    = arrow_type->id();
  if (!is_fixed_width(type) && (to == arrow::Type::STRING || to == arrow::Type::BINARY)) {
    return to_string_array(view, validity != nullptr, pool, arrow_type);
  }
  if (!is_fixed_width(type) && (to == arrow::Type::STRING_VIEW || to == arrow::Type::BINARY_VIEW)) {
    if (auto views = to_view_array(view, validity, arrow_type, pool)) {
      return views;
    }
  }
  if (!is_fixed_width(type) && (to == arrow::Type::STRING_VIEW || to == arrow::Type::BINARY_VIEW ||
                                to == arrow::Type::FIXED_SIZE_BINARY)) {
    return to_built_binary_array(view, pool, arrow_type);
  }
  if (!is_fixed_width(type)) {
    std::int64_t const* offsets = view.offsets() != nullptr ? view.offsets() : EMPTY_OFFSETS;
    std::size_t const chars =
      view.offsets() != nullptr ? static_cast<std::size_t>(offsets[end]) : 0;
    auto data =
      arrow::ArrayData::Make(arrow_type,
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
  auto data = arrow::ArrayData::Make(
    arrow_type, rows, {validity, wrap(view.head(), end * size_of(type))}, nulls, offset);
  return arrow::MakeArray(data);
}

std::shared_ptr<arrow::Array> to_arrow_array(column_view const& view,
                                             arrow::MemoryPool* pool,
                                             string_storage storage,
                                             std::string const& time_zone) {
  return to_arrow_array(view, pool, to_arrow_type(view.type(), storage, time_zone));
}

nested_dictionaries& arrow_dictionaries::nested(std::size_t column) {
  if (nested_.size() <= column) {
    nested_.resize(column + 1);
    for (auto& dictionaries : nested_) {
      dictionaries.never_empty = never_empty_;
    }
  }
  return nested_[column];
}

std::shared_ptr<arrow::Array> arrow_dictionaries::encode(std::size_t column,
                                                         column_view const& view,
                                                         arrow::DictionaryType const& type,
                                                         arrow::MemoryPool* pool) {
  if (columns_.size() <= column) {
    columns_.resize(column + 1);
  }
  auto& state             = columns_[column];
  auto const& values_type = type.value_type();
  std::string const what  = "dictionary-encoding a column as " + type.ToString();
  bool const variable     = !is_fixed_width(view.type());
  std::size_t const width = variable ? 0 : size_of(view.type());
  auto const* fixed       = variable ? nullptr : static_cast<char const*>(view.head());
  auto const index_bytes  = static_cast<std::size_t>(type.index_type()->byte_width());
  bool const index_signed = arrow::is_signed_integer(type.index_type()->id());
  std::uint64_t const most =
    index_bytes >= 8 ? (index_signed ? INT64_MAX : UINT64_MAX)
                     : (std::uint64_t{1} << (8 * index_bytes - (index_signed ? 1 : 0))) - 1;
  auto const rows = static_cast<int64_t>(view.size());
  auto indices    = value_or_throw(
    arrow::AllocateBuffer(static_cast<int64_t>(view.size() * index_bytes), pool), what);
  std::vector<std::size_t> fresh;  // rows whose values are new to the dictionary
  for (std::size_t row = 0; row < view.size(); ++row) {
    std::uint64_t index = 0;
    if (!view.is_null(row)) {
      std::string_view const value =
        variable ? view.string_at(row)
                 : std::string_view{fixed + (view.offset() + row) * width, width};
      auto const [found, inserted] =
        state.index.try_emplace(std::string{value}, state.reserved + state.index.size());
      if (inserted) {
        SPILLWAY_EXPECTS(found->second <= most,
                         "column has more distinct values than " + type.ToString() +
                           " can index (" + std::to_string(most + 1) + ")",
                         not_supported);
        fresh.push_back(row);
      }
      index = found->second;
    }
    std::memcpy(indices->mutable_data() + row * index_bytes, &index, index_bytes);  // little end
  }
  if (!fresh.empty() || !state.values) {
    arrow::ArrayVector pieces;
    if (state.values) {
      pieces.push_back(state.values);
    }
    if (!fresh.empty()) {
      auto const dense = to_arrow_array(view, pool, values_type);
      for (auto const row : fresh) {
        pieces.push_back(dense->Slice(static_cast<int64_t>(row), 1));
      }
    }
    state.values = pieces.empty() ? value_or_throw(arrow::MakeEmptyArray(values_type, pool), what)
                                  : value_or_throw(arrow::Concatenate(pieces, pool), what);
  }
  if (never_empty_ && state.values->length() == 0) {
    state.values   = value_or_throw(arrow::MakeArrayOfNull(values_type, 1, pool), what);
    state.reserved = 1;
  }
  std::shared_ptr<arrow::Buffer> mask;
  if (view.has_nulls()) {
    auto packed = value_or_throw(arrow::AllocateBitmap(rows, pool), what);
    copy_bits(packed->mutable_data(), 0, view.null_mask(), view.offset(), view.size());
    mask = std::move(packed);
  }
  auto index_array = arrow::MakeArray(
    arrow::ArrayData::Make(type.index_type(),
                           rows,
                           {std::move(mask), std::shared_ptr<arrow::Buffer>(std::move(indices))},
                           static_cast<int64_t>(view.null_count()),
                           0));
  return std::make_shared<arrow::DictionaryArray>(
    arrow::dictionary(type.index_type(), values_type, type.ordered()), index_array, state.values);
}

std::vector<std::shared_ptr<arrow::RecordBatch>> to_arrow_batches(
  table_view const& input,
  std::shared_ptr<arrow::Schema> const& schema,
  arrow::MemoryPool* pool,
  std::int64_t max_chars,
  arrow_dictionaries* dictionaries) {
  arrow_dictionaries own;
  if (dictionaries == nullptr) {
    dictionaries = &own;
  }
  std::vector<std::size_t> narrow;  // the string and binary (int32 offsets) columns
  for (std::size_t c = 0; c < input.num_columns(); ++c) {
    auto const& field_type = *schema->field(static_cast<int>(c))->type();
    bool const is_narrow =
      field_type.id() == arrow::Type::STRING || field_type.id() == arrow::Type::BINARY;
    if (is_narrow && input.column(c).offsets() != nullptr) {
      narrow.push_back(c);
    }
    SPILLWAY_EXPECTS(
      field_type.id() == arrow::Type::DICTIONARY || is_nested_type(field_type) ||
        (is_string_or_binary(field_type.id()) == !is_fixed_width(input.column(c).type())),
      "column '" + schema->field(static_cast<int>(c))->name() + "' of " +
        to_string(input.column(c).type()) + " cannot be written as " + field_type.ToString(),
      logic_error);
    SPILLWAY_EXPECTS(schema->field(static_cast<int>(c))->nullable() || !input.column(c).has_nulls(),
                     "column '" + schema->field(static_cast<int>(c))->name() +
                       "' holds nulls, but the schema it is written with (the input's first "
                       "file's) says it has none",
                     invalid_argument);
  }
  auto const batch_of = [&](table_view const& rows) {
    arrow::ArrayVector columns;
    columns.reserve(rows.num_columns());
    for (std::size_t c = 0; c < rows.num_columns(); ++c) {
      auto const& field_type = schema->field(static_cast<int>(c))->type();
      if (is_nested_type(*field_type)) {
        // Its dictionaries, at any level, grow from batch to batch as a top-level one does.
        columns.push_back(
          decode_nested(rows.column(c), field_type, pool, &dictionaries->nested(c)));
        continue;
      }
      columns.push_back(
        field_type->id() == arrow::Type::DICTIONARY
          ? dictionaries->encode(
              c, rows.column(c), static_cast<arrow::DictionaryType const&>(*field_type), pool)
          : to_arrow_array(rows.column(c), pool, field_type));
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

/** @return the offset of row `row` of a string or binary chunk (int32 or int64 offsets) */
std::int64_t string_offset(arrow::Array const& chunk, int64_t row) {
  if (chunk.type_id() == arrow::Type::LARGE_STRING ||
      chunk.type_id() == arrow::Type::LARGE_BINARY) {
    return static_cast<arrow::LargeBinaryArray const&>(chunk).value_offset(row);
  }
  return static_cast<arrow::BinaryArray const&>(chunk).value_offset(row);
}

uint8_t const* string_chars(arrow::Array const& chunk) {
  return chunk.data()->buffers[2] ? chunk.data()->buffers[2]->data() : nullptr;
}

/** @return the bytes of the values of a string or binary chunk, in all */
std::size_t chars_of(arrow::Array const& chunk) {
  if (chunk.length() == 0) {
    return 0;
  }
  if (has_offsets(chunk.type_id())) {
    return static_cast<std::size_t>(string_offset(chunk, chunk.length()) - string_offset(chunk, 0));
  }
  std::size_t chars = 0;
  if (chunk.type_id() == arrow::Type::STRING_VIEW || chunk.type_id() == arrow::Type::BINARY_VIEW) {
    for_each_view_value(chunk, [&](int64_t, std::string_view value) { chars += value.size(); });
    return chars;
  }
  for (int64_t row = 0; row < chunk.length(); ++row) {
    chars += binary_value(chunk, row).size();
  }
  return chars;
}

/**
 * @return the rows of the dictionary-encoded `chunk` decoded: a column of `type` (its values'),
 * from `resource`
 */
std::unique_ptr<column> decode_dictionary(arrow::DictionaryArray const& chunk,
                                          data_type type,
                                          stream_view stream,
                                          resource_ref resource) {
  auto const values = from_arrow_chunks({chunk.dictionary()}, type, stream, resource);
  // The indices as a gather map; a null index points past the values, to a null row.
  auto const rows = static_cast<std::size_t>(chunk.length());
  std::vector<std::int64_t> map(rows);
  auto const past = static_cast<std::int64_t>(values->size());
  for (std::size_t row = 0; row < rows; ++row) {
    auto const at = static_cast<int64_t>(row);
    map[row]      = chunk.IsNull(at) ? past : chunk.GetValueIndex(at);
    SPILLWAY_EXPECTS(chunk.IsNull(at) || (map[row] >= 0 && map[row] < past),
                     "a dictionary index " + std::to_string(map[row]) + " is outside its " +
                       std::to_string(past) + " values",
                     corruption_error);
  }
  column_view const map_view{data_type{type_id::INT64}, rows, map.data(), nullptr, 0};
  table_view const source{std::vector<column_view>{values->view()}};
  auto decoded = detail::gather(source, map_view, out_of_bounds_policy::NULLIFY, stream, resource);
  return std::move(decoded->release()[0]);
}

}  // namespace

std::size_t spillway_size(arrow::Array const& chunk) {
  if (is_nested_type(*chunk.type())) {
    return nested_spillway_size(chunk);
  }
  auto const rows        = static_cast<std::size_t>(chunk.length());
  std::size_t const mask = chunk.null_count() > 0 ? (rows + 7) / 8 : 0;
  if (chunk.type_id() == arrow::Type::DICTIONARY) {
    // About the decoded bytes: the values' average per row.
    auto const& values = *static_cast<arrow::DictionaryArray const&>(chunk).dictionary();
    std::size_t const per_value =
      values.length() > 0
        ? (spillway_size(values) + static_cast<std::size_t>(values.length()) - 1) /
            static_cast<std::size_t>(values.length())
        : sizeof(std::int64_t);
    return rows * per_value + mask;
  }
  if (is_string_or_binary(chunk.type_id())) {
    return chars_of(chunk) + (rows + 1) * sizeof(std::int64_t) + mask;
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
  if (!chunks.empty() && is_nested_type(*chunks.front()->type())) {
    return encode_nested_chunks(chunks, stream, resource);
  }
  if (std::any_of(chunks.begin(), chunks.end(), [](auto const& chunk) {
        return chunk->type_id() == arrow::Type::DICTIONARY;
      })) {
    // Dictionaries decoded chunk by chunk, the runs of other chunks converted as one, and the
    // pieces joined.
    std::vector<std::unique_ptr<column>> pieces;
    std::vector<std::shared_ptr<arrow::Array>> run;
    auto const end_run = [&] {
      if (!run.empty()) {
        pieces.push_back(from_arrow_chunks(run, type, stream, resource));
        run.clear();
      }
    };
    for (auto const& chunk : chunks) {
      if (chunk->type_id() != arrow::Type::DICTIONARY) {
        run.push_back(chunk);
        continue;
      }
      end_run();
      pieces.push_back(decode_dictionary(
        static_cast<arrow::DictionaryArray const&>(*chunk), type, stream, resource));
    }
    end_run();
    if (pieces.size() == 1) {
      return std::move(pieces.front());
    }
    std::vector<table_view> views;
    for (auto const& piece : pieces) {
      views.push_back(table_view{std::vector<column_view>{piece->view()}});
    }
    auto joined = detail::concatenate(views, stream, resource);
    return std::move(joined->release()[0]);
  }
  bool const variable = !is_fixed_width(type);
  std::size_t rows    = 0;
  std::size_t nulls   = 0;
  std::size_t chars   = 0;
  for (auto const& chunk : chunks) {
    rows += static_cast<std::size_t>(chunk->length());
    nulls += static_cast<std::size_t>(chunk->null_count());
    if (variable) {
      chars += chars_of(*chunk);
    }
  }
  auto const state     = nulls > 0 ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  auto result          = variable ? make_strings_column(rows, chars, state, stream, resource, type)
                                  : make_fixed_width_column(type, rows, state, stream, resource);
  std::size_t at       = 0;
  std::int64_t char_at = 0;
  if (variable) {
    result->mutable_offsets()[0] = 0;
  }
  for (auto const& chunk : chunks) {
    auto const length = static_cast<std::size_t>(chunk->length());
    auto const offset = static_cast<std::size_t>(chunk->offset());
    if (nulls > 0 && chunk->null_count() > 0) {
      copy_bits(result->mutable_null_mask(), at, chunk->null_bitmap_data(), offset, length);
    }
    if (variable && (chunk->type_id() == arrow::Type::STRING_VIEW ||
                     chunk->type_id() == arrow::Type::BINARY_VIEW)) {
      // Views: copied one by one, straight from the views.
      auto* offsets = result->mutable_offsets();
      auto* bytes   = result->mutable_chars();
      for_each_view_value(*chunk, [&](int64_t row, std::string_view value) {
        if (!value.empty()) {
          std::memcpy(bytes + char_at, value.data(), value.size());
        }
        char_at += static_cast<std::int64_t>(value.size());
        offsets[at + static_cast<std::size_t>(row) + 1] = char_at;
      });
    } else if (variable && !has_offsets(chunk->type_id())) {
      // Fixed-size values: copied one by one.
      auto* offsets = result->mutable_offsets();
      for (std::size_t row = 0; row < length; ++row) {
        std::string_view const value = binary_value(*chunk, static_cast<int64_t>(row));
        if (!value.empty()) {
          std::memcpy(result->mutable_chars() + char_at, value.data(), value.size());
        }
        char_at += static_cast<std::int64_t>(value.size());
        offsets[at + row + 1] = char_at;
      }
    } else if (variable) {
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
