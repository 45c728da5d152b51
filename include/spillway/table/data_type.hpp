/**
 * @file data_type.hpp
 * @brief The logical types of spillway columns and their physical layouts.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/table/decimal.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway {

/**
 * @brief The identity of a column's type.
 *
 * Fixed-width types store one value per row in a data buffer; BOOL8 is one byte per row (0 or
 * 1); TIMESTAMP is an int64 count of its `time_unit` since the Unix epoch. STRING stores
 * `rows + 1` int64 offsets into a buffer of UTF-8 bytes (Arrow's large_string layout). The
 * temporal types are Arrow's, with Arrow's layouts: DATE32 an int32 count of days since the
 * epoch, DATE64 an int64 count of milliseconds since it, TIME32 (second or millisecond) and
 * TIME64 (microsecond or nanosecond) an int32 or int64 count of their unit since midnight, and
 * DURATION an int64 count of its unit. They order and hash as their integers do. BINARY has
 * STRING's layout (`rows + 1` int64 offsets into a buffer of bytes, Arrow's large_binary) and
 * orders and hashes as STRING does: bytewise, unsigned, a prefix before what it prefixes; its
 * bytes need not be UTF-8.
 * The decimals are Arrow's too: an unscaled integer, the value times 10^scale, as an int32
 * (DECIMAL32), int64 (DECIMAL64) or a 16- or 32-byte two's-complement integer, little-endian
 * (DECIMAL128, DECIMAL256: `decimal128_storage`, `decimal256_storage`); every value of a column
 * has the column's scale, so they order and hash as their unscaled integers do.
 * (Ids are appended, never renumbered: they are written into packed tables.)
 */
enum class type_id : std::uint8_t {
  BOOL8,
  INT8,
  INT16,
  INT32,
  INT64,
  UINT8,
  UINT16,
  UINT32,
  UINT64,
  FLOAT32,
  FLOAT64,
  TIMESTAMP,
  STRING,
  DATE32,
  DATE64,
  TIME32,
  TIME64,
  DURATION,
  BINARY,
  DECIMAL32,
  DECIMAL64,
  DECIMAL128,
  DECIMAL256,
};

/** @brief The number of `type_id` values. */
inline constexpr std::size_t TYPE_ID_COUNT = 23;

/** @return whether a type of `id` carries a precision and a scale (DECIMAL32 to DECIMAL256) */
constexpr bool is_decimal(type_id id) noexcept {
  return id == type_id::DECIMAL32 || id == type_id::DECIMAL64 || id == type_id::DECIMAL128 ||
         id == type_id::DECIMAL256;
}

/** @return the most decimal digits a decimal type `id` holds: 9, 18, 38 or 76; 0 for others */
constexpr int max_decimal_precision(type_id id) noexcept {
  switch (id) {
    case type_id::DECIMAL32:
      return 9;
    case type_id::DECIMAL64:
      return 18;
    case type_id::DECIMAL128:
      return 38;
    case type_id::DECIMAL256:
      return 76;
    default:
      return 0;
  }
}

/** @return whether a type of `id` carries a `time_unit` (TIMESTAMP, TIME32, TIME64, DURATION) */
constexpr bool has_time_unit(type_id id) noexcept {
  return id == type_id::TIMESTAMP || id == type_id::TIME32 || id == type_id::TIME64 ||
         id == type_id::DURATION;
}

/** @brief The resolution of a TIMESTAMP, TIME32 (s, ms), TIME64 (us, ns) or DURATION. */
enum class time_unit : std::uint8_t { SECOND, MILLISECOND, MICROSECOND, NANOSECOND };

/**
 * @brief A type id plus, for the types with one (`has_time_unit`), its unit, and for the
 * decimals (`is_decimal`) their precision and scale. A small value type.
 */
class data_type {
 public:
  constexpr data_type() noexcept = default;
  constexpr data_type(type_id id) noexcept : id_(id) {}  // NOLINT(google-explicit-constructor)
  constexpr data_type(type_id id, time_unit unit) noexcept : id_(id), unit_(unit) {}
  /**
   * @brief A decimal type: `precision` significant digits (1 to `max_decimal_precision(id)`,
   * not checked here: `is_valid_decimal` does), `scale` of them after the point (Arrow's
   * scale: negative scales multiply by a power of ten).
   */
  constexpr data_type(type_id id, int precision, int scale) noexcept
    : id_(id), precision_(static_cast<std::uint8_t>(precision)), scale_(scale) {}

  [[nodiscard]] constexpr type_id id() const noexcept { return id_; }
  /** @return the unit; meaningful only when `has_time_unit(id())` */
  [[nodiscard]] constexpr time_unit unit() const noexcept { return unit_; }
  /** @return the decimal digits; meaningful only when `is_decimal(id())` */
  [[nodiscard]] constexpr int precision() const noexcept { return precision_; }
  /** @return the digits after the point; meaningful only when `is_decimal(id())` */
  [[nodiscard]] constexpr int scale() const noexcept { return scale_; }

  friend constexpr bool operator==(data_type lhs, data_type rhs) noexcept {
    return lhs.id_ == rhs.id_ && (!has_time_unit(lhs.id_) || lhs.unit_ == rhs.unit_) &&
           (!is_decimal(lhs.id_) || (lhs.precision_ == rhs.precision_ && lhs.scale_ == rhs.scale_));
  }

 private:
  type_id id_             = type_id::INT8;
  time_unit unit_         = time_unit::NANOSECOND;
  std::uint8_t precision_ = 0;
  std::int32_t scale_     = 0;
};

