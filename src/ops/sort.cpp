/**
 * @file sort.cpp
 * @brief The CPU sort: key records encoded from the key columns, sorted by buckets or by radix
 * passes and merged in parallel parts, ties broken by the full rows; `is_sorted`; and the
 * dispatch to the CUDA sort for tables on a device.
 */
#include "ops/bucket_sort.hpp"
#include "ops/cuda/device_ops.hpp"
#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/radix_sort.hpp"
#include "ops/record_merge.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/**
 * Sorts `rows` records that `encode(begin, end, records)` writes (prefixes and row ids of rows
 * [begin, end)) and writes their row ids in order to `out`, in one part per pool thread (one
 * part below PARALLEL_SORT_MIN_ROWS, and no part below half of it). Inputs larger than a cache's
 * bucket are bucketed by `bucket_sort_records`; the others (and those it declines) are encoded
 * and radix sorted in two halves in two parts, then merged in one part per pool thread.
 */
template <std::size_t Words, typename Encode>
void sort_records(std::size_t rows,
                  Encode const& encode,
                  tie_breaker<Words> const& order,
                  std::uint64_t* out,
                  prefix_words const& prefixes,
                  bool encode_twice,
                  bool carried,
                  stream_view stream,
                  resource_ref temporary) {
  using record = key_record<Words>;
  buffer records_memory{rows * sizeof(record), stream, temporary};
  auto* records             = static_cast<record*>(records_memory.data());
  std::size_t const threads = parallel_parts(rows, PARALLEL_SORT_MIN_ROWS / 2);
  if (rows * sizeof(record) > LSD_RADIX_MAX_BYTES && bucket_sort_records(rows,
                                                                         threads,
                                                                         encode_twice,
                                                                         carried,
                                                                         encode,
                                                                         order,
                                                                         records,
                                                                         out,
                                                                         prefixes,
                                                                         stream,
                                                                         temporary)) {
    return;
  }
  buffer scratch_memory{rows * sizeof(record), stream, temporary};
  auto* scratch = static_cast<record*>(scratch_memory.data());

  auto const sort_range = [&](std::size_t begin, std::size_t end) {
    encode(begin, end, records + begin);
    record* sorted =
      radix_sort(records + begin, scratch + begin, end - begin, order.bytes(), carried);
    order.resolve(sorted, end - begin);
    return sorted;
  };

  if (threads == 1) {
    record const* sorted = sort_range(0, rows);
    for (std::size_t index = 0; index < rows; ++index) {
      out[index] = sorted[index].row;
      write_prefix(prefixes, index, sorted[index]);
    }
    return;
  }
  // Two halves sorted in two parts, then their merge in `threads` parts of the output, each
  // starting where the merge path crosses its first row.
  std::size_t const middle = rows / 2;
  std::array<record*, 2> halves{};
  parallel_for(2, [&](std::size_t half) {
    halves[half] = half == 0 ? sort_range(0, middle) : sort_range(middle, rows);
  });
  parallel_for(threads, [&](std::size_t part) {
    merge_rows<Words>(halves[0],
                      middle,
                      halves[1],
                      rows - middle,
                      order,
                      out,
                      prefixes,
                      part_begin(rows, threads, part),
                      part_begin(rows, threads, part + 1));
  });
}

template <std::size_t Words>
void sort_rows(table_view const& keys,
               normalized_key_layout const& layout,
               row_comparator const& comparator,
               sort_stability stability,
               std::uint64_t* out,
               stream_view stream,
               resource_ref temporary) {
  tie_breaker<Words> const order{keys, comparator, layout, stability};
  // Prefixes of fixed-width keys cost less to encode twice than to write and read back.
  bool const encode_twice =
    std::all_of(layout.segments.begin(), layout.segments.end(), [&](auto const& segment) {
      return is_fixed_width(keys.column(segment.column).type());
    });
  sort_records<Words>(
    keys.num_rows(),
    [&](std::size_t begin, std::size_t end, key_record<Words>* records) {
      encode_normalized_keys<Words>(layout, keys, begin, end, records);
    },
    order,
    out,
    prefix_words{},
    encode_twice,
    false,
    stream,
    temporary);
}

