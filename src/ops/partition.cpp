#include "ops/cuda/device_ops.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/table/gather.hpp>

// XXH3 inlined here (the same algorithm, hence the same hashes, as the library's): the row hash
// calls it once per key value, mostly on 8 bytes.
#define XXH_INLINE_ALL
#include <xxhash.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>

namespace spillway {
namespace detail {
namespace {

/// `value` with its bytes in little-endian order, whatever the platform's order.
template <typename Unsigned>
Unsigned to_little_endian(Unsigned value) noexcept {
  if constexpr (std::endian::native == std::endian::little || sizeof(Unsigned) == 1) {
    return value;
  } else {
    Unsigned result = 0;
    for (std::size_t byte = 0; byte < sizeof(Unsigned); ++byte) {
      result = static_cast<Unsigned>((result << 8U) | ((value >> (8U * byte)) & 0xFFU));
    }
    return result;
  }
}

/// The unsigned integer of the same width as `T`.
template <typename T>
using same_width_unsigned = std::conditional_t<
  sizeof(T) == 1,
  std::uint8_t,
  std::conditional_t<sizeof(T) == 2,
                     std::uint16_t,
                     std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>>>;

/// The canonical bits of a fixed-width value: floats with -0.0 and NaN normalized.
template <typename T>
same_width_unsigned<T> canonical_bits(T value) noexcept {
  using bits_type = same_width_unsigned<T>;
  if constexpr (std::is_floating_point_v<T>) {
    if (std::isnan(value)) {
      value = std::numeric_limits<T>::quiet_NaN();
    } else if (value == T{0}) {
      value = T{0};
    }
  }
  bits_type bits = 0;
  std::memcpy(&bits, &value, sizeof(T));
  return to_little_endian(bits);
}

/// Folds rows `[begin, end)` of column `keys` into the running row hashes
/// `hashes[0 .. end - begin)`.
void hash_column(column_view const& keys,
                 std::size_t begin,
                 std::size_t end,
                 std::uint64_t* hashes) {
  auto const hash_null = [&](std::size_t row) {
    hashes[row - begin] = XXH3_64bits_withSeed(nullptr, 0, hashes[row - begin] ^ null_hash_salt);
  };
  if (!is_fixed_width(keys.type())) {
    for (std::size_t row = begin; row < end; ++row) {
      if (keys.is_null(row)) {
        hash_null(row);
        continue;
      }
      std::string_view const value = keys.string_at(row);
      hashes[row - begin] = XXH3_64bits_withSeed(value.data(), value.size(), hashes[row - begin]);
    }
    return;
  }
  visit_fixed_width(keys.type(), [&]<typename T>() {
    T const* values = keys.data<T>();
    if constexpr (is_wide_decimal_v<T>) {
      static_assert(std::endian::native == std::endian::little, "wide decimals are little-endian");
      for (std::size_t row = begin; row < end; ++row) {
        if (keys.is_null(row)) {
          hash_null(row);
          continue;
        }
        hashes[row - begin] = XXH3_64bits_withSeed(&values[row], sizeof(T), hashes[row - begin]);
      }
    } else {
      if (!keys.nullable()) {
        for (std::size_t row = begin; row < end; ++row) {
          auto const bits     = canonical_bits(values[row]);
          hashes[row - begin] = XXH3_64bits_withSeed(&bits, sizeof(bits), hashes[row - begin]);
        }
        return;
      }
      for (std::size_t row = begin; row < end; ++row) {
        if (keys.is_null(row)) {
          hash_null(row);
          continue;
        }
        auto const bits     = canonical_bits(values[row]);
        hashes[row - begin] = XXH3_64bits_withSeed(&bits, sizeof(bits), hashes[row - begin]);
      }
    }
  });
}

/// Folds column `keys` into the running row hashes `hashes[0 .. rows)`.
void hash_column(column_view const& keys, std::uint64_t* hashes) {
  hash_column(keys, 0, keys.size(), hashes);
}

/// Rows hashed at a time into a buffer on the stack by `hash_partition_ids`.
constexpr std::size_t HASH_BLOCK_ROWS = 1024;

/// `ids[row] = hash_rows(keys)[row] % num_partitions`, a block of rows at a time.
template <typename Id>
void fill_hash_partition_ids(table_view const& keys,
                             std::uint64_t seed,
                             std::size_t num_partitions,
                             Id* ids) {
  std::size_t const rows = keys.num_rows();
  std::array<std::uint64_t, HASH_BLOCK_ROWS> hashes{};
  bool const power_of_two      = (num_partitions & (num_partitions - 1)) == 0;
  std::uint64_t const low_bits = num_partitions - 1;  // h % P when P is a power of two
  for (std::size_t begin = 0; begin < rows; begin += HASH_BLOCK_ROWS) {
    std::size_t const end = std::min(rows, begin + HASH_BLOCK_ROWS);
    std::fill(hashes.begin(), hashes.begin() + static_cast<std::ptrdiff_t>(end - begin), seed);
    for (column_view const& key : keys) {
      hash_column(key, begin, end, hashes.data());
    }
    if (power_of_two) {
      for (std::size_t row = begin; row < end; ++row) {
        ids[row] = static_cast<Id>(hashes[row - begin] & low_bits);
      }
    } else {
      for (std::size_t row = begin; row < end; ++row) {
        ids[row] = static_cast<Id>(hashes[row - begin] % num_partitions);
      }
    }
  }
}

/// The narrowest unsigned type that holds every partition id below `num_partitions`.
type_id partition_id_type(std::size_t num_partitions) noexcept {
  if (num_partitions <= std::size_t{1} << 8U) {
    return type_id::UINT8;
  }
  if (num_partitions <= std::size_t{1} << 16U) {
    return type_id::UINT16;
  }
  if (num_partitions <= std::size_t{1} << 32U) {
    return type_id::UINT32;
  }
  return type_id::UINT64;
}

std::vector<std::size_t> partition_offsets(std::uint64_t const* ids,
                                           std::size_t rows,
                                           std::size_t num_partitions,
                                           std::vector<std::size_t>& counts) {
  counts.assign(num_partitions, 0);
  for (std::size_t row = 0; row < rows; ++row) {
    ++counts[ids[row]];
  }
  std::vector<std::size_t> offsets(num_partitions + 1, 0);
  for (std::size_t partition = 0; partition < num_partitions; ++partition) {
    offsets[partition + 1] = offsets[partition] + counts[partition];
  }
  return offsets;
}

/// Groups `input` by the UINT64 ids `ids` (each < num_partitions, already checked).
partitioned_table group_by_ids(table_view const& input,
                               std::uint64_t const* ids,
                               std::size_t num_partitions,
                               stream_view stream,
                               memory_resources mrs) {
  std::size_t const rows = input.num_rows();
  std::vector<std::size_t> next;
  std::vector<std::size_t> offsets = partition_offsets(ids, rows, num_partitions, next);
  // Counting sort: `next[p]` is where partition p's next row goes.
  for (std::size_t partition = 0; partition < num_partitions; ++partition) {
    next[partition] = offsets[partition];
  }
  auto row_map = make_fixed_width_column(
    type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.temporary());
  auto* map = row_map->mutable_data<std::uint64_t>();
  for (std::size_t row = 0; row < rows; ++row) {
    map[next[ids[row]]++] = row;
  }
  partitioned_table result;
  result.rows    = detail::gather(input, row_map->view(), out_of_bounds_policy::FAIL, stream, mrs);
  result.offsets = std::move(offsets);
  return result;
}

void expect_partitions(std::size_t num_partitions, char const* what) {
  SPILLWAY_EXPECTS(num_partitions > 0,
                   std::string(what) + ": the number of partitions must be at least 1",
                   invalid_argument);
}

/// The partition of each row of `input` by key hash, as a column of the narrowest unsigned type
/// that holds them (`partition_id_type`), from `scratch`.
std::unique_ptr<column> hash_partition_ids(table_view const& input,
                                           std::span<std::size_t const> key_columns,
                                           std::size_t num_partitions,
                                           std::uint64_t seed,
                                           stream_view stream,
                                           resource_ref scratch,
                                           char const* what) {
  expect_partitions(num_partitions, what);
  table_view const keys = input.select(key_columns);
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input)) {
    return cuda::hash_rows(keys, seed, num_partitions, stream, memory_resources{scratch});
  }
#endif
  auto ids = make_fixed_width_column(data_type{partition_id_type(num_partitions)},
                                     input.num_rows(),
                                     mask_state::UNALLOCATED,
                                     stream,
                                     scratch);
  switch (ids->type().id()) {
    case type_id::UINT8:
      fill_hash_partition_ids(keys, seed, num_partitions, ids->mutable_data<std::uint8_t>());
      break;
    case type_id::UINT16:
      fill_hash_partition_ids(keys, seed, num_partitions, ids->mutable_data<std::uint16_t>());
      break;
    case type_id::UINT32:
      fill_hash_partition_ids(keys, seed, num_partitions, ids->mutable_data<std::uint32_t>());
      break;
    default:
      fill_hash_partition_ids(keys, seed, num_partitions, ids->mutable_data<std::uint64_t>());
      break;
  }
  return ids;
}

/// The partition of each row of `input` among `splitters`, as a UINT64 column from `scratch`.
std::unique_ptr<column> range_partition_ids(table_view const& input,
                                            std::span<std::size_t const> key_columns,
                                            table_view const& splitters,
                                            sort_order const& orders,
                                            stream_view stream,
                                            resource_ref scratch,
                                            char const* what) {
  table_view const keys = input.select(key_columns);
  expect_same_key_types(splitters, keys, what);
  sort_order const resolved = resolve_orders(orders, keys.num_columns());
#if SPILLWAY_HAS_CUDA
  if (splitters.num_columns() > 0 && cuda::on_device(splitters)) {
    SPILLWAY_EXPECTS(cuda::is_sorted(splitters, resolved, stream),
                     std::string{what} + ": the splitters are not sorted",
                     invalid_argument);
    return detail::upper_bound(splitters, keys, resolved, stream, scratch);
  }
#endif
  if (splitters.num_columns() > 0) {
    row_comparator const comparator{splitters, resolved};
    for (std::size_t row = 1; row < splitters.num_rows(); ++row) {
      SPILLWAY_EXPECTS(comparator.compare(splitters, row - 1, splitters, row) <= 0,
                       std::string{what} + ": the splitters are not sorted (row " +
                         std::to_string(row - 1) + " comes after row " + std::to_string(row) + ")",
                       invalid_argument);
    }
  }
  return detail::upper_bound(splitters, keys, resolved, stream, scratch);
}

}  // namespace

