/**
 * @file table_input.hpp
 * @brief A retryable input over rows of a table that stays in memory.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <utility>

namespace spillway {

/**
 * @brief Rows `[begin, end)` of a table that stays in memory: one the input shares, or rows
 * viewed where their owner keeps them (an Arrow batch, say). Making it spillable is a no-op (it
 * is counted), materializing returns the rows; splitting shares the table.
 * @note Copyable and movable; pieces share the table.
 */
class table_input {
 public:
  explicit table_input(std::shared_ptr<table const> source)
    : source_(std::move(source)), rows_(source_->view()), begin_(0), end_(rows_.num_rows()) {}
  /** @brief Over `rows`, which the caller keeps alive as long as the input and its pieces. */
  explicit table_input(table_view rows)
    : rows_(std::move(rows)), begin_(0), end_(rows_.num_rows()) {}

  [[nodiscard]] std::size_t rows() const noexcept { return end_ - begin_; }
  [[nodiscard]] std::size_t begin() const noexcept { return begin_; }
  [[nodiscard]] std::size_t end() const noexcept { return end_; }
  void make_spillable() noexcept { ++spillable_calls_; }
  /** @return the rows, valid while the table lives */
  [[nodiscard]] table_view materialize() const { return slice(rows_, begin_, end_); }
  /** @return how many times this piece was made spillable */
  [[nodiscard]] std::size_t spillable_calls() const noexcept { return spillable_calls_; }

  [[nodiscard]] std::pair<table_input, table_input> split_at(std::size_t row) const {
    SPILLWAY_EXPECTS(row > 0 && row < rows(),
                     "table_input::split_at(" + std::to_string(row) + ") of " +
                       std::to_string(rows()) + " rows must leave two non-empty pieces",
                     invalid_argument);
    return {table_input{*this, begin_, begin_ + row}, table_input{*this, begin_ + row, end_}};
  }

 private:
  table_input(table_input const& whole, std::size_t begin, std::size_t end)
    : source_(whole.source_), rows_(whole.rows_), begin_(begin), end_(end) {}

  std::shared_ptr<table const> source_;  ///< null when the caller owns the rows
  table_view rows_;
  std::size_t begin_;
  std::size_t end_;
  std::size_t spillable_calls_ = 0;
};

}  // namespace spillway