/**
 * The rows of every table of `keys` as source ids (see `sorted_sources`) in key order; ties in
 * input order. The prefix is complete, so the tie breaker never compares rows.
 */
template <std::size_t Words>
void sort_sources(std::span<table_view const> keys,
                  normalized_key_layout const& layout,
                  row_comparator const& comparator,
                  std::uint64_t* out,
                  prefix_words const& prefixes,
                  std::size_t rows,
                  stream_view stream,
                  resource_ref temporary) {
  // starts[i]: the first global row of input i.
  std::vector<std::size_t> starts(keys.size() + 1, 0);
  for (std::size_t input = 0; input < keys.size(); ++input) {
    starts[input + 1] = starts[input] + keys[input].num_rows();
  }
  tie_breaker<Words> const order{keys.front(), comparator, layout, sort_stability::STABLE};
  sort_records<Words>(
    rows,
    [&](std::size_t begin, std::size_t end, key_record<Words>* records) {
      // The inputs that overlap global rows [begin, end), each encoded with its id in the row.
      auto input = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                            starts.begin() - 1);
      for (std::size_t row = begin; row < end; ++input) {
        std::size_t const first = row - starts[input];
        std::size_t const last  = std::min(end, starts[input + 1]) - starts[input];
        key_record<Words>* part = records + (row - begin);
        encode_normalized_keys<Words>(layout, keys[input], first, last, part);
        std::uint64_t const tag = static_cast<std::uint64_t>(input) << SOURCE_ROW_BITS;
        for (std::size_t index = 0; index < last - first; ++index) {
          part[index].row |= tag;
        }
        row += last - first;
      }
    },
    order,
    out,
    prefixes,
    true,  // the keys are fixed-width
    false,
    stream,
    temporary);
}

/// Rows compared per branch-free block by `fixed_in_order`: unsorted inputs stop in the first.
constexpr std::size_t IN_ORDER_BLOCK_ROWS = 1024;

/// Whether `values` never descend (`Descending`: never ascend), in `row_comparator`'s order of
/// values: NaN after every number, NaNs tied.
template <typename T, bool Descending>
bool fixed_in_order(T const* values, std::size_t rows) noexcept {
  auto const before = [](T lhs, T rhs) noexcept {
    if constexpr (std::is_floating_point_v<T>) {
      return !std::isnan(lhs) && (std::isnan(rhs) || lhs < rhs);
    } else {
      return lhs < rhs;
    }
  };
  for (std::size_t begin = 1; begin < rows; begin += IN_ORDER_BLOCK_ROWS) {
    std::size_t const end = std::min(rows, begin + IN_ORDER_BLOCK_ROWS);
    bool descent          = false;
    for (std::size_t row = begin; row < end; ++row) {
      descent |=
        Descending ? before(values[row - 1], values[row]) : before(values[row], values[row - 1]);
    }
    if (descent) {
      return false;
    }
  }
  return true;
}

