/**
 * @file column.hpp
 * @brief An owning column: buffers from a resource, viewed through `column_view`.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/table/column_view.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>

namespace spillway {

/**
 * @brief Owns the buffers of one column: values (or characters), validity, and STRING offsets.
 * @note Move-only through `std::unique_ptr`; all buffers are of one memory kind.
 */
class column {
 public:
  /** @brief The buffers of a column, handed over by `release()`. */
  struct contents {
    buffer data;       ///< values, or STRING characters
    buffer null_mask;  ///< validity bits; empty when every row is valid
    buffer offsets;    ///< STRING offsets (`size + 1` int64); empty for fixed width
  };

  /**
   * @brief Takes ownership of buffers laid out as `column_view` describes, with offset 0.
   * @throws spillway::invalid_argument when the buffers are too small for `size` rows
   */
  column(data_type type,
         std::size_t size,
         buffer&& data,
         buffer&& null_mask,
         std::size_t null_count,
         buffer&& offsets = {});

  column(column const&)            = delete;
  column& operator=(column const&) = delete;
  column(column&&)                 = default;
  column& operator=(column&&)      = default;
  ~column()                        = default;

  [[nodiscard]] data_type type() const noexcept { return type_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] std::size_t null_count() const noexcept { return null_count_; }
  [[nodiscard]] bool nullable() const noexcept { return !null_mask_.empty(); }
  [[nodiscard]] memory_kind kind() const noexcept { return data_.kind(); }

  /** @return a view of all rows */
  [[nodiscard]] column_view view() const noexcept;
  operator column_view() const noexcept { return view(); }  // NOLINT(google-explicit-constructor)

  /** @return writable values of a fixed-width column */
  template <typename T>
  [[nodiscard]] T* mutable_data() noexcept {
    return static_cast<T*>(data_.data());
  }
  /** @return the writable characters of a STRING column */
  [[nodiscard]] char* mutable_chars() noexcept { return static_cast<char*>(data_.data()); }
  /** @return the writable offsets of a STRING column */
  [[nodiscard]] std::int64_t* mutable_offsets() noexcept {
    return static_cast<std::int64_t*>(offsets_.data());
  }
  /** @return the writable mask, or null */
  [[nodiscard]] bitmask_type* mutable_null_mask() noexcept {
    return static_cast<bitmask_type*>(null_mask_.data());
  }
  /** @brief Sets the null count after writing the mask directly. */
  void set_null_count(std::size_t null_count) noexcept { null_count_ = null_count; }
  /** @brief Recounts nulls from the mask. */
  void recount_nulls() noexcept;

  /** @brief Hands over the buffers; the column is empty afterwards. */
  [[nodiscard]] contents release() noexcept;

  /** @return whether a buffer is a slice of an allocation shared with other columns (the
   * columns of a packed table taken as they are): its bytes are freed with the last of them */
  [[nodiscard]] bool shares_allocation() const noexcept {
    return data_.is_slice() || null_mask_.is_slice() || offsets_.is_slice();
  }

  /** @brief Calls `visit(buffer const&)` with each of the column's three buffers. */
  template <typename Visit>
  void visit_buffers(Visit&& visit) const {
    visit(data_);
    visit(null_mask_);
    visit(offsets_);
  }

  /** @return the bytes held by the buffers (a slice's own bytes; see table::allocated_bytes) */
  [[nodiscard]] std::size_t allocated_bytes() const noexcept {
    return data_.size() + null_mask_.size() + offsets_.size();
  }

 private:
  data_type type_;
  std::size_t size_;
  buffer data_;
  buffer null_mask_;
  std::size_t null_count_;
  buffer offsets_;
};

/**
 * @brief Allocates a fixed-width column of `size` rows from `resource`; values are uninitialized.
 * @throws spillway::invalid_argument for STRING
 */
std::unique_ptr<column> make_fixed_width_column(
  data_type type, std::size_t size, mask_state state, stream_view stream, resource_ref resource);

/**
 * @brief Allocates a STRING column (or, with `type` BINARY, a BINARY one: the same layout) of
 * `size` rows and `chars_bytes` characters from `resource`; offsets and characters are
 * uninitialized.
 * @throws spillway::invalid_argument when `type` is fixed width
 */
std::unique_ptr<column> make_strings_column(std::size_t size,
                                            std::size_t chars_bytes,
                                            mask_state state,
                                            stream_view stream,
                                            resource_ref resource,
                                            data_type type = data_type{type_id::STRING});

/** @brief Allocates a mask for `rows` rows in `state` (UNALLOCATED gives an empty buffer). */
buffer make_null_mask(std::size_t rows,
                      mask_state state,
                      stream_view stream,
                      resource_ref resource);

}  // namespace spillway
