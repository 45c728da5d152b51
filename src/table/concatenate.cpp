#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/concatenate.hpp>

#include <string>
#include <vector>

namespace spillway {
namespace detail {
namespace {

std::unique_ptr<column> concatenate_column(std::span<table_view const> inputs,
                                           std::size_t index,
                                           std::size_t total_rows,
                                           stream_view stream,
                                           resource_ref output) {
  data_type const type = inputs.front().column(index).type();
  bool any_nulls       = false;
  std::size_t chars    = 0;
  for (auto const& input : inputs) {
    column_view const& view = input.column(index);
    any_nulls               = any_nulls || view.has_nulls();
    if (!is_fixed_width(type)) {
      chars += view.chars_size();
    }
  }
  mask_state const state = any_nulls ? mask_state::UNINITIALIZED : mask_state::UNALLOCATED;
  std::unique_ptr<column> result =
    is_fixed_width(type) ? make_fixed_width_column(type, total_rows, state, stream, output)
                         : make_strings_column(total_rows, chars, state, stream, output, type);
  memory_kind const kind   = output.kind();
  std::size_t row          = 0;
  std::int64_t char_cursor = 0;
  if (!is_fixed_width(type)) {
    result->mutable_offsets()[0] = 0;
  }
  std::size_t null_count = 0;
  for (auto const& input : inputs) {
    column_view const& view = input.column(index);
    std::size_t const rows  = view.size();
    if (is_fixed_width(type)) {
      std::size_t const width = size_of(type);
      copy_bytes(result->mutable_data<std::byte>() + row * width,
                 kind,
                 static_cast<std::byte const*>(view.head()) + view.offset() * width,
                 view.kind(),
                 rows * width,
                 stream);
    } else if (rows > 0) {
      std::int64_t const base = view.offsets()[view.offset()];
      std::int64_t* offsets   = result->mutable_offsets() + row;
      for (std::size_t i = 1; i <= rows; ++i) {
        offsets[i] = char_cursor + (view.offsets()[view.offset() + i] - base);
      }
      copy_bytes(result->mutable_chars() + char_cursor,
                 kind,
                 view.chars() + base,
                 view.kind(),
                 view.chars_size(),
                 stream);
      char_cursor += static_cast<std::int64_t>(view.chars_size());
    }
    if (any_nulls) {
      if (view.nullable()) {
        copy_bits(result->mutable_null_mask(), row, view.null_mask(), view.offset(), rows);
      } else {
        fill_bits(result->mutable_null_mask(), row, row + rows, true);
      }
      null_count += view.null_count();
    }
    row += rows;
  }
  result->set_null_count(null_count);
  return result;
}

}  // namespace

std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   stream_view stream,
                                   memory_resources mrs) {
  if (inputs.empty()) {
    return std::make_unique<table>();
  }
  std::size_t const num_columns = inputs.front().num_columns();
  std::size_t total_rows        = 0;
  for (std::size_t t = 0; t < inputs.size(); ++t) {
    SPILLWAY_EXPECTS_EQ(
      inputs[t].num_columns(),
      num_columns,
      "concatenate: table " + std::to_string(t) + " has a different column count than table 0",
      invalid_argument);
    for (std::size_t c = 0; c < num_columns; ++c) {
      SPILLWAY_EXPECTS(inputs[t].column(c).type() == inputs.front().column(c).type(),
                       "concatenate: column " + std::to_string(c) + " of table " +
                         std::to_string(t) + " is " + to_string(inputs[t].column(c).type()) +
                         ", of table 0 is " + to_string(inputs.front().column(c).type()),
                       invalid_argument);
    }
    total_rows += inputs[t].num_rows();
  }
#if SPILLWAY_HAS_CUDA
  for (auto const& input : inputs) {
    if (cuda::on_device(input)) {
      return cuda::concatenate(inputs, total_rows, stream, mrs);
    }
  }
#endif
  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(num_columns);
  for (std::size_t c = 0; c < num_columns; ++c) {
    columns.push_back(concatenate_column(inputs, c, total_rows, stream, mrs.output()));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace detail

std::unique_ptr<table> concatenate(std::span<table_view const> inputs,
                                   stream_view stream,
                                   memory_resources mrs) {
  return detail::concatenate(inputs, stream, mrs);
}

}  // namespace spillway
