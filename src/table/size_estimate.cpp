#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <cstdint>
#include <string>

namespace spillway {
namespace {

std::size_t range_size(column_view const& view, std::size_t begin, std::size_t end) {
  std::size_t const rows = end - begin;
  std::size_t bytes      = view.nullable() ? (rows + 7) / 8 : 0;
  if (is_fixed_width(view.type())) {
    return bytes + rows * size_of(view.type());
  }
  if (rows == 0) {
    return bytes;
  }
  auto const* offsets = view.offsets() + view.offset();
  std::int64_t first  = 0;
  std::int64_t last   = 0;
  if (detail::cuda::on_device(view)) {  // two offsets read back from the device
    copy_bytes(&first, memory_kind::HOST, offsets + begin, memory_kind::DEVICE, 8, {});
    copy_bytes(&last, memory_kind::HOST, offsets + end, memory_kind::DEVICE, 8, {});
  } else {
    first = offsets[begin];
    last  = offsets[end];
  }
  return bytes + (rows + 1) * sizeof(std::int64_t) + static_cast<std::size_t>(last - first);
}

}  // namespace

std::size_t estimate_size(column_view const& view) { return range_size(view, 0, view.size()); }

std::size_t estimate_size(table_view const& view) {
  return estimate_size(view, 0, view.num_rows());
}

std::size_t estimate_size(table_view const& view, std::size_t begin, std::size_t end) {
  SPILLWAY_EXPECTS(begin <= end && end <= view.num_rows(),
                   "estimate_size: rows [" + std::to_string(begin) + ", " + std::to_string(end) +
                     ") outside a table of " + std::to_string(view.num_rows()) + " rows",
                   invalid_argument);
  std::size_t total = 0;
  for (auto const& column : view) {
    total += range_size(column, begin, end);
  }
  return total;
}

double estimate_row_size(table_view const& view) {
  if (view.num_rows() == 0) {
    return 0.0;
  }
  return static_cast<double>(estimate_size(view)) / static_cast<double>(view.num_rows());
}

}  // namespace spillway
