#include "ops/cuda/device_ops.hpp"
#include "ops/normalized_key.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/ops/bounds.hpp>

#include <algorithm>
#include <array>
#include <span>
#include <vector>

namespace spillway {
namespace detail {
namespace {

enum class bound : std::uint8_t { LOWER, UPPER };

/// Haystacks of this many rows and up to the most (the splitters of a range partitioning) are
/// searched by normalized prefixes, encoded once: a comparison of two or three words instead of
/// a comparison of every key column through `row_comparator`. A needle's encoding costs about a
/// comparison of its row, so one splitter is searched as before. `spillway_ops_bench`'s
/// `upper_bound_splitters` (10M rows of two INT64 keys), row comparisons against prefixes, one
/// run each: 1 splitter 114 against 127 ms, 3 splitters 200 against 166 ms, 63 splitters 527
/// against 371 ms, 1023 splitters 927 against 657 ms.
constexpr std::size_t PREFIX_SEARCH_MIN_HAYSTACK = 2;
constexpr std::size_t PREFIX_SEARCH_MAX_HAYSTACK = 4096;
/// Needles are encoded this many at a time (32 KiB of records at most).
constexpr std::size_t PREFIX_SEARCH_BLOCK = 1024;

template <std::size_t Words>
int compare_prefixes(key_record<Words> const& lhs, key_record<Words> const& rhs) noexcept {
  for (std::size_t word = 0; word < Words; ++word) {
    if (lhs.key[word] != rhs.key[word]) {
      return lhs.key[word] < rhs.key[word] ? -1 : 1;
    }
  }
  return 0;
}

/**
 * Writes each needle's bound to `out` as the binary search of `find_bounds` does, comparing
 * prefixes first: equal prefixes of a complete layout are equal keys, and of an incomplete one
 * (strings, keys cut) are compared in full.
 */
template <std::size_t Words>
void search_by_prefixes(normalized_key_layout const& layout,
                        table_view const& haystack,
                        table_view const& needles,
                        row_comparator const& comparator,
                        int threshold,
                        std::uint64_t* out) {
  std::vector<key_record<Words>> sought(haystack.num_rows());
  encode_normalized_keys<Words>(layout, haystack, 0, haystack.num_rows(), sought.data());
  std::vector<key_record<Words>> block(std::min(PREFIX_SEARCH_BLOCK, needles.num_rows()));
  for (std::size_t begin = 0; begin < needles.num_rows(); begin += PREFIX_SEARCH_BLOCK) {
    std::size_t const end = std::min(needles.num_rows(), begin + PREFIX_SEARCH_BLOCK);
    encode_normalized_keys<Words>(layout, needles, begin, end, block.data());
    for (std::size_t needle = begin; needle < end; ++needle) {
      key_record<Words> const& key = block[needle - begin];
      std::size_t first            = 0;
      std::size_t count            = sought.size();
      while (count > 0) {
        std::size_t const step  = count / 2;
        std::size_t const probe = first + step;
        int order               = compare_prefixes(sought[probe], key);
        if (order == 0 && !layout.complete) {
          order = comparator.compare(haystack, probe, needles, needle);
        }
        if (order < threshold) {
          first = probe + 1;
          count -= step + 1;
        } else {
          count = step;
        }
      }
      out[needle] = first;
    }
  }
}

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
  if (haystack.num_rows() >= PREFIX_SEARCH_MIN_HAYSTACK &&
      haystack.num_rows() <= PREFIX_SEARCH_MAX_HAYSTACK && needles.num_rows() > 0) {
    std::array<table_view, 2> const both{haystack, needles};
    normalized_key_layout const layout =
      plan_normalized_keys(std::span<table_view const>{both}, resolved);
    if (layout.bytes > 0) {
      with_prefix_words(layout.words(), [&]<std::size_t Words>() {
        search_by_prefixes<Words>(layout, haystack, needles, comparator, threshold, out);
      });
      return result;
    }
  }
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
