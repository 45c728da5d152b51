/**
 * @file nested_decoding.cpp
 * @brief Order-preserving bytes of nested values back into Arrow arrays (see nested_encoding.hpp).
 */
#include "io/arrow/nested_codec.hpp"
#include "io/arrow/nested_encoding.hpp"
#include "io/arrow/nested_restoring.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>

#include <array>
#include <cstring>
#include <string>
#include <string_view>

namespace spillway::detail {
namespace {

using namespace nested_codec;  // NOLINT(google-build-using-namespace): this file's vocabulary

// ---------------------------------------------------------------------------------------------
// Decoding

/// The bytes of one encoded row, read front to back.
class byte_reader {
 public:
  explicit byte_reader(std::string_view bytes) : at_(bytes.data()), end_(at_ + bytes.size()) {}

  std::uint8_t next() {
    expect(1);
    return static_cast<std::uint8_t>(*at_++);
  }
  [[nodiscard]] std::uint8_t peek() {
    expect(1);
    return static_cast<std::uint8_t>(*at_);
  }
  std::uint64_t big_endian(int width) {
    expect(static_cast<std::size_t>(width));
    std::uint64_t bits = 0;
    for (int i = 0; i < width; ++i) {
      bits = (bits << 8) | static_cast<std::uint8_t>(*at_++);
    }
    return bits;
  }
  char const* take(std::size_t bytes) {
    expect(bytes);
    char const* start = at_;
    at_ += bytes;
    return start;
  }
  [[nodiscard]] bool done() const noexcept { return at_ == end_; }

  [[noreturn]] static void corrupt(std::string const& what) {
    SPILLWAY_FAIL("a nested value's encoding is corrupt: " + what, corruption_error);
  }

 private:
  void expect(std::size_t bytes) const {
    if (static_cast<std::size_t>(end_ - at_) < bytes) {
      corrupt("it ends early");
    }
  }

  char const* at_;
  char const* end_;
};

/// One row's body, and the exact bits of its tied values (see `row_writer`).
class row_reader : public byte_reader {
 public:
  row_reader(std::string_view body, std::string_view exact) : byte_reader(body), exact_(exact) {}

  /// The exact bits of the next canonical float of `width` bytes.
  std::uint64_t exact(int width) { return exact_.big_endian(EXACT_BYTES) & all_bits(width); }
  [[nodiscard]] bool all_done() const noexcept { return done() && exact_.done(); }