/** @return whether `type` is a decimal whose precision its storage holds (1 to the maximum) */
constexpr bool is_valid_decimal(data_type type) noexcept {
  return is_decimal(type.id()) && type.precision() >= 1 &&
         type.precision() <= max_decimal_precision(type.id());
}

/** @return true for every type but STRING and BINARY, which store offsets and bytes */
constexpr bool is_fixed_width(data_type type) noexcept {
  return type.id() != type_id::STRING && type.id() != type_id::BINARY;
}

/** @return bytes per row of a fixed-width type; 0 for STRING and BINARY */
constexpr std::size_t size_of(data_type type) noexcept {
  switch (type.id()) {
    case type_id::BOOL8:
    case type_id::INT8:
    case type_id::UINT8:
      return 1;
    case type_id::INT16:
    case type_id::UINT16:
      return 2;
    case type_id::INT32:
    case type_id::UINT32:
    case type_id::FLOAT32:
    case type_id::DATE32:
    case type_id::TIME32:
      return 4;
    case type_id::INT64:
    case type_id::UINT64:
    case type_id::FLOAT64:
    case type_id::TIMESTAMP:
    case type_id::DATE64:
    case type_id::TIME64:
    case type_id::DURATION:
      return 8;
    case type_id::STRING:
    case type_id::BINARY:
      return 0;
    case type_id::DECIMAL32:
      return 4;
    case type_id::DECIMAL64:
      return 8;
    case type_id::DECIMAL128:
      return 16;
    case type_id::DECIMAL256:
      return 32;
  }
  return 0;
}

/** @return "int32", "timestamp[ms]", "string", ... */
std::string to_string(data_type type);

/** @return "s", "ms", "us" or "ns" */
std::string to_string(time_unit unit);

/** @brief The C++ type that stores one row of a fixed-width `type_id`. */
template <type_id Id>
struct storage_type;
template <>
struct storage_type<type_id::BOOL8> {
  using type = std::uint8_t;
};
template <>
struct storage_type<type_id::INT8> {
  using type = std::int8_t;
};
template <>
struct storage_type<type_id::INT16> {
  using type = std::int16_t;
};
template <>
struct storage_type<type_id::INT32> {
  using type = std::int32_t;
};
template <>
struct storage_type<type_id::INT64> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::UINT8> {
  using type = std::uint8_t;
};
template <>
struct storage_type<type_id::UINT16> {
  using type = std::uint16_t;
};
template <>
struct storage_type<type_id::UINT32> {
  using type = std::uint32_t;
};
template <>
struct storage_type<type_id::UINT64> {
  using type = std::uint64_t;
};
template <>
struct storage_type<type_id::FLOAT32> {
  using type = float;
};
template <>
struct storage_type<type_id::FLOAT64> {
  using type = double;
};
template <>
struct storage_type<type_id::TIMESTAMP> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::DATE32> {
  using type = std::int32_t;
};
template <>
struct storage_type<type_id::DATE64> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::TIME32> {
  using type = std::int32_t;
};
template <>
struct storage_type<type_id::TIME64> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::DURATION> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::DECIMAL32> {
  using type = std::int32_t;
};
template <>
struct storage_type<type_id::DECIMAL64> {
  using type = std::int64_t;
};
template <>
struct storage_type<type_id::DECIMAL128> {
  using type = decimal128_storage;
};
template <>
struct storage_type<type_id::DECIMAL256> {
  using type = decimal256_storage;
};

/**
 * @brief Calls `visitor.template operator()<T>()` with the storage type `T` of a fixed-width
 * `type` and returns its result.
 * @throws spillway::invalid_argument for STRING and BINARY
 */
template <typename Visitor>
decltype(auto) visit_fixed_width(data_type type, Visitor&& visitor) {
  switch (type.id()) {
    case type_id::BOOL8:
      return visitor.template operator()<std::uint8_t>();
    case type_id::INT8:
      return visitor.template operator()<std::int8_t>();
    case type_id::INT16:
      return visitor.template operator()<std::int16_t>();
    case type_id::INT32:
    case type_id::DATE32:
    case type_id::TIME32:
      return visitor.template operator()<std::int32_t>();
    case type_id::INT64:
      return visitor.template operator()<std::int64_t>();
    case type_id::UINT8:
      return visitor.template operator()<std::uint8_t>();
    case type_id::UINT16:
      return visitor.template operator()<std::uint16_t>();
    case type_id::UINT32:
      return visitor.template operator()<std::uint32_t>();
    case type_id::UINT64:
      return visitor.template operator()<std::uint64_t>();
    case type_id::FLOAT32:
      return visitor.template operator()<float>();
    case type_id::FLOAT64:
      return visitor.template operator()<double>();
    case type_id::TIMESTAMP:
    case type_id::DATE64:
    case type_id::TIME64:
    case type_id::DURATION:
      return visitor.template operator()<std::int64_t>();
    case type_id::STRING:
    case type_id::BINARY:
      break;
    case type_id::DECIMAL32:
      return visitor.template operator()<std::int32_t>();
    case type_id::DECIMAL64:
      return visitor.template operator()<std::int64_t>();
    case type_id::DECIMAL128:
      return visitor.template operator()<decimal128_storage>();
    case type_id::DECIMAL256:
      return visitor.template operator()<decimal256_storage>();
  }
  SPILLWAY_FAIL("visit_fixed_width: " + to_string(type) + " is not a fixed-width type",
                invalid_argument);
}

}  // namespace spillway
