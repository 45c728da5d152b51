/**
 * @file column_view.hpp
 * @brief A non-owning view of a column: its type, rows, buffers and an offset for slicing.
 */
#pragma once

#include <spillway/memory/memory_kind.hpp>
#include <spillway/table/data_type.hpp>
#include <spillway/table/null_mask.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spillway {

/**
 * @brief Rows `[offset, offset + size)` of a column's buffers.
 *
 * Fixed-width: `data` holds values; row `i` of the view is element `offset + i`. STRING: `offsets`
 * holds `offset + size + 1` or more int64 offsets into `data` (the characters); row `i` is
 * `data[offsets[offset + i] .. offsets[offset + i + 1])`. The mask, when present, is indexed by
 * `offset + i` as well.
 * @note Trivially copyable; the viewed memory must outlive the view. `null_count` is exact.
 */
class column_view {
 public:
  column_view() = default;

  /**
   * @param type the column's type
   * @param size rows in the view
   * @param data values (fixed width) or characters (STRING)
   * @param null_mask validity bits, or null when every row is valid
   * @param null_count nulls among the viewed rows
   * @param offset the first viewed row of the buffers
   * @param offsets STRING offsets (null for fixed width)
   * @param kind the kind of memory all buffers live in
   */
  column_view(data_type type,
              std::size_t size,
              void const* data,
              bitmask_type const* null_mask,
              std::size_t null_count,
              std::size_t offset          = 0,
              std::int64_t const* offsets = nullptr,
              memory_kind kind            = memory_kind::HOST)
    : type_(type),
      size_(size),
      data_(data),
      null_mask_(null_mask),
      null_count_(null_count),
      offset_(offset),
      offsets_(offsets),
      kind_(kind) {}

  [[nodiscard]] data_type type() const noexcept { return type_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool is_empty() const noexcept { return size_ == 0; }
  [[nodiscard]] std::size_t offset() const noexcept { return offset_; }
  [[nodiscard]] std::size_t null_count() const noexcept { return null_count_; }
  [[nodiscard]] bool has_nulls() const noexcept { return null_count_ > 0; }
  /** @return true when a mask is present (it may still have no nulls) */
  [[nodiscard]] bool nullable() const noexcept { return null_mask_ != nullptr; }
  [[nodiscard]] memory_kind kind() const noexcept { return kind_; }

  /** @return the data buffer without the offset applied */
  [[nodiscard]] void const* head() const noexcept { return data_; }
  /** @return the first viewed value of a fixed-width column */
  template <typename T>
  [[nodiscard]] T const* data() const noexcept {
    return static_cast<T const*>(data_) + offset_;
  }
  /** @return the mask without the offset applied (index it by `offset() + i`) */
  [[nodiscard]] bitmask_type const* null_mask() const noexcept { return null_mask_; }
  /** @return the STRING offsets without the offset applied (index by `offset() + i`) */
  [[nodiscard]] std::int64_t const* offsets() const noexcept { return offsets_; }
  /** @return the STRING characters */
  [[nodiscard]] char const* chars() const noexcept { return static_cast<char const*>(data_); }

  /** @return whether row `row` is valid (not null) */
  [[nodiscard]] bool is_valid(std::size_t row) const noexcept {
    return null_mask_ == nullptr || bit_is_set(null_mask_, offset_ + row);
  }
  [[nodiscard]] bool is_null(std::size_t row) const noexcept { return !is_valid(row); }

  /** @return the bytes of row `row` of a STRING column */
  [[nodiscard]] std::string_view string_at(std::size_t row) const noexcept {
    auto const begin = offsets_[offset_ + row];
    auto const end   = offsets_[offset_ + row + 1];
    return {chars() + begin, static_cast<std::size_t>(end - begin)};
  }

  /** @return the characters the viewed rows of a STRING column cover */
  [[nodiscard]] std::size_t chars_size() const noexcept {
    if (size_ == 0 || offsets_ == nullptr) {
      return 0;
    }
    return static_cast<std::size_t>(offsets_[offset_ + size_] - offsets_[offset_]);
  }

 private:
  data_type type_{};
  std::size_t size_              = 0;
  void const* data_              = nullptr;
  bitmask_type const* null_mask_ = nullptr;
  std::size_t null_count_        = 0;
  std::size_t offset_            = 0;
  std::int64_t const* offsets_   = nullptr;
  memory_kind kind_              = memory_kind::HOST;
};

/**
 * @brief Rows `[begin, end)` of `view`; the null count of the range is counted.
 * @throws spillway::invalid_argument when the range is outside the view
 */
column_view slice(column_view const& view, std::size_t begin, std::size_t end);

}  // namespace spillway
