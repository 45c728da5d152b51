#include "ops/cuda/device_ops.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/ops/bounds.hpp>

namespace spillway {
namespace detail {
namespace {

enum class bound : std::uint8_t { LOWER, UPPER };

std::unique_ptr<column> find_bounds(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    bound which,
                                    stream_view stream,
                                    memory_resources mrs) {
  expect_same_key_types(haystack, needles, which == bound::LOWER ? "lower_bound" : "upper_bound");
  sort_order const resolved = resolve_orders(orders, haystack.num_columns());
#if SPILLWAY_HAS_CUDA
  if (haystack.num_columns() > 0 && (cuda::on_device(haystack) || cuda::on_device(needles))) {
    return cuda::bound(haystack, needles, resolved, which == bound::UPPER, stream, mrs);
  }
#endif
  auto result = make_fixed_width_column(
    type_id::UINT64, needles.num_rows(), mask_state::UNALLOCATED, stream, mrs.output());
  auto* out = result->mutable_data<std::uint64_t>();
  if (haystack.num_columns() == 0) {
    // No keys: every needle ties with every row of an empty haystack.
    for (std::size_t row = 0; row < needles.num_rows(); ++row) {
      out[row] = 0;
    }
    return result;
  }
  row_comparator const comparator{haystack, resolved};
  // A haystack row goes before the needle's position when it is less (LOWER) or not greater.
  int const threshold = which == bound::LOWER ? 0 : 1;
  for (std::size_t needle = 0; needle < needles.num_rows(); ++needle) {
    std::size_t first = 0;
    std::size_t count = haystack.num_rows();
    while (count > 0) {
      std::size_t const step  = count / 2;
      std::size_t const probe = first + step;
      if (comparator.compare(haystack, probe, needles, needle) < threshold) {
        first = probe + 1;
        count -= step + 1;
      } else {
        count = step;
      }
    }
    out[needle] = first;
  }
  return result;
}

}  // namespace

std::unique_ptr<column> lower_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return find_bounds(haystack, needles, orders, bound::LOWER, stream, mrs);
}

std::unique_ptr<column> upper_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return find_bounds(haystack, needles, orders, bound::UPPER, stream, mrs);
}

}  // namespace detail

std::unique_ptr<column> lower_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return detail::lower_bound(haystack, needles, orders, stream, mrs);
}

std::unique_ptr<column> upper_bound(table_view const& haystack,
                                    table_view const& needles,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return detail::upper_bound(haystack, needles, orders, stream, mrs);
}

}  // namespace spillway
