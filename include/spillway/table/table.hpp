/**
 * @file table.hpp
 * @brief An owning set of columns of equal length.
 */
#pragma once

#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <memory>
#include <vector>

namespace spillway {

/**
 * @brief Owns columns of the same number of rows.
 * @note Move-only; returned by operators as `std::unique_ptr<table>`.
 */
class table {
 public:
  table() = default;
  /** @throws spillway::invalid_argument when the columns differ in length */
  explicit table(std::vector<std::unique_ptr<column>> columns);

  [[nodiscard]] std::size_t num_rows() const noexcept { return num_rows_; }
  [[nodiscard]] std::size_t num_columns() const noexcept { return columns_.size(); }
  [[nodiscard]] table_view view() const;
  operator table_view() const { return view(); }  // NOLINT(google-explicit-constructor)
  [[nodiscard]] spillway::column& get_column(std::size_t index) { return *columns_.at(index); }
  /** @brief Hands over the columns; the table is empty afterwards. */
  [[nodiscard]] std::vector<std::unique_ptr<spillway::column>> release() noexcept;
  /** @return the bytes held by every column's buffers; an allocation that buffers of its
   * columns share as slices (a packed table taken as it is) counts once, whole, as that is what
   * freeing the table frees */
  [[nodiscard]] std::size_t allocated_bytes() const;

 private:
  std::vector<std::unique_ptr<spillway::column>> columns_;
  std::size_t num_rows_ = 0;
};

}  // namespace spillway
