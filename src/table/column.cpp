#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/column.hpp>

#include <cstring>
#include <string>

namespace spillway {

column_view slice(column_view const& view, std::size_t begin, std::size_t end) {
  SPILLWAY_EXPECTS(begin <= end && end <= view.size(),
                   "slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") outside a column of " + std::to_string(view.size()) + " rows",
                   invalid_argument);
  std::size_t const offset = view.offset() + begin;
  // The parent's count answers the common cases without reading the mask (which may live on a
  // CUDA device).
  std::size_t null_count = 0;
  if (view.null_mask() != nullptr && view.null_count() > 0) {
    null_count =
      begin == 0 && end == view.size()
        ? view.null_count()
        : detail::cuda::count_unset_bits_anywhere(view.null_mask(), offset, view.offset() + end);
  }
  return column_view{view.type(),
                     end - begin,
                     view.head(),
                     view.null_mask(),
                     null_count,
                     offset,
                     view.offsets(),
                     view.kind()};
}

column::column(data_type type,
               std::size_t size,
               buffer&& data,
               buffer&& null_mask,
               std::size_t null_count,
               buffer&& offsets)
  : type_(type),
    size_(size),
    data_(std::move(data)),
    null_mask_(std::move(null_mask)),
    null_count_(null_count),
    offsets_(std::move(offsets)) {
  if (is_fixed_width(type_)) {
    SPILLWAY_EXPECTS_LE(
      size_ * size_of(type_),
      data_.size(),
      "column data buffer too small for " + std::to_string(size_) + " rows of " + to_string(type_),
      invalid_argument);
  } else {
    SPILLWAY_EXPECTS_LE(
      (size_ + 1) * sizeof(std::int64_t),
      offsets_.size(),
      "string column offsets buffer too small for " + std::to_string(size_) + " rows",
      invalid_argument);
  }
  if (!null_mask_.empty()) {
    SPILLWAY_EXPECTS_LE((size_ + 7) / 8,
                        null_mask_.size(),
                        "null mask too small for " + std::to_string(size_) + " rows",
                        invalid_argument);
  }
  SPILLWAY_EXPECTS(
    null_count_ == 0 || !null_mask_.empty(),
    "a column with nulls needs a null mask: null_count " + std::to_string(null_count_),
    invalid_argument);
  SPILLWAY_EXPECTS_LE(
    null_count_, size_, "a column cannot have more nulls than rows", invalid_argument);
}

column_view column::view() const noexcept {
  return column_view{type_,
                     size_,
                     data_.data(),
                     static_cast<bitmask_type const*>(null_mask_.data()),
                     null_count_,
                     0,
                     static_cast<std::int64_t const*>(offsets_.data()),
                     data_.resource() != nullptr ? data_.kind() : offsets_.kind()};
}

void column::recount_nulls() noexcept {
  null_count_ = null_mask_.empty()
                  ? 0
                  : count_unset_bits(static_cast<bitmask_type const*>(null_mask_.data()), 0, size_);
}

column::contents column::release() noexcept {
  size_       = 0;
  null_count_ = 0;
  return contents{std::move(data_), std::move(null_mask_), std::move(offsets_)};
}

buffer make_null_mask(std::size_t rows,
                      mask_state state,
                      stream_view stream,
                      resource_ref resource) {
  if (state == mask_state::UNALLOCATED) {
    return buffer{};
  }
  buffer mask{bitmask_allocation_size(rows), stream, resource};
  // A mask for 0 rows has no bytes (and may have no address), so there is nothing to fill.
  if (!mask.empty() && (state == mask_state::ALL_VALID || state == mask_state::ALL_NULL)) {
    // The padding past the last row is set too, so that whole-byte copies stay valid.
    fill_bytes(
      mask.data(), mask.kind(), state == mask_state::ALL_VALID ? 0xFF : 0x00, mask.size(), stream);
  }
  return mask;
}

std::unique_ptr<column> make_fixed_width_column(
  data_type type, std::size_t size, mask_state state, stream_view stream, resource_ref resource) {
  SPILLWAY_EXPECTS(is_fixed_width(type),
                   "make_fixed_width_column: " + to_string(type) + " is not fixed width",
                   invalid_argument);
  buffer data{size * size_of(type), stream, resource};
  buffer mask = make_null_mask(size, state, stream, resource);
  return std::make_unique<column>(
    type, size, std::move(data), std::move(mask), state == mask_state::ALL_NULL ? size : 0);
}

std::unique_ptr<column> make_strings_column(std::size_t size,
                                            std::size_t chars_bytes,
                                            mask_state state,
                                            stream_view stream,
                                            resource_ref resource,
                                            data_type type) {
  SPILLWAY_EXPECTS(!is_fixed_width(type),
                   "make_strings_column: " + to_string(type) + " is fixed width",
                   invalid_argument);
  buffer offsets{(size + 1) * sizeof(std::int64_t), stream, resource};
  buffer chars{chars_bytes, stream, resource};
  buffer mask = make_null_mask(size, state, stream, resource);
  return std::make_unique<column>(type,
                                  size,
                                  std::move(chars),
                                  std::move(mask),
                                  state == mask_state::ALL_NULL ? size : 0,
                                  std::move(offsets));
}

}  // namespace spillway