 private:
  byte_reader exact_;
};

void check_build(arrow::Status const& status, arrow::DataType const& type) {
  if (status.IsCapacityError()) {
    SPILLWAY_FAIL("a batch of " + type.ToString() + " values holds more than its type's offsets " +
                    "address: " + status.ToString(),
                  not_supported);
  }
  check_arrow(status, "decoding " + type.ToString() + " values");
}

template <typename ArrowType>
arrow::Status append_number(arrow::ArrayBuilder& builder, std::uint64_t bits) {
  typename ArrowType::c_type value;
  std::memcpy(&value, &bits, sizeof(value));  // the low bytes: little-endian, as spillway is
  return static_cast<arrow::NumericBuilder<ArrowType>&>(builder).Append(value);
}

arrow::Status append_number(arrow::ArrayBuilder& builder,
                            arrow::Type::type id,
                            std::uint64_t bits) {
  switch (id) {
    case arrow::Type::INT8:
      return append_number<arrow::Int8Type>(builder, bits);
    case arrow::Type::INT16:
      return append_number<arrow::Int16Type>(builder, bits);
    case arrow::Type::INT32:
      return append_number<arrow::Int32Type>(builder, bits);
    case arrow::Type::INT64:
      return append_number<arrow::Int64Type>(builder, bits);
    case arrow::Type::UINT8:
      return append_number<arrow::UInt8Type>(builder, bits);
    case arrow::Type::UINT16:
      return append_number<arrow::UInt16Type>(builder, bits);
    case arrow::Type::UINT32:
      return append_number<arrow::UInt32Type>(builder, bits);
    case arrow::Type::UINT64:
      return append_number<arrow::UInt64Type>(builder, bits);
    case arrow::Type::FLOAT:
      return append_number<arrow::FloatType>(builder, bits);
    case arrow::Type::DOUBLE:
      return append_number<arrow::DoubleType>(builder, bits);
    case arrow::Type::DATE32:
      return append_number<arrow::Date32Type>(builder, bits);
    case arrow::Type::DATE64:
      return append_number<arrow::Date64Type>(builder, bits);
    case arrow::Type::TIME32:
      return append_number<arrow::Time32Type>(builder, bits);
    case arrow::Type::TIME64:
      return append_number<arrow::Time64Type>(builder, bits);
    case arrow::Type::TIMESTAMP:
      return append_number<arrow::TimestampType>(builder, bits);
    case arrow::Type::DURATION:
      return append_number<arrow::DurationType>(builder, bits);
    case arrow::Type::INTERVAL_MONTHS:
      return append_number<arrow::MonthIntervalType>(builder, bits);
    default:
      break;
  }
  return arrow::Status::Invalid("not a number type");
}

arrow::Status append_string(arrow::ArrayBuilder& builder,
                            arrow::Type::type id,
                            std::string_view value) {
  switch (id) {
    case arrow::Type::STRING:
    case arrow::Type::BINARY:
      return static_cast<arrow::BinaryBuilder&>(builder).Append(value);
    case arrow::Type::LARGE_STRING:
    case arrow::Type::LARGE_BINARY:
      return static_cast<arrow::LargeBinaryBuilder&>(builder).Append(value);
    default:
      return static_cast<arrow::BinaryViewBuilder&>(builder).Append(value);
  }
}

void decode_value(arrow::ArrayBuilder& builder, arrow::DataType const& type, row_reader& in);

/// Decodes the elements of a list into `values` (of `type`) up to its end marker.
void decode_elements(arrow::ArrayBuilder& values, arrow::DataType const& type, row_reader& in) {
  while (in.peek() != END) {
    decode_value(values, type, in);
  }
  in.next();
}

/// Decodes an interval of day_time or month_day_nano `type` (see `encode_interval`).
void decode_interval(arrow::ArrayBuilder& builder, arrow::DataType const& type, row_reader& in) {
  if (type.id() == arrow::Type::INTERVAL_DAY_TIME) {
    std::uint64_t const length = in.big_endian(8);
    std::uint64_t const parts  = in.exact(EXACT_BYTES);
    arrow::DayTimeIntervalType::DayMilliseconds const value{
      static_cast<std::int32_t>(static_cast<std::uint32_t>(parts >> 32U)),
      static_cast<std::int32_t>(static_cast<std::uint32_t>(parts))};
    std::int64_t const expected = std::int64_t{value.days} * MILLIS_PER_DAY + value.milliseconds;
    if ((static_cast<std::uint64_t>(expected) ^ sign_bit(8)) != length) {
      byte_reader::corrupt("a day_time_interval whose length is not its fields'");
    }
    check_build(static_cast<arrow::DayTimeIntervalBuilder&>(builder).Append(value), type);
    return;
  }
  char const* length        = in.take(MONTH_DAY_NANO_BYTES);
  std::uint64_t const parts = in.exact(EXACT_BYTES);
  std::uint64_t const nanos = in.exact(EXACT_BYTES);
  arrow::MonthDayNanoIntervalType::MonthDayNanos const value{
    static_cast<std::int32_t>(static_cast<std::uint32_t>(parts >> 32U)),
    static_cast<std::int32_t>(static_cast<std::uint32_t>(parts)),
    static_cast<std::int64_t>(nanos)};
  auto const expected = interval_length_bytes(value.months, value.days, value.nanoseconds);
  if (std::memcmp(expected.data(), length, expected.size()) != 0) {
    byte_reader::corrupt("a month_day_nano_interval whose length is not its fields'");
  }
  check_build(static_cast<arrow::MonthDayNanoIntervalBuilder&>(builder).Append(value), type);
}

void decode_body(arrow::ArrayBuilder& builder, arrow::DataType const& type, row_reader& in) {
  auto const id = type.id();
  if (id == arrow::Type::INTERVAL_DAY_TIME || id == arrow::Type::INTERVAL_MONTH_DAY_NANO) {
    decode_interval(builder, type, in);
    return;
  }
  if (id == arrow::Type::BOOL) {
    std::uint8_t const byte = in.next();
    if (byte > 1) {
      byte_reader::corrupt("a bool of " + std::to_string(byte));
    }
    check_build(static_cast<arrow::BooleanBuilder&>(builder).Append(byte != 0), type);
    return;
  }
  if (is_number(id)) {
    int const width    = type.byte_width();
    std::uint64_t bits = in.big_endian(width);
    if (is_float(id)) {
      bits = (bits & sign_bit(width)) != 0 ? bits & ~sign_bit(width) : ~bits & all_bits(width);
      if (bits == 0) {
        bits = in.exact(width);  // a zero: which one
        if ((bits & ~sign_bit(width)) != 0) {
          byte_reader::corrupt("a zero whose exact bits are not a zero's");
        }
      }
    } else if (is_flipped_integer(id)) {
      bits ^= sign_bit(width);
    }
    check_build(append_number(builder, id, bits), type);
    return;
  }
  if (is_decimal_type(id)) {
    auto const width  = static_cast<std::size_t>(type.byte_width());
    char const* bytes = in.take(width);
    std::array<std::uint8_t, 32> value{};
    for (std::size_t byte = 0; byte < width; ++byte) {
      value[width - 1 - byte] = static_cast<std::uint8_t>(bytes[byte]);
    }
    value[width - 1] ^= 0x80;
    // Arrow's decimal builders take a value's little-endian bytes as fixed-size binaries do.
    check_build(static_cast<arrow::FixedSizeBinaryBuilder&>(builder).Append(value.data()), type);
    return;
  }
  if (id == arrow::Type::FIXED_SIZE_BINARY) {
    char const* bytes = in.take(static_cast<std::size_t>(type.byte_width()));
    check_build(static_cast<arrow::FixedSizeBinaryBuilder&>(builder).Append(bytes), type);
    return;
  }
  if (is_string_like(id)) {
    std::string value;
    for (std::uint8_t byte = in.next(); byte != END; byte = in.next()) {
      if (byte == ESCAPE) {
        std::uint8_t const escaped = in.next();
        if (escaped != 1 && escaped != 2) {
          byte_reader::corrupt("an escape of " + std::to_string(escaped));
        }
        byte = static_cast<std::uint8_t>(escaped - 1);
      }
      value.push_back(static_cast<char>(byte));
    }
    check_build(append_string(builder, id, value), type);
    return;
  }
  switch (id) {
    case arrow::Type::LIST: {
      auto& lists = static_cast<arrow::ListBuilder&>(builder);
      check_build(lists.Append(), type);
      decode_elements(
        *lists.value_builder(), *static_cast<arrow::ListType const&>(type).value_type(), in);
      return;
    }
    case arrow::Type::LARGE_LIST: {
      auto& lists = static_cast<arrow::LargeListBuilder&>(builder);
      check_build(lists.Append(), type);
      decode_elements(
        *lists.value_builder(), *static_cast<arrow::LargeListType const&>(type).value_type(), in);
      return;
    }
    case arrow::Type::MAP: {
      // Entries as structs of a key and an item; an entry is never null.
      auto& maps = static_cast<arrow::MapBuilder&>(builder);
      check_build(maps.Append(), type);
      auto const& entry = *static_cast<arrow::MapType const&>(type).value_type();
      while (in.peek() != END) {
        if (in.next() != VALUE) {
          byte_reader::corrupt("a map entry that is not a value");
        }
        decode_body(*maps.value_builder(), entry, in);
      }
      in.next();
      return;
    }
    case arrow::Type::FIXED_SIZE_LIST: {
      auto& lists            = static_cast<arrow::FixedSizeListBuilder&>(builder);
      auto const& lists_type = static_cast<arrow::FixedSizeListType const&>(type);
      check_build(lists.Append(), type);
      for (std::int32_t element = 0; element < lists_type.list_size(); ++element) {
        decode_value(*lists.value_builder(), *lists_type.value_type(), in);
      }
      return;
    }
    case arrow::Type::STRUCT: {
      auto& structs = static_cast<arrow::StructBuilder&>(builder);
      check_build(structs.Append(), type);
      for (int k = 0; k < type.num_fields(); ++k) {
        decode_value(*structs.field_builder(k), *type.field(k)->type(), in);
      }
      return;
    }
    default:
      break;
  }
  SPILLWAY_FAIL("decoding a nested value: " + type.ToString() + " has no encoding", logic_error);
}

void decode_value(arrow::ArrayBuilder& builder, arrow::DataType const& type, row_reader& in) {
  std::uint8_t const marker = in.next();
  if (marker == NULL_VALUE) {
    check_build(builder.AppendNull(), type);
    return;
  }
  if (type.id() == arrow::Type::NA) {
    byte_reader::corrupt("a null-type value that is not null");
  }
  if (marker == NAN_VALUE && is_float(type.id())) {
    check_build(append_number(builder, type.id(), in.exact(type.byte_width())), type);
    return;
  }
  if (marker != VALUE) {
    byte_reader::corrupt("a marker of " + std::to_string(marker) + " before a " + type.ToString());
  }
  decode_body(builder, type, in);
}

}  // namespace

std::shared_ptr<arrow::Array> decode_nested(column_view const& view,
                                            std::shared_ptr<arrow::DataType> const& type,
                                            arrow::MemoryPool* pool,
                                            nested_dictionaries* dictionaries) {
  auto const rows = static_cast<std::int64_t>(view.size());
  if (type->id() == arrow::Type::NA) {
    SPILLWAY_EXPECTS(view.null_count() == view.size(),
                     "a column of Arrow's null type holds values",
                     invalid_argument);
    return value_or_throw(arrow::MakeArrayOfNull(arrow::null(), rows, pool),
                          "making a null-type array");
  }
  SPILLWAY_EXPECTS(
    view.type().id() == type_id::BINARY,
    "a " + to_string(view.type()) + " column cannot be written as " + type->ToString(),
    logic_error);
  // Dictionaries and list views are built as their values and lists, then made again.
  bool const restore = needs_restoring(*type);
  auto const built   = restore ? plain_type(type) : type;
  std::unique_ptr<arrow::ArrayBuilder> builder;
  check_arrow(arrow::MakeBuilder(pool, built, &builder),
              "making a " + built->ToString() + " builder");
  check_build(builder->Reserve(rows), *built);
  bool const has_exact = has_exact_bits(*type);
  for (std::size_t row = 0; row < view.size(); ++row) {
    if (view.is_null(row)) {
      check_build(builder->AppendNull(), *built);
      continue;
    }
    std::string_view const bytes = view.string_at(row);
    std::size_t body             = bytes.size();
    if (has_exact) {
      // The body, then the exact bits of its tied values (zeros, NaNs, intervals), then their
      // count.
      if (bytes.size() < EXACT_COUNT_BYTES) {
        byte_reader::corrupt("it ends early");
      }
      byte_reader count{bytes.substr(bytes.size() - EXACT_COUNT_BYTES)};
      std::uint64_t const exact = count.big_endian(EXACT_COUNT_BYTES) * EXACT_BYTES;
      if (exact > bytes.size() - EXACT_COUNT_BYTES) {
        byte_reader::corrupt("more exact values than bytes");
      }
      body = bytes.size() - EXACT_COUNT_BYTES - static_cast<std::size_t>(exact);
    }
    row_reader in{bytes.substr(0, body),
                  bytes.substr(body, bytes.size() - body - (has_exact ? EXACT_COUNT_BYTES : 0))};
    decode_body(*builder, *built, in);
    if (!in.all_done()) {
      byte_reader::corrupt("bytes after a " + type->ToString() + " value");
    }
  }
  auto array = value_or_throw(builder->Finish(), "decoding " + type->ToString() + " values");
  if (restore) {
    nested_dictionaries own;
    array = restore_type(array, type, dictionaries != nullptr ? *dictionaries : own, pool);
  }
  if (!array->type()->Equals(*type, /*check_metadata=*/true)) {
    // A builder may lose what does not touch the values (a map's field metadata): the type
    // given.
    auto data  = array->data()->Copy();
    data->type = type;
    array      = arrow::MakeArray(data);
  }
  return array;
}

}  // namespace spillway::detail
