/**
 * @file nested_arrays.hpp
 * @brief Random Arrow arrays of nested types (dictionaries and list views inside them, and
 * intervals included), with nulls at every level, for the tests of nested columns; and their
 * comparison by value.
 */
#pragma once

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace spillway::testing {

/** @brief A nested type to test, whether DuckDB reads its values faithfully, and Parquet. */
struct nested_shape {
  std::string name;
  std::shared_ptr<arrow::DataType> type;
  bool duckdb  = true;  ///< false where DuckDB rounds (durations, date64) or has no such type
  bool parquet = true;  ///< false where Parquet cannot hold it (intervals, nested dictionaries)
};

/** @return nested types of many shapes: every leaf type in lists, structs, maps, to depth 3 */
inline std::vector<nested_shape> nested_shapes() {
  using arrow::field;
  auto const point = arrow::struct_({field("x", arrow::int32()), field("y", arrow::utf8())});
  return {
    {"list_int64", arrow::list(arrow::int64())},
    {"list_int8", arrow::list(arrow::int8())},
    {"list_int16", arrow::list(arrow::int16())},
    {"list_int32", arrow::list(arrow::int32())},
    {"list_uint8", arrow::list(arrow::uint8())},
    {"list_uint16", arrow::list(arrow::uint16())},
    {"list_uint32", arrow::list(arrow::uint32())},
    {"list_uint64", arrow::list(arrow::uint64())},
    {"list_float", arrow::list(arrow::float32())},
    {"list_double", arrow::list(arrow::float64())},
    {"list_bool", arrow::list(arrow::boolean())},
    {"list_string", arrow::list(arrow::utf8())},
    {"list_binary", arrow::list(arrow::binary())},
    {"list_string_view", arrow::list(arrow::utf8_view())},
    {"list_binary_view", arrow::list(arrow::binary_view())},
    {"list_fixed_binary", arrow::list(arrow::fixed_size_binary(2))},
    {"list_date32", arrow::list(arrow::date32())},
    {"list_timestamp", arrow::list(arrow::timestamp(arrow::TimeUnit::MICRO))},
    {"list_time32", arrow::list(arrow::time32(arrow::TimeUnit::MILLI))},
    {"list_time64", arrow::list(arrow::time64(arrow::TimeUnit::MICRO))},
    {"list_null", arrow::list(arrow::null())},
    {"list_decimal128", arrow::list(arrow::decimal128(38, 6))},
    {"struct_decimal_string",
     arrow::struct_({field("d", arrow::decimal128(12, 2)), field("s", arrow::utf8())})},
    {"list_decimal32", arrow::list(arrow::decimal32(9, 2)), false},
    {"list_decimal64", arrow::list(arrow::decimal64(18, 4)), false},
    {"list_decimal256", arrow::list(arrow::decimal256(76, 10)), false},
    {"list_date64", arrow::list(arrow::date64()), false},
    {"list_duration", arrow::list(arrow::duration(arrow::TimeUnit::NANO)), false},
    {"list_timestamp_ns_utc", arrow::list(arrow::timestamp(arrow::TimeUnit::NANO, "UTC")), false},
    {"list_non_null_items", arrow::list(field("element", arrow::int32(), false))},
    {"large_list_large_string", arrow::large_list(arrow::large_utf8())},
    {"fixed_size_list_int16", arrow::fixed_size_list(arrow::int16(), 3)},
    {"struct", point},
    {"struct_of_everything",
     arrow::struct_({field("b", arrow::boolean()),
                     field("d", arrow::float64(), false),
                     field("l", arrow::list(arrow::uint8())),
                     field("s", point)})},
    {"map_string_int64", arrow::map(arrow::utf8(), arrow::int64())},
    {"map_int32_list", arrow::map(arrow::int32(), arrow::list(arrow::utf8()))},
    {"list_of_struct", arrow::list(point)},
    {"list_list_list", arrow::list(arrow::list(arrow::list(arrow::int8())))},
    {"deep",
     arrow::list(arrow::struct_(
       {field("x", arrow::list(arrow::int64())),
        field("y", arrow::struct_({field("z", arrow::float64()), field("w", arrow::boolean())})),
        field("f", arrow::fixed_size_list(arrow::utf8(), 2))}))},
    {"large_list_fixed_size_list", arrow::large_list(arrow::fixed_size_list(arrow::uint8(), 2))},
    {"fixed_size_list_struct", arrow::fixed_size_list(point, 2)},
    // Dictionaries inside nested types, and of nested values: by value.
    {"list_dictionary_string", arrow::list(arrow::dictionary(arrow::int32(), arrow::utf8()))},
    {"struct_dictionary",
     arrow::struct_({field("a", arrow::dictionary(arrow::int16(), arrow::utf8())),
                     field("b", arrow::dictionary(arrow::uint8(), arrow::boolean())),
                     field("c", arrow::int32())})},
    {"map_dictionary_items",
     arrow::map(arrow::utf8(), arrow::dictionary(arrow::int64(), arrow::float64(), true))},
    {"dictionary_of_lists",
     arrow::dictionary(arrow::int16(), arrow::list(arrow::int64())),
     true,
     false},
    {"list_dictionary_of_structs",
     arrow::list(arrow::dictionary(arrow::uint16(), point)),
     true,
     false},
    // List views: as the lists they view.
    {"list_view_int64", arrow::list_view(arrow::int64())},
    {"large_list_view_string", arrow::large_list_view(arrow::utf8())},
    {"list_list_view", arrow::list(arrow::list_view(arrow::int16()))},
    {"list_view_dictionary", arrow::list_view(arrow::dictionary(arrow::int32(), arrow::utf8()))},
    {"struct_large_list_view",
     arrow::struct_({field("v", arrow::large_list_view(point)), field("w", arrow::int8())})},
    // Intervals: by their length, as DuckDB has them (no Parquet type; pyarrow, and so the
    // DuckDB comparison, has no month or day_time intervals).
    {"month_day_nano", arrow::month_day_nano_interval(), true, false},
    {"list_month_day_nano", arrow::list(arrow::month_day_nano_interval()), true, false},
    {"dictionary_month_day_nano",
     arrow::dictionary(arrow::int32(), arrow::month_day_nano_interval()),
     true,
     false},
    {"month", arrow::month_interval(), false, false},
    {"day_time", arrow::day_time_interval(), false, false},
    {"struct_intervals",
     arrow::struct_({field("m", arrow::month_interval()), field("d", arrow::day_time_interval())}),
     false,
     false},
  };
}

/** @return whether `type` holds a dictionary or a list view at some level */
inline bool has_dictionaries_or_views(arrow::DataType const& type) {
  if (type.id() == arrow::Type::DICTIONARY || type.id() == arrow::Type::LIST_VIEW ||
      type.id() == arrow::Type::LARGE_LIST_VIEW) {
    return true;
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [](auto const& field) {
    return has_dictionaries_or_views(*field->type());
  });
}

/** @return `type` with its dictionaries as their values and its list views as lists */
inline std::shared_ptr<arrow::DataType> plain_of(std::shared_ptr<arrow::DataType> const& type) {
  if (!has_dictionaries_or_views(*type)) {
    return type;
  }
  auto const field_of = [](std::shared_ptr<arrow::Field> const& field) {
    return field->WithType(plain_of(field->type()));
  };
  switch (type->id()) {
    case arrow::Type::DICTIONARY:
      return plain_of(static_cast<arrow::DictionaryType const&>(*type).value_type());
    case arrow::Type::LIST:
    case arrow::Type::LIST_VIEW:
      return arrow::list(field_of(type->field(0)));
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LARGE_LIST_VIEW:
      return arrow::large_list(field_of(type->field(0)));
    case arrow::Type::FIXED_SIZE_LIST:
      return arrow::fixed_size_list(
        field_of(type->field(0)), static_cast<arrow::FixedSizeListType const&>(*type).list_size());
    case arrow::Type::MAP:
      return arrow::MapType::Make(field_of(type->field(0))).ValueOrDie();
    default: {
      arrow::FieldVector fields;
      for (auto const& field : type->fields()) {
        fields.push_back(field_of(field));
      }
      return arrow::struct_(fields);
    }
  }
}

/**
 * @return the values of `array` (at row `row`), resolved through dictionaries: the array and
 * row that hold the value
 */
inline std::pair<arrow::Array const*, std::int64_t> resolve(arrow::Array const& array,
                                                            std::int64_t row) {
  if (array.type_id() != arrow::Type::DICTIONARY || array.IsNull(row)) {
    return {&array, row};
  }
  auto const& dictionary = static_cast<arrow::DictionaryArray const&>(array);
  return resolve(*dictionary.dictionary(), dictionary.GetValueIndex(row));
}

/** @return the first element and the length of list `row` of a list-like `array` */
inline std::pair<std::int64_t, std::int64_t> list_range(arrow::Array const& array,
                                                        std::int64_t row) {
  switch (array.type_id()) {
    case arrow::Type::LIST:
    case arrow::Type::MAP: {
      auto const& lists = static_cast<arrow::ListArray const&>(array);
      return {lists.value_offset(row), lists.value_length(row)};
    }
    case arrow::Type::LARGE_LIST: {
      auto const& lists = static_cast<arrow::LargeListArray const&>(array);
      return {lists.value_offset(row), lists.value_length(row)};
    }
    case arrow::Type::LIST_VIEW: {
      auto const& lists = static_cast<arrow::ListViewArray const&>(array);
      return {lists.value_offset(row), lists.value_length(row)};
    }
    case arrow::Type::LARGE_LIST_VIEW: {
      auto const& lists = static_cast<arrow::LargeListViewArray const&>(array);
      return {lists.value_offset(row), lists.value_length(row)};
    }
    default: {
      auto const& lists = static_cast<arrow::FixedSizeListArray const&>(array);
      return {lists.value_offset(row), lists.value_length(row)};
    }
  }
}

/** @return the elements of a list-like `array` */
inline std::shared_ptr<arrow::Array> list_values(arrow::Array const& array) {
  return arrow::MakeArray(array.data()->child_data[0]);
}

/**
 * @return whether row `a_row` of `a` and row `b_row` of `b` hold the same value, dictionaries
 * compared by value, list views as lists, NaNs equal and -0.0 apart from 0.0
 */
inline bool same_value(arrow::Array const& a_array,
                       std::int64_t a_row,
                       arrow::Array const& b_array,
                       std::int64_t b_row) {
  auto const [a, i] = resolve(a_array, a_row);
  auto const [b, j] = resolve(b_array, b_row);
  if (a->IsNull(i) || b->IsNull(j)) {
    return a->IsNull(i) && b->IsNull(j);
  }
  switch (a->type_id()) {
    case arrow::Type::LIST:
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LIST_VIEW:
    case arrow::Type::LARGE_LIST_VIEW:
    case arrow::Type::FIXED_SIZE_LIST:
    case arrow::Type::MAP: {
      auto const [a_first, a_length] = list_range(*a, i);
      auto const [b_first, b_length] = list_range(*b, j);
      if (a_length != b_length) {
        return false;
      }
      auto const a_values = list_values(*a);
      auto const b_values = list_values(*b);
      for (std::int64_t k = 0; k < a_length; ++k) {
        if (!same_value(*a_values, a_first + k, *b_values, b_first + k)) {
          return false;
        }
      }
      return true;
    }
    case arrow::Type::STRUCT: {
      auto const& a_struct = static_cast<arrow::StructArray const&>(*a);
      auto const& b_struct = static_cast<arrow::StructArray const&>(*b);
      for (int k = 0; k < a_struct.num_fields(); ++k) {
        if (!same_value(*a_struct.field(k), i, *b_struct.field(k), j)) {
          return false;
        }
      }
      return true;
    }
    default: {
      auto const options =
        arrow::EqualOptions::Defaults().nans_equal(true).signed_zeros_equal(false);
      return a->GetScalar(i).ValueOrDie()->Equals(*b->GetScalar(j).ValueOrDie(), options);
    }
  }
}

/** @return "" when `got` and `want` hold the same values (`same_value`), else the first not */
inline std::string value_difference(arrow::Array const& got, arrow::Array const& want) {
  if (got.length() != want.length()) {
    return std::to_string(got.length()) + " rows and not " + std::to_string(want.length());
  }
  for (std::int64_t row = 0; row < got.length(); ++row) {
    if (!same_value(got, row, want, row)) {
      return "row " + std::to_string(row) + ": " + got.GetScalar(row).ValueOrDie()->ToString() +
             " and not " + want.GetScalar(row).ValueOrDie()->ToString();
    }
  }
  return {};
}

/**
 * @return "" when the columns `got` and `want` hold the same values (`same_value`), whatever
 * their chunks, else the first row that differs
 */
inline std::string value_difference(arrow::ChunkedArray const& got,
                                    arrow::ChunkedArray const& want) {
  if (got.length() != want.length()) {
    return std::to_string(got.length()) + " rows and not " + std::to_string(want.length());
  }
  auto const locate = [](arrow::ChunkedArray const& array, std::int64_t row) {
    int chunk = 0;
    while (row >= array.chunk(chunk)->length()) {
      row -= array.chunk(chunk)->length();
      ++chunk;
    }
    return std::pair<arrow::Array const*, std::int64_t>{array.chunk(chunk).get(), row};
  };
  for (std::int64_t row = 0; row < got.length(); ++row) {
    auto const [a, i] = locate(got, row);
    auto const [b, j] = locate(want, row);
    if (!same_value(*a, i, *b, j)) {
      return "row " + std::to_string(row) + ": " + a->GetScalar(i).ValueOrDie()->ToString() +
             " and not " + b->GetScalar(j).ValueOrDie()->ToString();
    }
  }
  return {};
}

/** @brief Appends random values to the builders of nested arrays. */
class nested_generator {
 public:
  /**
   * @param null_dictionary_values whether a dictionary holds a null value, which some rows' index
   * (Parquet's writer takes none)
   */
  explicit nested_generator(std::uint64_t seed, bool null_dictionary_values = true)
    : rng_(seed), null_dictionary_values_(null_dictionary_values) {}

  /** @return `rows` random values of `type`, nulls at every level (the top one included) */
  std::shared_ptr<arrow::Array> array(std::shared_ptr<arrow::DataType> const& type,
                                      std::int64_t rows) {
    // Dictionaries and list views: built as values and lists, then made into them.
    auto const plain = plain_of(type);
    std::unique_ptr<arrow::ArrayBuilder> builder;
    EXPECT_TRUE(arrow::MakeBuilder(arrow::default_memory_pool(), plain, &builder).ok());
    for (std::int64_t row = 0; row < rows; ++row) {
      append(*builder, *plain, true);
    }
    auto result = exact(builder->Finish().ValueOrDie(), type);
    EXPECT_TRUE(result->ValidateFull().ok()) << result->ValidateFull().ToString();
    EXPECT_TRUE(result->type()->Equals(*type, true)) << result->type()->ToString();
    return result;
  }

  /**
   * @return `plain` (of `plain_of(type)`) as `type`: a dictionary holds its distinct values in
   * the reverse order of their first rows, a null value as a null index or (now and then) the
   * index of a null value; a list view views its list in the first or the second of two copies
   * of the elements (offsets out of order)
   */
  std::shared_ptr<arrow::Array> exact(std::shared_ptr<arrow::Array> const& plain,
                                      std::shared_ptr<arrow::DataType> const& type) {
    if (!has_dictionaries_or_views(*type)) {
      return plain;
    }
    if (type->id() == arrow::Type::DICTIONARY) {
      return dictionary_of(
        exact(plain, static_cast<arrow::DictionaryType const&>(*type).value_type()), type);
    }
    auto const& data = *plain->data();
    std::vector<std::shared_ptr<arrow::ArrayData>> children;
    for (std::size_t k = 0; k < data.child_data.size(); ++k) {
      children.push_back(
        exact(arrow::MakeArray(data.child_data[k]), type->field(static_cast<int>(k))->type())
          ->data());
    }
    if (type->id() == arrow::Type::LIST_VIEW) {
      return view_of<std::int32_t>(*plain, children[0], type);
    }
    if (type->id() == arrow::Type::LARGE_LIST_VIEW) {
      return view_of<std::int64_t>(*plain, children[0], type);
    }
    auto result        = data.Copy();
    result->type       = type;
    result->child_data = children;
    return arrow::MakeArray(result);
  }

  /// Appends one random value of `type` (null now and then where `nullable`).
  void append(arrow::ArrayBuilder& builder, arrow::DataType const& type, bool nullable) {
    if (nullable && chance(0.15)) {
      ok(builder.AppendNull());
      return;
    }
    switch (type.id()) {
      case arrow::Type::NA:
        ok(builder.AppendNull());
        return;
      case arrow::Type::BOOL:
        ok(static_cast<arrow::BooleanBuilder&>(builder).Append(chance(0.5)));
        return;
      case arrow::Type::INT8:
        return number<arrow::Int8Type>(builder);
      case arrow::Type::INT16:
        return number<arrow::Int16Type>(builder);
      case arrow::Type::INT32:
        return number<arrow::Int32Type>(builder);
      case arrow::Type::INT64:
        return number<arrow::Int64Type>(builder);
      case arrow::Type::UINT8:
        return number<arrow::UInt8Type>(builder);
      case arrow::Type::UINT16:
        return number<arrow::UInt16Type>(builder);
      case arrow::Type::UINT32:
        return number<arrow::UInt32Type>(builder);
      case arrow::Type::UINT64:
        return number<arrow::UInt64Type>(builder);
      case arrow::Type::DATE32:
        return number<arrow::Date32Type>(builder, 2'000'000);
      case arrow::Type::DATE64:  // whole days, in milliseconds
        ok(static_cast<arrow::Date64Builder&>(builder).Append(
          (static_cast<std::int64_t>(rng_() % 2'000'001) - 1'000'000) * 86'400'000));
        return;
      case arrow::Type::TIME32:
        return number<arrow::Time32Type>(builder, 86'400'000);
      case arrow::Type::TIME64:
        return number<arrow::Time64Type>(builder, 86'400'000'000);
      case arrow::Type::TIMESTAMP:
        return number<arrow::TimestampType>(builder, 4'000'000'000'000'000);
      case arrow::Type::DURATION:
        return number<arrow::DurationType>(builder);
      case arrow::Type::INTERVAL_MONTHS:
        return number<arrow::MonthIntervalType>(builder);
      case arrow::Type::INTERVAL_DAY_TIME: {
        // Ties in length (a day and 86,400,000 ms), both signs, and the extremes.
        static std::int32_t const days[]   = {0,
                                              1,
                                              -1,
                                              2,
                                              std::numeric_limits<std::int32_t>::min(),
                                              std::numeric_limits<std::int32_t>::max()};
        static std::int32_t const millis[] = {
          0, 1, -1, 86'400'000, -86'400'000, 5, std::numeric_limits<std::int32_t>::max()};
        ok(static_cast<arrow::DayTimeIntervalBuilder&>(builder).Append(
          {days[rng_() % std::size(days)], millis[rng_() % std::size(millis)]}));
        return;
      }
      case arrow::Type::INTERVAL_MONTH_DAY_NANO: {
        // Ties in length (a month and 30 days; nanoseconds within a microsecond), both signs,
        // and the extremes.
        static std::int32_t const months[] = {0,
                                              1,
                                              -1,
                                              2,
                                              std::numeric_limits<std::int32_t>::min(),
                                              std::numeric_limits<std::int32_t>::max()};
        static std::int32_t const days[]   = {0, 1, -1, 30, -30, 31};
        static std::int64_t const nanos[]  = {0,
                                              1,
                                              -1,
                                              999,
                                              1000,
                                              -1000,
                                              1999,
                                              86'400'000'000'000,
                                              -86'400'000'000'000,
                                              std::numeric_limits<std::int64_t>::min(),
                                              std::numeric_limits<std::int64_t>::max()};
        ok(static_cast<arrow::MonthDayNanoIntervalBuilder&>(builder).Append(
          {months[rng_() % std::size(months)],
           days[rng_() % std::size(days)],
           nanos[rng_() % std::size(nanos)]}));
        return;
      }
      case arrow::Type::FLOAT:
        ok(static_cast<arrow::FloatBuilder&>(builder).Append(static_cast<float>(real())));
        return;
      case arrow::Type::DOUBLE:
        ok(static_cast<arrow::DoubleBuilder&>(builder).Append(real()));
        return;
      case arrow::Type::STRING:
      case arrow::Type::BINARY:
        ok(static_cast<arrow::BinaryBuilder&>(builder).Append(bytes(4, is_text(type))));
        return;
      case arrow::Type::LARGE_STRING:
      case arrow::Type::LARGE_BINARY:
        ok(static_cast<arrow::LargeBinaryBuilder&>(builder).Append(bytes(4, is_text(type))));
        return;
      case arrow::Type::STRING_VIEW:
      case arrow::Type::BINARY_VIEW:
        // Now and then longer than a view's 12 inline bytes.
        ok(static_cast<arrow::BinaryViewBuilder&>(builder).Append(
          (chance(0.2) ? std::string(13, 'v') : std::string{}) + bytes(4, is_text(type))));
        return;
      case arrow::Type::DECIMAL32:
      case arrow::Type::DECIMAL64:
      case arrow::Type::DECIMAL128:
      case arrow::Type::DECIMAL256:
        return decimal(builder, static_cast<arrow::DecimalType const&>(type));
      case arrow::Type::FIXED_SIZE_BINARY: {
        std::string value;
        while (value.size() < static_cast<std::size_t>(type.byte_width())) {
          value += bytes(1, false);
        }
        value.resize(static_cast<std::size_t>(type.byte_width()), 'a');
        ok(static_cast<arrow::FixedSizeBinaryBuilder&>(builder).Append(value));
        return;
      }
      case arrow::Type::LIST: {
        auto& lists = static_cast<arrow::ListBuilder&>(builder);
        ok(lists.Append());
        elements(*lists.value_builder(), *type.field(0), length());
        return;
      }
      case arrow::Type::LARGE_LIST: {
        auto& lists = static_cast<arrow::LargeListBuilder&>(builder);
        ok(lists.Append());
        elements(*lists.value_builder(), *type.field(0), length());
        return;
      }
      case arrow::Type::FIXED_SIZE_LIST: {
        auto& lists = static_cast<arrow::FixedSizeListBuilder&>(builder);
        ok(lists.Append());
        elements(*lists.value_builder(),
                 *type.field(0),
                 static_cast<arrow::FixedSizeListType const&>(type).list_size());
        return;
      }
      case arrow::Type::MAP: {
        auto& maps       = static_cast<arrow::MapBuilder&>(builder);
        auto const& map  = static_cast<arrow::MapType const&>(type);
        auto const count = length();
        ok(maps.Append());
        // Keys distinct within a map, as DuckDB requires.
        auto const base = static_cast<std::int32_t>(rng_() % 5) - 2;
        for (int entry = 0; entry < count; ++entry) {
          if (map.key_type()->id() == arrow::Type::INT32) {
            ok(static_cast<arrow::Int32Builder&>(*maps.key_builder()).Append(base + entry));
          } else {
            ASSERT_EQ(map.key_type()->id(), arrow::Type::STRING);
            ok(static_cast<arrow::StringBuilder&>(*maps.key_builder())
                 .Append(bytes(2, true) + std::to_string(entry)));
          }
          append(*maps.item_builder(), *map.item_type(), map.item_field()->nullable());
        }
        return;
      }
      case arrow::Type::STRUCT: {
        auto& structs = static_cast<arrow::StructBuilder&>(builder);
        ok(structs.Append());
        for (int k = 0; k < type.num_fields(); ++k) {
          append(*structs.field_builder(k), *type.field(k)->type(), type.field(k)->nullable());
        }
        return;
      }
      default:
        FAIL() << "no generator for " << type.ToString();
    }
  }

 private:
  static void ok(arrow::Status const& status) { ASSERT_TRUE(status.ok()) << status.ToString(); }

  std::shared_ptr<arrow::Array> dictionary_of(std::shared_ptr<arrow::Array> const& values,
                                              std::shared_ptr<arrow::DataType> const& type) {
    auto const& dictionary_type = static_cast<arrow::DictionaryType const&>(*type);
    std::vector<std::string> distinct;  // the values' texts, in the order of their first rows
    std::vector<std::int64_t> first;
    std::vector<std::int64_t> order(static_cast<std::size_t>(values->length()), -1);
    for (std::int64_t row = 0; row < values->length(); ++row) {
      if (values->IsNull(row)) {
        continue;
      }
      auto const text = values->GetScalar(row).ValueOrDie()->ToString();
      auto const at   = std::find(distinct.begin(), distinct.end(), text) - distinct.begin();
      if (static_cast<std::size_t>(at) == distinct.size()) {
        distinct.push_back(text);
        first.push_back(row);
      }
      order[static_cast<std::size_t>(row)] = at;
    }
    arrow::ArrayVector pieces;
    for (auto row = first.rbegin(); row != first.rend(); ++row) {
      pieces.push_back(values->Slice(*row, 1));
    }
    auto const count = static_cast<std::int64_t>(first.size());
    if (null_dictionary_values_) {
      pieces.push_back(arrow::MakeArrayOfNull(values->type(), 1).ValueOrDie());  // a null value
    }
    auto const dictionary = arrow::Concatenate(pieces).ValueOrDie();
    arrow::Int64Builder indices;
    for (auto const at : order) {
      if (at >= 0) {
        ok(indices.Append(count - 1 - at));
      } else if (null_dictionary_values_ && chance(0.3)) {
        ok(indices.Append(count));  // the null value's index
      } else {
        ok(indices.AppendNull());
      }
    }
    auto const wide = indices.Finish().ValueOrDie();
    // To the index type: its values are small.
    std::unique_ptr<arrow::ArrayBuilder> narrow;
    ok(arrow::MakeBuilder(arrow::default_memory_pool(), dictionary_type.index_type(), &narrow));
    auto const& longs = static_cast<arrow::Int64Array const&>(*wide);
    for (std::int64_t row = 0; row < longs.length(); ++row) {
      if (longs.IsNull(row)) {
        ok(narrow->AppendNull());
      } else {
        ok(narrow->AppendScalar(
          *arrow::MakeScalar(longs.Value(row))->CastTo(dictionary_type.index_type()).ValueOrDie()));
      }
    }
    return std::make_shared<arrow::DictionaryArray>(
      type, narrow->Finish().ValueOrDie(), dictionary);
  }

  template <typename OffsetType>
  std::shared_ptr<arrow::Array> view_of(arrow::Array const& lists,
                                        std::shared_ptr<arrow::ArrayData> const& elements,
                                        std::shared_ptr<arrow::DataType> const& type) {
    auto const values = arrow::MakeArray(elements);
    auto const copies = arrow::Concatenate({values, values}).ValueOrDie();
    std::vector<OffsetType> offsets;
    std::vector<OffsetType> sizes;
    for (std::int64_t row = 0; row < lists.length(); ++row) {
      auto const [begin, length] = list_range(lists, row);
      bool const second          = !lists.IsNull(row) && chance(0.5);
      offsets.push_back(static_cast<OffsetType>(lists.IsNull(row) ? 0 : begin) +
                        static_cast<OffsetType>(second ? values->length() : 0));
      sizes.push_back(static_cast<OffsetType>(lists.IsNull(row) ? 0 : length));
    }
    auto const bytes = [](std::vector<OffsetType> const& numbers) {
      return arrow::Buffer::FromVector(numbers);
    };
    auto const data = arrow::ArrayData::Make(
      type,
      lists.length(),
      {lists.null_count() > 0 ? lists.data()->buffers[0] : nullptr, bytes(offsets), bytes(sizes)},
      {copies->data()},
      lists.null_count(),
      lists.offset());
    return arrow::MakeArray(data);
  }

  bool chance(double p) { return std::uniform_real_distribution<double>{0, 1}(rng_) < p; }

  int length() { return static_cast<int>(rng_() % 4); }

  void elements(arrow::ArrayBuilder& values, arrow::Field const& field, int count) {
    for (int element = 0; element < count; ++element) {
      append(values, *field.type(), field.nullable());
    }
  }

  /// Small numbers (ties, and both signs), and now and then the extremes or any.
  /// Appends a random decimal within its precision: small values of either sign, and for 128
  /// and 256 bits values beyond 64 bits (a random top word below 2^60, others random).
  void decimal(arrow::ArrayBuilder& builder, arrow::DecimalType const& type) {
    auto const width = static_cast<std::size_t>(type.byte_width());
    std::array<std::uint64_t, 4> words{};
    if (width >= 16 && type.precision() >= 38 && chance(0.5)) {
      for (std::size_t word = 0; word < width / 8; ++word) {
        words[word] = rng_();
      }
      auto const top       = static_cast<std::int64_t>(rng_() % (std::uint64_t{1} << 60U));
      words[width / 8 - 1] = static_cast<std::uint64_t>(chance(0.5) ? -top : top);
    } else {
      std::int64_t limit = 1;
      for (int digit = 0; digit < std::min(type.precision(), 18); ++digit) {
        limit *= 10;
      }
      auto const value = static_cast<std::int64_t>(rng_() % static_cast<std::uint64_t>(limit)) *
                         (chance(0.5) ? -1 : 1);
      std::fill(words.begin(), words.end(), value < 0 ? ~std::uint64_t{0} : 0);
      words[0] = static_cast<std::uint64_t>(value);
    }
    // Little-endian two's complement bytes, as Arrow's decimal builders take them.
    std::array<std::uint8_t, 32> bytes{};
    std::memcpy(bytes.data(), words.data(), width);
    ok(static_cast<arrow::FixedSizeBinaryBuilder&>(builder).Append(bytes.data()));
  }

  template <typename ArrowType>
  void number(arrow::ArrayBuilder& builder, std::int64_t modulus = 0) {
    using value_type = typename ArrowType::c_type;
    value_type value{};
    auto const pick = rng_() % 10;
    if (pick == 0) {
      value = std::numeric_limits<value_type>::min();
    } else if (pick == 1) {
      value = std::numeric_limits<value_type>::max();
    } else if (pick == 2) {
      value = static_cast<value_type>(rng_());
    } else {
      value = static_cast<value_type>(static_cast<std::int64_t>(rng_() % 7) - 3);
    }
    if (modulus > 0) {
      auto const wide = static_cast<std::int64_t>(value) % modulus;
      value           = static_cast<value_type>(wide < 0 ? wide + modulus : wide);
    }
    ok(static_cast<arrow::NumericBuilder<ArrowType>&>(builder).Append(value));
  }

  double real() {
    static double const values[] = {-std::numeric_limits<double>::infinity(),
                                    -1e300,
                                    -1.5,
                                    -0.0,
                                    0.0,
                                    0.25,
                                    1.5,
                                    3.0e38,
                                    std::numeric_limits<double>::infinity(),
                                    std::numeric_limits<double>::quiet_NaN()};
    return values[rng_() % std::size(values)];
  }

  static bool is_text(arrow::DataType const& type) {
    return type.id() == arrow::Type::STRING || type.id() == arrow::Type::LARGE_STRING ||
           type.id() == arrow::Type::STRING_VIEW;
  }

  /// 0 to `most` pieces of 0x00, 0x01, 0x02, 'a', 'b' and 0xFF (or, for `text`, "é"): escapes,
  /// prefixes and high bytes.
  std::string bytes(std::size_t most, bool text) {
    static std::string const pieces[] = {
      std::string(1, '\0'), "\1", "\2", "a", "b", "\xff", "\xc3\xa9"};
    std::string value;
    for (auto count = rng_() % (most + 1); count > 0; --count) {
      auto const piece = rng_() % 6;
      value += piece == 5 && text ? pieces[6] : pieces[piece];
    }
    return value;
  }

  std::mt19937_64 rng_;
  bool null_dictionary_values_;
};

}  // namespace spillway::testing
