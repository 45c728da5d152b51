#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/copy.hpp>

#include <vector>

namespace spillway {
namespace detail {

std::unique_ptr<column> copy(column_view const& input, stream_view stream, memory_resources mrs) {
  resource_ref const output = mrs.output();
  memory_kind const kind    = output.kind();
  mask_state const state = input.nullable() ? mask_state::UNINITIALIZED : mask_state::UNALLOCATED;
  bool const from_device = cuda::on_device(input);
  std::unique_ptr<column> result;
  if (is_fixed_width(input.type())) {
    result = make_fixed_width_column(input.type(), input.size(), state, stream, output);
  } else {
    std::size_t const chars = from_device ? cuda::chars_size(input, stream) : input.chars_size();
    result = make_strings_column(input.size(), chars, state, stream, output, input.type());
  }
#if SPILLWAY_HAS_CUDA
  // Either side in CUDA device memory: the CPU must not touch it.
  if (from_device || cuda::on_device(*result)) {
    cuda::copy_into(*result, input, stream);
    return result;
  }
#endif
  if (is_fixed_width(input.type())) {
    copy_bytes(result->mutable_data<std::byte>(),
               kind,
               static_cast<std::byte const*>(input.head()) + input.offset() * size_of(input.type()),
               input.kind(),
               input.size() * size_of(input.type()),
               stream);
  } else {
    std::int64_t* offsets   = result->mutable_offsets();
    std::int64_t const base = input.size() == 0 ? 0 : input.offsets()[input.offset()];
    for (std::size_t row = 0; row <= input.size(); ++row) {
      offsets[row] = input.size() == 0 ? 0 : input.offsets()[input.offset() + row] - base;
    }
    copy_bytes(result->mutable_chars(),
               kind,
               input.chars() + base,
               input.kind(),
               result->view().chars_size(),
               stream);
  }
  if (input.nullable()) {
    copy_bits(result->mutable_null_mask(), 0, input.null_mask(), input.offset(), input.size());
    result->set_null_count(input.null_count());
  }
  return result;
}

std::unique_ptr<table> copy(table_view const& input, stream_view stream, memory_resources mrs) {
  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(input.num_columns());
  for (auto const& view : input) {
    columns.push_back(detail::copy(view, stream, mrs));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace detail

std::unique_ptr<column> copy(column_view const& input, stream_view stream, memory_resources mrs) {
  return detail::copy(input, stream, mrs);
}

std::unique_ptr<table> copy(table_view const& input, stream_view stream, memory_resources mrs) {
  return detail::copy(input, stream, mrs);
}

}  // namespace spillway
