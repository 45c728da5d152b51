/**
 * @file radix_passes.hpp
 * @brief The plan of the CUDA sort's least-significant-digit passes and the image each pass sorts
 * by. Compiled by nvcc for the device kernels and by the host compiler for the tests that run the
 * same plan with `std::stable_sort` on any machine. Private to the ops layer.
 *
 * The image of a fixed-width value is the CPU's normalized key (normalized_key.hpp) right-aligned
 * in its own bits: unsigned integers and BOOL8 as they are, signed integers and timestamps with
 * the sign bit flipped, floats with -0.0 and NaN canonicalized, then all bits flipped when
 * negative or the sign bit set when not. A string contributes its length and its 8-byte chunks,
 * big-endian and zero-padded: sorting by the length first and then by the chunks from the last to
 * the first orders the strings byte by byte with a proper prefix first. A DECIMAL128 or
 * DECIMAL256 contributes its 64-bit words, least significant first, the top one with its sign bit
 * flipped: the same order as its 16 or 32 bytes big-endian. DESCENDING inverts every
 * image over the pass's bits. Null rows have image 0 in the value passes and are ordered by a
 * last 1-bit pass of their own, so nulls tie among themselves.
 */
#pragma once

#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column_view.hpp>
#include <spillway/table/table_view.hpp>

#include <cstdint>
#include <cstring>
#include <limits>
#include <type_traits>
#include <vector>

#ifdef __CUDACC__
#define SPILLWAY_HOST_DEVICE __host__ __device__
#else
#define SPILLWAY_HOST_DEVICE
#endif

