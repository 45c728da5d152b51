#include <spillway/core/error.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <string>

namespace spillway {

table_view::table_view(std::vector<column_view> columns) : columns_(std::move(columns)) {
  if (!columns_.empty()) {
    num_rows_ = columns_.front().size();
  }
  for (std::size_t index = 0; index < columns_.size(); ++index) {
    SPILLWAY_EXPECTS_EQ(
      columns_[index].size(),
      num_rows_,
      "table_view: column " + std::to_string(index) + " differs in length from column 0",
      invalid_argument);
  }
}

table_view table_view::select(std::span<std::size_t const> indices) const {
  std::vector<column_view> selected;
  selected.reserve(indices.size());
  for (std::size_t const index : indices) {
    SPILLWAY_EXPECTS_LT(
      index, columns_.size(), "table_view::select: no such column", invalid_argument);
    selected.push_back(columns_[index]);
  }
  return table_view{std::move(selected)};
}

table_view slice(table_view const& view, std::size_t begin, std::size_t end) {
  SPILLWAY_EXPECTS(begin <= end && end <= view.num_rows(),
                   "slice [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") outside a table of " + std::to_string(view.num_rows()) + " rows",
                   invalid_argument);
  std::vector<column_view> columns;
  columns.reserve(view.num_columns());
  for (auto const& column : view) {
    columns.push_back(slice(column, begin, end));
  }
  return table_view{std::move(columns)};
}

std::vector<table_view> split(table_view const& view, std::span<std::size_t const> splits) {
  std::vector<table_view> pieces;
  pieces.reserve(splits.size() + 1);
  std::size_t begin = 0;
  for (std::size_t const end : splits) {
    SPILLWAY_EXPECTS(begin <= end && end <= view.num_rows(),
                     "split points must ascend within the table's " +
                       std::to_string(view.num_rows()) + " rows; got " + std::to_string(end) +
                       " after " + std::to_string(begin),
                     invalid_argument);
    pieces.push_back(slice(view, begin, end));
    begin = end;
  }
  pieces.push_back(slice(view, begin, view.num_rows()));
  return pieces;
}

table::table(std::vector<std::unique_ptr<spillway::column>> columns)
  : columns_(std::move(columns)) {
  if (!columns_.empty()) {
    num_rows_ = columns_.front()->size();
  }
  for (std::size_t index = 0; index < columns_.size(); ++index) {
    SPILLWAY_EXPECTS(columns_[index] != nullptr,
                     "table: column " + std::to_string(index) + " is null",
                     invalid_argument);
    SPILLWAY_EXPECTS_EQ(
      columns_[index]->size(),
      num_rows_,
      "table: column " + std::to_string(index) + " differs in length from column 0",
      invalid_argument);
  }
}

table_view table::view() const {
  std::vector<column_view> views;
  views.reserve(columns_.size());
  for (auto const& column : columns_) {
    views.push_back(column->view());
  }
  return table_view{std::move(views)};
}

std::vector<std::unique_ptr<spillway::column>> table::release() noexcept {
  num_rows_ = 0;
  return std::move(columns_);
}

std::size_t table::allocated_bytes() const {
  // An allocation that slices share counts once, whole, at the first of them.
  std::size_t total = 0;
  std::vector<buffer const*> shared;  // the shared allocations counted so far
  for (auto const& column : columns_) {
    column->visit_buffers([&](buffer const& part) {
      if (!part.is_slice()) {
        total += part.size();
      } else if (std::find(shared.begin(), shared.end(), part.allocation()) == shared.end()) {
        shared.push_back(part.allocation());
        total += part.allocation()->size();
      }
    });
  }
  return total;
}

}  // namespace spillway
