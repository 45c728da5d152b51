#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

#include <cstdint>
#include <string>
#include <vector>

namespace spillway::detail::cuda {

bool on_device(column_view const& view) noexcept {
  // A STRING column without characters reports the kind of its empty characters buffer (HOST),
  // so its offsets are asked.
  bool const strings = !is_fixed_width(view.type());
  if (view.size() == 0 || (view.kind() != memory_kind::DEVICE && !strings)) {
    return false;
  }
  return is_cuda_device_pointer(strings ? static_cast<void const*>(view.offsets()) : view.head());
}

bool on_device(table_view const& view) noexcept {
  for (auto const& column : view) {
    if (on_device(column)) {
      return true;
    }
  }
  return false;
}

bool on_device(column const& result) noexcept {
  column_view const view = result.view();
  return is_cuda_device_pointer(
    !is_fixed_width(view.type()) ? static_cast<void const*>(view.offsets()) : view.head());
}

void expect_device_output(column const& result, char const* what) {
  SPILLWAY_EXPECTS(result.size() == 0 || on_device(result),
                   std::string{what} +
                     ": the input is in CUDA device memory, so the output resource must give "
                     "device memory too (its kind is " +
                     std::string{to_string(result.kind())} + ")",
                   invalid_argument);
}

std::size_t count_unset_bits_anywhere(bitmask_type const* mask,
                                      std::size_t begin,
                                      std::size_t end) {
  if (begin >= end) {
    return 0;
  }
  if (!is_cuda_device_pointer(mask)) {
    return count_unset_bits(mask, begin, end);
  }
  std::size_t const first_byte = begin / 8;
  std::vector<bitmask_type> bytes((end + 7) / 8 - first_byte);
  copy_bytes(bytes.data(),
             memory_kind::HOST,
             mask + first_byte,
             memory_kind::DEVICE,
             bytes.size(),
             default_stream());
  return count_unset_bits(bytes.data(), begin % 8, begin % 8 + (end - begin));
}

std::size_t chars_size(column_view const& view, stream_view stream) {
  if (view.size() == 0) {
    return 0;
  }
  std::int64_t first          = 0;
  std::int64_t last           = 0;
  std::int64_t const* offsets = view.offsets() + view.offset();
  copy_bytes(&first, memory_kind::HOST, offsets, memory_kind::DEVICE, sizeof(first), stream);
  copy_bytes(
    &last, memory_kind::HOST, offsets + view.size(), memory_kind::DEVICE, sizeof(last), stream);
  return static_cast<std::size_t>(last - first);
}

}  // namespace spillway::detail::cuda