namespace spillway::detail::cuda {

/** @brief What one pass sorts by. */
enum class pass_kind : std::uint8_t {
  VALUE,          ///< a fixed-width value's image
  STRING_LENGTH,  ///< a string's length
  STRING_CHUNK,   ///< bytes [8 chunk, 8 chunk + 8) of a string
  NULLS,          ///< 0 for the rows that come first, 1 for the others
};

/** @brief One pass: everything its encoding kernel reads, as plain values and pointers. */
struct radix_pass {
  pass_kind kind              = pass_kind::VALUE;
  type_id type                = type_id::INT64;
  void const* values          = nullptr;  ///< values, or a string's characters
  std::int64_t const* offsets = nullptr;
  bitmask_type const* mask    = nullptr;  ///< null when the column has no nulls
  std::size_t offset          = 0;        ///< the column view's first row in its buffers
  std::uint64_t chunk         = 0;        ///< a string's chunk, or a wide decimal's word
  unsigned bits               = 64;       ///< the pass sorts by bits [0, bits) of the images
  bool descending             = false;
  bool nulls_before           = true;
};

SPILLWAY_HOST_DEVICE constexpr std::uint64_t low_bits(unsigned bits) {
  return bits >= 64 ? ~std::uint64_t{0} : (std::uint64_t{1} << bits) - 1;
}

/** @return the order-preserving image of `value` in its low `8 * sizeof(T)` bits */
template <typename T>
SPILLWAY_HOST_DEVICE inline std::uint64_t image_of(T value) {
  constexpr unsigned bits = 8 * sizeof(T);
  if constexpr (std::is_floating_point_v<T>) {
    using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    bits_type raw   = 0;
    if (value != value) {  // every NaN is the positive quiet NaN
      if constexpr (sizeof(T) == 4) {
        raw = 0x7FC00000U;
      } else {
        raw = 0x7FF8000000000000ULL;
      }
    } else {
      if (value == T{0}) {
        value = T{0};  // -0.0 ties with 0.0
      }
      std::memcpy(&raw, &value, sizeof(T));
    }
    constexpr bits_type sign = bits_type{1} << (bits - 1);
    raw                      = (raw & sign) != 0 ? static_cast<bits_type>(~raw) : (raw | sign);
    return raw;
  } else if constexpr (std::is_signed_v<T>) {
    std::uint64_t const image =
      static_cast<std::uint64_t>(static_cast<std::make_unsigned_t<T>>(value)) ^
      (std::uint64_t{1} << (bits - 1));
    return image & low_bits(bits);
  } else {
    return static_cast<std::uint64_t>(value);
  }
}

SPILLWAY_HOST_DEVICE inline bool valid_at(bitmask_type const* mask, std::size_t bit) {
  return mask == nullptr || ((static_cast<unsigned>(mask[bit / 8]) >> (bit % 8)) & 1U) != 0;
}

/** @return the image of the value at `row` (of the view) for a VALUE pass */
SPILLWAY_HOST_DEVICE inline std::uint64_t value_image(radix_pass const& pass, std::size_t row) {
  std::size_t const at = pass.offset + row;
  switch (pass.type) {
    case type_id::BOOL8:
    case type_id::UINT8:
      return image_of(static_cast<std::uint8_t const*>(pass.values)[at]);
    case type_id::INT8:
      return image_of(static_cast<std::int8_t const*>(pass.values)[at]);
    case type_id::INT16:
      return image_of(static_cast<std::int16_t const*>(pass.values)[at]);
    case type_id::UINT16:
      return image_of(static_cast<std::uint16_t const*>(pass.values)[at]);
    case type_id::INT32:
    case type_id::DATE32:
    case type_id::TIME32:
      return image_of(static_cast<std::int32_t const*>(pass.values)[at]);
    case type_id::UINT32:
      return image_of(static_cast<std::uint32_t const*>(pass.values)[at]);
    case type_id::INT64:
    case type_id::TIMESTAMP:
    case type_id::DATE64:
    case type_id::TIME64:
    case type_id::DURATION:
      return image_of(static_cast<std::int64_t const*>(pass.values)[at]);
    case type_id::UINT64:
      return image_of(static_cast<std::uint64_t const*>(pass.values)[at]);
    case type_id::FLOAT32:
      return image_of(static_cast<float const*>(pass.values)[at]);
    case type_id::FLOAT64:
      return image_of(static_cast<double const*>(pass.values)[at]);
    case type_id::STRING:
    case type_id::BINARY:
      break;
    case type_id::DECIMAL32:
      return image_of(static_cast<std::int32_t const*>(pass.values)[at]);
    case type_id::DECIMAL64:
      return image_of(static_cast<std::int64_t const*>(pass.values)[at]);
    case type_id::DECIMAL128:
    case type_id::DECIMAL256: {
      std::size_t const words = pass.type == type_id::DECIMAL128 ? 2 : 4;
      std::uint64_t const word =
        static_cast<std::uint64_t const*>(pass.values)[at * words + pass.chunk];
      return pass.chunk + 1 == words ? word ^ (std::uint64_t{1} << 63U) : word;
    }
  }
  return 0;
}

/** @return what row `row` of the view sorts by in `pass` */
SPILLWAY_HOST_DEVICE inline std::uint64_t pass_image(radix_pass const& pass, std::size_t row) {
  bool const valid = valid_at(pass.mask, pass.offset + row);
  if (pass.kind == pass_kind::NULLS) {
    return valid == pass.nulls_before ? 1U : 0U;
  }
  if (!valid) {
    return 0;
  }
  std::uint64_t image = 0;
  if (pass.kind == pass_kind::VALUE) {
    image = value_image(pass, row);
  } else {
    std::int64_t const begin  = pass.offsets[pass.offset + row];
    std::int64_t const length = pass.offsets[pass.offset + row + 1] - begin;
    if (pass.kind == pass_kind::STRING_LENGTH) {
      image = static_cast<std::uint64_t>(length);
    } else {
      auto const* bytes       = static_cast<unsigned char const*>(pass.values) + begin;
      std::int64_t const from = static_cast<std::int64_t>(pass.chunk * 8);
      for (std::int64_t b = 0; b < 8; ++b) {
        std::uint64_t const byte = from + b < length ? bytes[from + b] : 0U;
        image |= byte << (8 * (7 - b));
      }
    }
  }
  return pass.descending ? ~image & low_bits(pass.bits) : image;
}

/**
 * @brief The passes that sort `keys` by `orders`, least significant first.
 * @param longest the longest string (in bytes) of each key column; 0 for fixed width
 */
inline std::vector<radix_pass> plan_passes(table_view const& keys,
                                           sort_order const& orders,
                                           std::vector<std::uint64_t> const& longest) {
  std::vector<radix_pass> passes;
  for (std::size_t c = keys.num_columns(); c-- > 0;) {
    column_view const& key = keys.column(c);
    radix_pass base;
    base.type         = key.type().id();
    base.values       = key.head();
    base.offsets      = key.offsets();
    base.mask         = key.has_nulls() ? key.null_mask() : nullptr;
    base.offset       = key.offset();
    base.descending   = orders[c].direction == order::DESCENDING;
    base.nulls_before = orders[c].nulls == null_order::BEFORE;
    if (!is_fixed_width(key.type())) {
      radix_pass length = base;
      length.kind       = pass_kind::STRING_LENGTH;
      length.bits       = 1;
      while (length.bits < 64 && (longest[c] >> length.bits) != 0) {
        ++length.bits;
      }
      passes.push_back(length);
      for (std::uint64_t chunk = (longest[c] + 7) / 8; chunk-- > 0;) {
        radix_pass bytes = base;
        bytes.kind       = pass_kind::STRING_CHUNK;
        bytes.chunk      = chunk;
        bytes.bits       = 64;
        passes.push_back(bytes);
      }
    } else if (size_of(key.type()) > sizeof(std::uint64_t)) {  // a wide decimal, word by word
      for (std::uint64_t word = 0; word < size_of(key.type()) / sizeof(std::uint64_t); ++word) {
        radix_pass value = base;
        value.kind       = pass_kind::VALUE;
        value.chunk      = word;
        value.bits       = 64;
        passes.push_back(value);
      }
    } else {
      radix_pass value = base;
      value.kind       = pass_kind::VALUE;
      value.bits       = static_cast<unsigned>(8 * size_of(key.type()));
      passes.push_back(value);
    }
    if (key.has_nulls()) {
      radix_pass nulls = base;
      nulls.kind       = pass_kind::NULLS;
      nulls.bits       = 1;
      passes.push_back(nulls);
    }
  }
  return passes;
}

}  // namespace spillway::detail::cuda