/// `is_sorted` with resolved orders.
bool keys_in_order(table_view const& keys, sort_order const& orders) {
  std::size_t const rows = keys.num_rows();
  if (rows <= 1 || keys.num_columns() == 0) {
    return true;
  }
  column_view const& first = keys.column(0);
  if (keys.num_columns() == 1 && is_fixed_width(first.type()) && !first.has_nulls()) {
    bool const descending = orders.front().direction == order::DESCENDING;
    return visit_fixed_width(first.type(), [&]<typename T>() {
      T const* values = first.data<T>();
      return descending ? fixed_in_order<T, true>(values, rows)
                        : fixed_in_order<T, false>(values, rows);
    });
  }
  row_comparator const comparator{keys, orders};
  for (std::size_t row = 1; row < rows; ++row) {
    if (comparator.compare(keys, row, keys, row - 1) < 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     sort_stability stability,
                                     stream_view stream,
                                     memory_resources mrs,
                                     bool check_order) {
  sort_order const resolved = resolve_orders(orders, keys.num_columns());
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(keys)) {
    return cuda::sorted_order(keys, resolved, stream, mrs);
  }
#endif
  std::size_t const rows = keys.num_rows();
  auto result =
    make_fixed_width_column(type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto* out                    = result->mutable_data<std::uint64_t>();
  normalized_key_layout layout = plan_normalized_keys(keys, resolved);
  narrow_string_prefix(layout, std::span<table_view const>{&keys, 1});
  if (rows <= 1 || layout.words() == 0 || (check_order && keys_in_order(keys, resolved))) {
    // No rows to move, no key columns, or rows already in order: the input order is sorted.
    for (std::size_t row = 0; row < rows; ++row) {
      out[row] = row;
    }
    return result;
  }
  row_comparator const comparator{keys, resolved};
  with_prefix_words(layout.words(), [&]<std::size_t Words>() {
    sort_rows<Words>(keys, layout, comparator, stability, out, stream, mrs.temporary());
  });
  return result;
}

std::unique_ptr<column> sorted_sources(std::span<table_view const> keys,
                                       sort_order const& orders,
                                       stream_view stream,
                                       memory_resources mrs,
                                       std::vector<std::unique_ptr<column>>* sorted_keys) {
  SPILLWAY_EXPECTS(!keys.empty(), "sorted_sources: no key tables", invalid_argument);
  SPILLWAY_EXPECTS_LT(keys.size(),
                      std::size_t{1} << (64 - SOURCE_ROW_BITS),
                      "sorted_sources: too many key tables",
                      invalid_argument);
  sort_order const resolved = resolve_orders(orders, keys.front().num_columns());
  std::size_t rows          = 0;
  for (auto const& key : keys) {
    SPILLWAY_EXPECTS_EQ(key.num_columns(),
                        keys.front().num_columns(),
                        "sorted_sources: key tables differ in columns",
                        invalid_argument);
    SPILLWAY_EXPECTS_LT(key.num_rows(),
                        std::size_t{1} << SOURCE_ROW_BITS,
                        "sorted_sources: too many rows in one key table",
                        invalid_argument);
    rows += key.num_rows();
  }
#if SPILLWAY_HAS_CUDA
  for (auto const& key : keys) {
    if (cuda::on_device(key)) {
      // On the device: the keys stacked and radix sorted stably (any key types), the key column
      // not decoded.
      if (sorted_keys != nullptr) {
        sorted_keys->clear();
        sorted_keys->resize(keys.front().num_columns());
      }
      return cuda::sorted_sources(keys, resolved, stream, mrs);
    }
  }
#endif
  normalized_key_layout const layout = plan_normalized_keys(keys, resolved);
  SPILLWAY_EXPECTS(layout.complete && layout.words() > 0,
                   "sorted_sources: keys need a complete normalized-key prefix (fixed-width, at "
                   "most " +
                     std::to_string(MAX_PREFIX_BYTES) + " bytes); planned " +
                     std::to_string(layout.bytes) + " bytes",
                   invalid_argument);
  auto result =
    make_fixed_width_column(type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto* out = result->mutable_data<std::uint64_t>();
  // The key columns that come back from their words of the sorted prefixes are written there
  // and then decoded in place.
  prefix_words prefixes{};
  std::vector<std::size_t> decoded;  // their segments
  if (sorted_keys != nullptr) {
    sorted_keys->clear();
    sorted_keys->resize(keys.front().num_columns());
    for (std::size_t index = 0; index < layout.segments.size(); ++index) {
      auto const& segment  = layout.segments[index];
      data_type const type = keys.front().column(segment.column).type();
      if (word_decodes(layout, index, type)) {
        auto& key = (*sorted_keys)[segment.column];
        key = make_fixed_width_column(type, rows, mask_state::UNALLOCATED, stream, mrs.output());
        prefixes[segment.offset / sizeof(std::uint64_t)] = key->mutable_data<std::uint64_t>();
        decoded.push_back(index);
      }
    }
  }
  if (rows == 0) {
    return result;
  }
  row_comparator const comparator{keys.front(), resolved};
  with_prefix_words(layout.words(), [&]<std::size_t Words>() {
    sort_sources<Words>(keys, layout, comparator, out, prefixes, rows, stream, mrs.temporary());
  });
  for (std::size_t const index : decoded) {
    auto const& segment = layout.segments[index];
    auto& key           = *(*sorted_keys)[segment.column];
    decode_word(segment,
                key.type(),
                key.mutable_data<std::uint64_t>(),
                rows,
                key.mutable_data<std::uint64_t>());
  }
  return result;
}

bool sorts_key_values(std::span<table_view const> keys,
                      sort_order const& orders,
                      std::span<column_view const> values) {
  if (keys.empty() || keys.size() != values.size() || keys.front().num_columns() != 1) {
    return false;
  }
  for (auto const& key : keys) {
    if (cuda::on_device(key)) {
      return false;  // the CUDA sort carries row ids; the rows are then gathered
    }
  }
  data_type const key_type   = keys.front().column(0).type();
  data_type const value_type = values.front().type();
  if (!is_fixed_width(key_type) || size_of(key_type) != sizeof(std::uint64_t) ||
      !is_fixed_width(value_type) || size_of(value_type) > sizeof(std::uint64_t)) {
    return false;
  }
  for (std::size_t input = 0; input < keys.size(); ++input) {
    if (keys[input].num_columns() != 1 || keys[input].column(0).type() != key_type ||
        values[input].type() != value_type || values[input].has_nulls() ||
        values[input].size() != keys[input].num_rows()) {
      return false;
    }
  }
  normalized_key_layout const layout =
    plan_normalized_keys(keys, resolve_orders(orders, keys.front().num_columns()));
  return layout.complete && layout.words() == 1 && layout.segments.size() == 1 &&
         word_decodes(layout, 0, key_type);
}

std::pair<std::unique_ptr<column>, std::unique_ptr<column>> sorted_key_values(
  std::span<table_view const> keys,
  sort_order const& orders,
  std::span<column_view const> values,
  stream_view stream,
  memory_resources mrs) {
  SPILLWAY_EXPECTS(sorts_key_values(keys, orders, values),
                   "sorted_key_values: needs one 8-byte integer or timestamp key column without "
                   "nulls and one fixed-width value column of at most 8 bytes without nulls, of "
                   "the same rows in every table",
                   invalid_argument);
  sort_order const resolved = resolve_orders(orders, 1);
  std::vector<std::size_t> starts(keys.size() + 1, 0);
  for (std::size_t input = 0; input < keys.size(); ++input) {
    starts[input + 1] = starts[input] + keys[input].num_rows();
  }
  std::size_t const rows             = starts.back();
  normalized_key_layout const layout = plan_normalized_keys(keys, resolved);
  data_type const key_type           = keys.front().column(0).type();
  data_type const value_type         = values.front().type();
  std::size_t const width            = size_of(value_type);
  auto sorted_keys =
    make_fixed_width_column(key_type, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto const make_values = [&] {
    return make_fixed_width_column(value_type, rows, mask_state::UNALLOCATED, stream, mrs.output());
  };
  if (rows == 0) {
    return {std::move(sorted_keys), make_values()};
  }
  // Values of 8 bytes are written in place. Narrower ones pass through 8 bytes a row, and their
  // column is made once the sort's records are gone: beside the records, 16 bytes a row.
  std::unique_ptr<column> sorted_values;
  std::optional<buffer> wide;
  if (width != sizeof(std::uint64_t)) {
    wide.emplace(rows * sizeof(std::uint64_t), stream, mrs.temporary());
  } else {
    sorted_values = make_values();
  }
  auto* out =
    wide ? static_cast<std::uint64_t*>(wide->data()) : sorted_values->mutable_data<std::uint64_t>();
  auto* prefixes = sorted_keys->mutable_data<std::uint64_t>();
  row_comparator const comparator{keys.front(), resolved};
  tie_breaker<1> const order{keys.front(), comparator, layout, sort_stability::STABLE};
  sort_records<1>(
    rows,
    [&](std::size_t begin, std::size_t end, key_record<1>* records) {
      // The inputs that overlap global rows [begin, end); each record carries its value.
      auto input = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                            starts.begin() - 1);
      for (std::size_t row = begin; row < end; ++input) {
        std::size_t const first = row - starts[input];
        std::size_t const last  = std::min(end, starts[input + 1]) - starts[input];
        key_record<1>* part     = records + (row - begin);
        encode_normalized_keys<1>(layout, keys[input], first, last, part);
        auto const* value = static_cast<std::byte const*>(values[input].head()) +
                            (values[input].offset() + first) * width;
        for (std::size_t index = 0; index < last - first; ++index) {
          std::uint64_t bits = 0;
          std::memcpy(&bits, value + index * width, width);
          part[index].row = bits;
        }
        row += last - first;
      }
    },
    order,
    out,
    prefix_words{prefixes, nullptr, nullptr},
    true,  // the key is fixed-width
    true,  // records carry values, not rows
    stream,
    mrs.temporary());
  decode_word(layout.segments.front(), key_type, prefixes, rows, prefixes);
  if (wide) {
    sorted_values = make_values();
    auto* narrow  = sorted_values->mutable_data<std::byte>();
    for (std::size_t row = 0; row < rows; ++row) {
      std::memcpy(narrow + row * width, &out[row], width);
    }
  }
  return {std::move(sorted_keys), std::move(sorted_values)};
}

std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders,
                            sort_stability stability,
                            stream_view stream,
                            memory_resources mrs) {
  SPILLWAY_EXPECTS(values.num_rows() == keys.num_rows() || keys.num_columns() == 0,
                   "sort: values and keys differ in rows: " + std::to_string(values.num_rows()) +
                     " vs " + std::to_string(keys.num_rows()),
                   invalid_argument);
  sort_order const resolved = resolve_orders(orders, keys.num_columns());  // validates
  memory_resources const scratch{mrs.temporary(), mrs.temporary()};
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(keys) || cuda::on_device(values)) {
    if (keys.num_columns() == 0) {
      return detail::copy(values, stream, mrs);  // every row ties: the input order is sorted
    }
    auto const permutation = cuda::sorted_order(keys, resolved, stream, scratch);
    return detail::gather(values, *permutation, out_of_bounds_policy::FAIL, stream, mrs);
  }
#endif
  if (keys_in_order(keys, resolved)) {
    // Rows already in order (or no keys: every row ties) are their own sort: one copy.
    return detail::copy(values, stream, mrs);
  }
  auto const permutation = detail::sorted_order(keys, resolved, stability, stream, scratch, false);
  return gather_rows_in_parallel(
    values, permutation->view().data<std::uint64_t>(), values.num_rows(), stream, mrs);
}

}  // namespace detail

bool is_sorted(table_view const& keys,
               sort_order const& orders,
               [[maybe_unused]] stream_view stream) {
#if SPILLWAY_HAS_CUDA
  if (detail::cuda::on_device(keys)) {
    return detail::cuda::is_sorted(
      keys, detail::resolve_orders(orders, keys.num_columns()), stream);
  }
#endif
  return detail::keys_in_order(keys, detail::resolve_orders(orders, keys.num_columns()));
}

std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     sort_stability stability,
                                     stream_view stream,
                                     memory_resources mrs) {
  return detail::sorted_order(keys, orders, stability, stream, mrs);
}

std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders,
                            sort_stability stability,
                            stream_view stream,
                            memory_resources mrs) {
  return detail::sort(values, keys, orders, stability, stream, mrs);
}

}  // namespace spillway
