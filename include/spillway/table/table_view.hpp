/**
 * @file table_view.hpp
 * @brief A non-owning set of columns of equal length.
 */
#pragma once

#include <spillway/table/column_view.hpp>

#include <cstddef>
#include <initializer_list>
#include <span>
#include <vector>

namespace spillway {

/**
 * @brief Columns of the same number of rows, viewed together.
 * @note A table with no columns has no rows.
 */
class table_view {
 public:
  table_view() = default;
  /**
   * @throws spillway::invalid_argument when the columns differ in length
   */
  explicit table_view(std::vector<column_view> columns);
  table_view(std::initializer_list<column_view> columns)
    : table_view(std::vector<column_view>(columns)) {}

  [[nodiscard]] std::size_t num_rows() const noexcept { return num_rows_; }
  [[nodiscard]] std::size_t num_columns() const noexcept { return columns_.size(); }
  [[nodiscard]] column_view const& column(std::size_t index) const { return columns_.at(index); }
  [[nodiscard]] std::span<column_view const> columns() const noexcept { return columns_; }
  [[nodiscard]] auto begin() const noexcept { return columns_.begin(); }
  [[nodiscard]] auto end() const noexcept { return columns_.end(); }

  /** @return a view of the columns at `indices`, in that order */
  [[nodiscard]] table_view select(std::span<std::size_t const> indices) const;

 private:
  std::vector<column_view> columns_;
  std::size_t num_rows_ = 0;
};

/**
 * @brief Rows `[begin, end)` of every column of `view`.
 * @throws spillway::invalid_argument when the range is outside the table
 */
table_view slice(table_view const& view, std::size_t begin, std::size_t end);

/**
 * @brief Cuts `view` at the ascending row positions `splits` into `splits.size() + 1` views.
 * @throws spillway::invalid_argument when the splits are not ascending or exceed the rows
 */
std::vector<table_view> split(table_view const& view, std::span<std::size_t const> splits);

}  // namespace spillway