std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed,
                                  stream_view stream,
                                  memory_resources mrs) {
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(keys)) {
    return cuda::hash_rows(keys, seed, 0, stream, mrs);
  }
#endif
  auto result = make_fixed_width_column(
    type_id::UINT64, keys.num_rows(), mask_state::UNALLOCATED, stream, mrs.output());
  auto* hashes = result->mutable_data<std::uint64_t>();
  for (std::size_t row = 0; row < keys.num_rows(); ++row) {
    hashes[row] = seed;
  }
  for (column_view const& key : keys) {
    hash_column(key, hashes);
  }
  return result;
}

partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t num_partitions,
                                 std::uint64_t seed,
                                 stream_view stream,
                                 memory_resources mrs) {
  expect_partitions(num_partitions, "hash_partition");
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input)) {
    return cuda::hash_partition(input, key_columns, num_partitions, seed, stream, mrs);
  }
#endif
  table_view const keys = input.select(key_columns);
  auto ids              = detail::hash_rows(keys, seed, stream, mrs.temporary());
  auto* values          = ids->mutable_data<std::uint64_t>();
  for (std::size_t row = 0; row < input.num_rows(); ++row) {
    values[row] %= num_partitions;
  }
  return group_by_ids(input, values, num_partitions, stream, mrs);
}

partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders,
                                  stream_view stream,
                                  memory_resources mrs) {
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input)) {
    table_view const keys = input.select(key_columns);
    expect_same_key_types(splitters, keys, "range_partition");
    return cuda::range_partition(
      input, key_columns, splitters, resolve_orders(orders, keys.num_columns()), stream, mrs);
  }
#endif
  auto ids = range_partition_ids(
    input, key_columns, splitters, orders, stream, mrs.temporary(), "range_partition");
  return group_by_ids(
    input, ids->mutable_data<std::uint64_t>(), splitters.num_rows() + 1, stream, mrs);
}

std::vector<packed_partition> hash_partition_and_pack(table_view const& input,
                                                      std::span<std::size_t const> key_columns,
                                                      std::size_t num_partitions,
                                                      std::uint64_t seed,
                                                      std::size_t data_offset,
                                                      stream_view stream,
                                                      memory_resources mrs) {
  auto const ids = hash_partition_ids(
    input, key_columns, num_partitions, seed, stream, mrs.temporary(), "hash_partition_and_pack");
  return detail::pack_partitions(
    input, ids->view(), num_partitions, data_offset, PACK_PARTITIONS_THREADS, stream, mrs);
}

std::vector<packed_partition> range_partition_and_pack(table_view const& input,
                                                       std::span<std::size_t const> key_columns,
                                                       table_view const& splitters,
                                                       sort_order const& orders,
                                                       std::size_t data_offset,
                                                       stream_view stream,
                                                       memory_resources mrs) {
  auto const ids = range_partition_ids(
    input, key_columns, splitters, orders, stream, mrs.temporary(), "range_partition_and_pack");
  return detail::pack_partitions(input,
                                 ids->view(),
                                 splitters.num_rows() + 1,
                                 data_offset,
                                 PACK_PARTITIONS_THREADS,
                                 stream,
                                 mrs);
}

