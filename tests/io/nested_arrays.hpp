/**
 * @file nested_arrays.hpp
 * @brief Random Arrow arrays of nested types, with nulls at every level, for the tests of nested
 * columns.
 */
#pragma once

#include <arrow/api.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace spillway::testing {

/** @brief A nested type to test, and whether DuckDB reads its values faithfully. */
struct nested_shape {
  std::string name;
  std::shared_ptr<arrow::DataType> type;
  bool duckdb = true;  ///< false where DuckDB rounds (durations, date64) or has no such type
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
  };
}

/** @brief Appends random values to the builders of nested arrays. */
class nested_generator {
 public:
  explicit nested_generator(std::uint64_t seed) : rng_(seed) {}

  /** @return `rows` random values of `type`, nulls at every level (the top one included) */
  std::shared_ptr<arrow::Array> array(std::shared_ptr<arrow::DataType> const& type,
                                      std::int64_t rows) {
    std::unique_ptr<arrow::ArrayBuilder> builder;
    EXPECT_TRUE(arrow::MakeBuilder(arrow::default_memory_pool(), type, &builder).ok());
    for (std::int64_t row = 0; row < rows; ++row) {
      append(*builder, *type, true);
    }
    auto result = builder->Finish().ValueOrDie();
    EXPECT_TRUE(result->ValidateFull().ok()) << result->ValidateFull().ToString();
    return result;
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
};

}  // namespace spillway::testing
