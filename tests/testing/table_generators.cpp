#include "testing/table_generators.hpp"

#include <array>
#include <random>

namespace spillway::testing {

std::unique_ptr<column> make_string_column(std::vector<std::optional<std::string>> const& values,
                                           resource_ref resource,
                                           bool force_mask) {
  std::size_t chars = 0;
  bool any_null     = false;
  for (auto const& value : values) {
    if (value) {
      chars += value->size();
    } else {
      any_null = true;
    }
  }
  auto result =
    make_strings_column(values.size(),
                        chars,
                        any_null || force_mask ? mask_state::ALL_VALID : mask_state::UNALLOCATED,
                        default_stream(),
                        resource);
  std::int64_t cursor          = 0;
  result->mutable_offsets()[0] = 0;
  for (std::size_t row = 0; row < values.size(); ++row) {
    if (values[row]) {
      if (!values[row]->empty()) {
        std::memcpy(result->mutable_chars() + cursor, values[row]->data(), values[row]->size());
      }
      cursor += static_cast<std::int64_t>(values[row]->size());
    } else {
      set_bit(result->mutable_null_mask(), row, false);
    }
    result->mutable_offsets()[row + 1] = cursor;
  }
  result->recount_nulls();
  return result;
}

std::unique_ptr<column> make_binary_column(std::vector<std::optional<std::string>> const& values,
                                           resource_ref resource,
                                           bool force_mask) {
  auto strings          = make_string_column(values, resource, force_mask);
  auto const size       = strings->size();
  auto const null_count = strings->null_count();
  auto contents         = strings->release();
  return std::make_unique<column>(data_type{type_id::BINARY},
                                  size,
                                  std::move(contents.data),
                                  std::move(contents.null_mask),
                                  null_count,
                                  std::move(contents.offsets));
}

std::vector<data_type> all_types() {
  return {data_type{type_id::BOOL8},
          data_type{type_id::INT8},
          data_type{type_id::INT16},
          data_type{type_id::INT32},
          data_type{type_id::INT64},
          data_type{type_id::UINT8},
          data_type{type_id::UINT16},
          data_type{type_id::UINT32},
          data_type{type_id::UINT64},
          data_type{type_id::FLOAT32},
          data_type{type_id::FLOAT64},
          data_type{type_id::TIMESTAMP, time_unit::MILLISECOND},
          data_type{type_id::STRING},
          data_type{type_id::DATE32},
          data_type{type_id::DATE64},
          data_type{type_id::TIME32, time_unit::MILLISECOND},
          data_type{type_id::TIME64, time_unit::MICROSECOND},
          data_type{type_id::DURATION, time_unit::NANOSECOND},
          data_type{type_id::BINARY},
          data_type{type_id::DECIMAL32, 9, 2},
          data_type{type_id::DECIMAL64, 18, 4},
          data_type{type_id::DECIMAL128, 38, 10},
          data_type{type_id::DECIMAL256, 76, 20}};
}

std::unique_ptr<column> random_column(data_type type,
                                      std::size_t rows,
                                      std::uint64_t seed,
                                      double null_probability,
                                      resource_ref resource,
                                      std::size_t max_string_length) {
  std::mt19937_64 engine{seed};
  std::bernoulli_distribution is_null{null_probability};
  std::unique_ptr<column> result;
  if (type.id() == type_id::STRING) {
    std::uniform_int_distribution<std::size_t> length{0, max_string_length};
    std::uniform_int_distribution<int> letter{'a', 'z'};
    std::vector<std::optional<std::string>> values;
    values.reserve(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      if (null_probability > 0 && is_null(engine)) {
        values.emplace_back(std::nullopt);
        continue;
      }
      std::string value(length(engine), ' ');
      for (char& c : value) {
        c = static_cast<char>(letter(engine));
      }
      values.emplace_back(std::move(value));
    }
    return make_string_column(values, resource, null_probability > 0);
  }
  if (type.id() == type_id::BINARY) {
    // Bytes from a small alphabet that has a zero byte and bytes above 0x7F (which order after
    // the others: bytes compare unsigned).
    constexpr std::array<unsigned char, 6> ALPHABET{0x00, 0x01, 0x41, 0x7F, 0x80, 0xFF};
    std::uniform_int_distribution<std::size_t> length{0, max_string_length};
    std::uniform_int_distribution<std::size_t> pick{0, ALPHABET.size() - 1};
    std::vector<std::optional<std::string>> values;
    values.reserve(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      if (null_probability > 0 && is_null(engine)) {
        values.emplace_back(std::nullopt);
        continue;
      }
      std::string value(length(engine), ' ');
      for (char& c : value) {
        c = static_cast<char>(ALPHABET[pick(engine)]);
      }
      values.emplace_back(std::move(value));
    }
    return make_binary_column(values, resource, null_probability > 0);
  }
  result =
    make_fixed_width_column(type,
                            rows,
                            null_probability > 0 ? mask_state::ALL_VALID : mask_state::UNALLOCATED,
                            default_stream(),
                            resource);
  // Dates a few centuries either side of the epoch, times within their day: values every
  // format writes and reads back as they are.
  constexpr std::int64_t MAX_DAYS = 100'000;
  std::uniform_int_distribution<std::int64_t> days{-MAX_DAYS, MAX_DAYS};
  std::int64_t const units_per_day =
    86'400 * (type.unit() == time_unit::SECOND        ? 1
              : type.unit() == time_unit::MILLISECOND ? 1'000
              : type.unit() == time_unit::MICROSECOND ? 1'000'000
                                                      : 1'000'000'000);
  std::uniform_int_distribution<std::int64_t> of_day{0, units_per_day - 1};
  visit_fixed_width(type, [&]<typename T>() {
    T* out = result->template mutable_data<T>();
    for (std::size_t row = 0; row < rows; ++row) {
      // Decimals within their precision (every format keeps them), the wide ones beyond 64
      // bits: a DECIMAL128 below 2^125, a DECIMAL256 below 2^251, either sign.
      constexpr std::int64_t MAX_DECIMAL32 = 999'999'999;
      constexpr std::int64_t MAX_DECIMAL64 = 999'999'999'999'999'999;
      if constexpr (std::is_same_v<T, decimal128_storage>) {
        out[row] = T{engine(), static_cast<std::int64_t>(engine()) >> 3};
      } else if constexpr (std::is_same_v<T, decimal256_storage>) {
        out[row] = T{{engine(),
                      engine(),
                      engine(),
                      static_cast<std::uint64_t>(static_cast<std::int64_t>(engine()) >> 5)}};
      } else if (type.id() == type_id::DECIMAL32 || type.id() == type_id::DECIMAL64) {
        std::int64_t const most = type.id() == type_id::DECIMAL32 ? MAX_DECIMAL32 : MAX_DECIMAL64;
        out[row] = static_cast<T>(std::uniform_int_distribution<std::int64_t>{-most, most}(engine));
      } else if (type.id() == type_id::DATE32) {
        out[row] = static_cast<T>(days(engine));
      } else if (type.id() == type_id::DATE64) {
        out[row] = static_cast<T>(days(engine) * 86'400'000);
      } else if (type.id() == type_id::TIME32 || type.id() == type_id::TIME64) {
        out[row] = static_cast<T>(of_day(engine));
      } else if (type.id() == type_id::BOOL8) {
        out[row] = static_cast<T>(engine() & 1U);
      } else if constexpr (std::is_floating_point_v<T>) {
        out[row] = static_cast<T>(std::uniform_real_distribution<double>{-1e6, 1e6}(engine));
      } else {
        out[row] = static_cast<T>(engine());
      }
    }
  });
  if (null_probability > 0) {
    for (std::size_t row = 0; row < rows; ++row) {
      if (is_null(engine)) {
        set_bit(result->mutable_null_mask(), row, false);
      }
    }
    result->recount_nulls();
  }
  return result;
}

std::unique_ptr<table> random_table(std::vector<data_type> const& types,
                                    std::size_t rows,
                                    std::uint64_t seed,
                                    double null_probability,
                                    resource_ref resource) {
  std::vector<std::unique_ptr<column>> columns;
  for (std::size_t index = 0; index < types.size(); ++index) {
    columns.push_back(
      random_column(types[index], rows, seed * 1000003 + index, null_probability, resource));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace spillway::testing