partitioned_table partition_by_map(table_view const& input,
                                   column_view const& partition_map,
                                   std::size_t num_partitions,
                                   stream_view stream,
                                   memory_resources mrs) {
  expect_partitions(num_partitions, "partition_by_map");
  type_id const id = partition_map.type().id();
  SPILLWAY_EXPECTS(
    id == type_id::UINT32 || id == type_id::UINT64,
    "partition_by_map: the map must be UINT32 or UINT64, not " + to_string(partition_map.type()),
    invalid_argument);
  SPILLWAY_EXPECTS_EQ(partition_map.size(),
                      input.num_rows(),
                      "partition_by_map: one partition id per row",
                      invalid_argument);
  SPILLWAY_EXPECTS(
    !partition_map.has_nulls(), "partition_by_map: the map has nulls", invalid_argument);
  auto ids = make_fixed_width_column(
    type_id::UINT64, input.num_rows(), mask_state::UNALLOCATED, stream, mrs.temporary());
  auto* values = ids->mutable_data<std::uint64_t>();
  for (std::size_t row = 0; row < input.num_rows(); ++row) {
    std::uint64_t const value = id == type_id::UINT32 ? partition_map.data<std::uint32_t>()[row]
                                                      : partition_map.data<std::uint64_t>()[row];
    SPILLWAY_EXPECTS_LT(value,
                        num_partitions,
                        "partition_by_map: partition id out of range at row " + std::to_string(row),
                        invalid_argument);
    values[row] = value;
  }
  return group_by_ids(input, values, num_partitions, stream, mrs);
}

}  // namespace detail

table_view partitioned_table::partition(std::size_t index) const {
  SPILLWAY_EXPECTS_LT(
    index, num_partitions(), "partitioned_table::partition: no such partition", invalid_argument);
  return slice(rows->view(), offsets[index], offsets[index + 1]);
}

std::vector<table_view> partitioned_table::partitions() const {
  std::vector<table_view> result;
  result.reserve(num_partitions());
  table_view const all = rows->view();
  for (std::size_t index = 0; index < num_partitions(); ++index) {
    result.push_back(slice(all, offsets[index], offsets[index + 1]));
  }
  return result;
}

std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed,
                                  stream_view stream,
                                  memory_resources mrs) {
  return detail::hash_rows(keys, seed, stream, mrs);
}

partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t num_partitions,
                                 std::uint64_t seed,
                                 stream_view stream,
                                 memory_resources mrs) {
  return detail::hash_partition(input, key_columns, num_partitions, seed, stream, mrs);
}

partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders,
                                  stream_view stream,
                                  memory_resources mrs) {
  return detail::range_partition(input, key_columns, splitters, orders, stream, mrs);
}

partitioned_table partition_by_map(table_view const& input,
                                   column_view const& partition_map,
                                   std::size_t num_partitions,
                                   stream_view stream,
                                   memory_resources mrs) {
  return detail::partition_by_map(input, partition_map, num_partitions, stream, mrs);
}

std::vector<packed_partition> hash_partition_and_pack(table_view const& input,
                                                      std::span<std::size_t const> key_columns,
                                                      std::size_t num_partitions,
                                                      std::uint64_t seed,
                                                      std::size_t data_offset,
                                                      stream_view stream,
                                                      memory_resources mrs) {
  return detail::hash_partition_and_pack(
    input, key_columns, num_partitions, seed, data_offset, stream, mrs);
}

std::vector<packed_partition> range_partition_and_pack(table_view const& input,
                                                       std::span<std::size_t const> key_columns,
                                                       table_view const& splitters,
                                                       sort_order const& orders,
                                                       std::size_t data_offset,
                                                       stream_view stream,
                                                       memory_resources mrs) {
  return detail::range_partition_and_pack(
    input, key_columns, splitters, orders, data_offset, stream, mrs);
}

}  // namespace spillway
