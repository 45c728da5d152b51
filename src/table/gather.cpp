#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/gather.hpp>

#include <cstring>
#include <string>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// Reads a gather map of any supported index type; indices that do not fit come back as
/// SIZE_MAX so that the bounds check catches them.
class index_reader {
 public:
  explicit index_reader(column_view const& map) : map_(map) {}

  [[nodiscard]] std::size_t operator[](std::size_t row) const noexcept {
    switch (map_.type().id()) {
      case type_id::INT32:
        return from_signed(map_.data<std::int32_t>()[row]);
      case type_id::INT64:
        return from_signed(map_.data<std::int64_t>()[row]);
      case type_id::UINT32:
        return map_.data<std::uint32_t>()[row];
      default:
        return static_cast<std::size_t>(map_.data<std::uint64_t>()[row]);
    }
  }

  /// @return the index at `row` as the map holds it (negative or above SIZE_MAX), for messages
  [[nodiscard]] std::string to_string(std::size_t row) const {
    switch (map_.type().id()) {
      case type_id::INT32:
        return std::to_string(map_.data<std::int32_t>()[row]);
      case type_id::INT64:
        return std::to_string(map_.data<std::int64_t>()[row]);
      case type_id::UINT32:
        return std::to_string(map_.data<std::uint32_t>()[row]);
      default:
        return std::to_string(map_.data<std::uint64_t>()[row]);
    }
  }

 private:
  static std::size_t from_signed(std::int64_t value) noexcept {
    return value < 0 ? SIZE_MAX : static_cast<std::size_t>(value);
  }
  column_view map_;
};

std::unique_ptr<column> gather_column(column_view const& source,
                                      index_reader const& indices,
                                      std::size_t rows,
                                      bool any_out_of_bounds,
                                      stream_view stream,
                                      resource_ref output) {
  std::size_t const source_rows = source.size();
  bool const nullable           = source.has_nulls() || any_out_of_bounds;
  mask_state const state        = nullable ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  std::unique_ptr<column> result;
  if (is_fixed_width(source.type())) {
    result = make_fixed_width_column(source.type(), rows, state, stream, output);
    visit_fixed_width(source.type(), [&]<typename T>() {
      T const* in = source.data<T>();
      T* out      = result->mutable_data<T>();
      for (std::size_t row = 0; row < rows; ++row) {
        std::size_t const index = indices[row];
        out[row]                = index < source_rows ? in[index] : T{};
      }
    });
  } else {
    std::size_t chars = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      std::size_t const index = indices[row];
      if (index < source_rows) {
        chars += source.string_at(index).size();
      }
    }
    result                = make_strings_column(rows, chars, state, stream, output, source.type());
    std::int64_t* offsets = result->mutable_offsets();
    char* out             = result->mutable_chars();
    std::int64_t cursor   = 0;
    offsets[0]            = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      std::size_t const index = indices[row];
      if (index < source_rows) {
        std::string_view const value = source.string_at(index);
        if (!value.empty()) {
          std::memcpy(out + cursor, value.data(), value.size());
        }
        cursor += static_cast<std::int64_t>(value.size());
      }
      offsets[row + 1] = cursor;
    }
  }
  if (nullable) {
    bitmask_type* mask     = result->mutable_null_mask();
    std::size_t null_count = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      std::size_t const index = indices[row];
      bool const valid        = index < source_rows && source.is_valid(index);
      if (!valid) {
        set_bit(mask, row, false);
        ++null_count;
      }
    }
    result->set_null_count(null_count);
  }
  return result;
}

}  // namespace

std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy,
                              stream_view stream,
                              memory_resources mrs) {
  type_id const map_type = gather_map.type().id();
  SPILLWAY_EXPECTS(
    map_type == type_id::INT32 || map_type == type_id::INT64 || map_type == type_id::UINT32 ||
      map_type == type_id::UINT64,
    "gather map must be int32, int64, uint32 or uint64, not " + to_string(gather_map.type()),
    invalid_argument);
  SPILLWAY_EXPECTS(
    !gather_map.has_nulls(),
    "gather map must not contain nulls; it has " + std::to_string(gather_map.null_count()),
    invalid_argument);
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(source)) {
    return cuda::gather(source, gather_map, policy, stream, mrs);
  }
#endif
  index_reader const indices{gather_map};
  std::size_t const rows        = gather_map.size();
  std::size_t const source_rows = source.num_rows();
  bool any_out_of_bounds        = false;
  for (std::size_t row = 0; row < rows; ++row) {
    if (indices[row] >= source_rows) {
      SPILLWAY_EXPECTS(policy == out_of_bounds_policy::NULLIFY,
                       "gather map row " + std::to_string(row) + " is out of bounds: index " +
                         indices.to_string(row) + ", source rows " + std::to_string(source_rows),
                       invalid_argument);
      any_out_of_bounds = true;
    }
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(source.num_columns());
  for (auto const& column : source) {
    columns.push_back(
      gather_column(column, indices, rows, any_out_of_bounds, stream, mrs.output()));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace detail

std::unique_ptr<table> gather(table_view const& source,
                              column_view const& gather_map,
                              out_of_bounds_policy policy,
                              stream_view stream,
                              memory_resources mrs) {
  return detail::gather(source, gather_map, policy, stream, mrs);
}

}  // namespace spillway
