/**
 * @file table_generators.hpp
 * @brief Columns and tables for tests, built from host values or at random, always from an
 * explicit resource.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table.hpp>

#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spillway::testing {

/**
 * @brief A fixed-width column of `type` holding `values`; `validity` (when not empty) gives each
 * row's validity, and the column then has a mask.
 */
template <typename T>
std::unique_ptr<column> make_fixed_column(data_type type,
                                          std::vector<T> const& values,
                                          std::vector<bool> const& validity,
                                          resource_ref resource) {
  auto result =
    make_fixed_width_column(type,
                            values.size(),
                            validity.empty() ? mask_state::UNALLOCATED : mask_state::ALL_VALID,
                            default_stream(),
                            resource);
  if (!values.empty()) {
    std::memcpy(result->template mutable_data<T>(), values.data(), values.size() * sizeof(T));
  }
  if (!validity.empty()) {
    for (std::size_t row = 0; row < validity.size(); ++row) {
      set_bit(result->mutable_null_mask(), row, validity[row]);
    }
    result->recount_nulls();
  }
  return result;
}

/** @brief A STRING column; `std::nullopt` rows are null (and the column then has a mask). */
std::unique_ptr<column> make_string_column(std::vector<std::optional<std::string>> const& values,
                                           resource_ref resource,
                                           bool force_mask = false);

/** @brief A BINARY column (STRING's layout, any bytes); `std::nullopt` rows are null. */
std::unique_ptr<column> make_binary_column(std::vector<std::optional<std::string>> const& values,
                                           resource_ref resource,
                                           bool force_mask = false);

/** @brief One column of every supported type, in `type_id` order (timestamps in ms). */
std::vector<data_type> all_types();

/**
 * @brief A column of `rows` random values of `type`; each row is null with
 * `null_probability` (no mask when 0). Strings are 0 to `max_string_length` bytes.
 */
std::unique_ptr<column> random_column(data_type type,
                                      std::size_t rows,
                                      std::uint64_t seed,
                                      double null_probability,
                                      resource_ref resource,
                                      std::size_t max_string_length = 24);

/** @brief A table with one random column per entry of `types`. */
std::unique_ptr<table> random_table(std::vector<data_type> const& types,
                                    std::size_t rows,
                                    std::uint64_t seed,
                                    double null_probability,
                                    resource_ref resource);

}  // namespace spillway::testing
