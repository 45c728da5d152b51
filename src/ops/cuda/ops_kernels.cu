// Bounds, the order check and the merge order of key columns in CUDA device memory (see
// device_ops.hpp).
#include "memory/cuda/cuda_check.hpp"
#include "ops/cuda/device_ops.hpp"
#include "ops/cuda/merge_path.hpp"
#include "ops/cuda/row_compare.hpp"
#include "ops/cuda/row_hash.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/memory/buffer.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>

#include <cstdint>
#include <cuda_runtime.h>
#include <string>
#include <vector>

namespace spillway::detail::cuda {
namespace {

/// The key columns of a table in device memory, for kernels to read.
class device_key_columns {
 public:
  device_key_columns(table_view const& keys,
                     sort_order const& orders,
                     stream_view stream,
                     resource_ref temporary)
    : count_(keys.num_columns()), storage_(count_ * sizeof(key_column), stream, temporary) {
    std::vector<key_column> const columns = key_columns_of(keys, orders);
    if (count_ > 0) {
      check(cudaMemcpyAsync(storage_.data(),
                            columns.data(),
                            count_ * sizeof(key_column),
                            cudaMemcpyHostToDevice,
                            native(stream)),
            "cudaMemcpyAsync");
      check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
    }
  }
  [[nodiscard]] key_column const* data() const noexcept {
    return static_cast<key_column const*>(storage_.data());
  }
  [[nodiscard]] std::size_t count() const noexcept { return count_; }

 private:
  std::size_t count_;
  buffer storage_;
};

/// positions[i] = the first row of the haystack not before (lower) or after (upper) needle i.
__global__ void search(std::uint64_t* positions,
                       key_column const* haystack,
                       std::size_t haystack_rows,
                       key_column const* needles,
                       std::size_t needle_rows,
                       std::size_t count,
                       bool upper) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= needle_rows) {
    return;
  }
  std::size_t low  = 0;
  std::size_t high = haystack_rows;
  while (low < high) {
    std::size_t const middle = low + (high - low) / 2;
    int const order          = compare_rows(haystack, middle, needles, i, count);
    bool const go_right      = upper ? order <= 0 : order < 0;
    if (go_right) {
      low = middle + 1;
    } else {
      high = middle;
    }
  }
  positions[i] = low;
}

/// Sets `*unsorted` when some row comes strictly before the row above it.
__global__ void find_descent(int* unsorted,
                             key_column const* keys,
                             std::size_t rows,
                             std::size_t count) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x + 1;
  if (i < rows && compare_rows(keys, i - 1, keys, i, count) > 0) {
    *unsorted = 1;
  }
}

/// ids[i] = (input << SOURCE_ROW_BITS) | row for concatenated row order[i] (row i when `order` is
/// null), the inputs starting at `starts` (inputs + 1 entries).
__global__ void to_source_ids(std::uint64_t* ids,
                              std::uint64_t const* order,  // may be `ids`: one element a thread
                              std::size_t rows,
                              std::uint64_t const* starts,
                              std::size_t inputs) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i >= rows) {
    return;
  }
  std::uint64_t const row = order == nullptr ? i : order[i];
  std::size_t const input = run_at(starts, inputs, row);
  ids[i] = (static_cast<std::uint64_t>(input) << SOURCE_ROW_BITS) | (row - starts[input]);
}

/// One merge round: runs of source ids (run r is [bounds[r], bounds[r + 1])) merged in pairs by
/// their rows' keys, `MERGE_SHARE` output elements a thread. `keys` holds `count` key columns per
/// input, input i's at [i count, (i + 1) count).
__global__ void merge_round(std::uint64_t* out,
                            std::uint64_t const* in,
                            std::uint64_t const* bounds,
                            std::size_t runs,
                            std::size_t rows,
                            key_column const* keys,
                            std::size_t count) {
  std::size_t const begin = (blockIdx.x * std::size_t{blockDim.x} + threadIdx.x) * MERGE_SHARE;
  if (begin >= rows) {
    return;
  }
  std::uint64_t const row_mask = (std::uint64_t{1} << SOURCE_ROW_BITS) - 1;
  auto const before_or_tie     = [&](std::uint64_t x, std::uint64_t y) {
    return compare_rows(keys + (x >> SOURCE_ROW_BITS) * count,
                        x & row_mask,
                        keys + (y >> SOURCE_ROW_BITS) * count,
                        y & row_mask,
                        count) <= 0;
  };
  std::size_t const end = begin + MERGE_SHARE < rows ? begin + MERGE_SHARE : rows;
  merge_round_share(out, in, bounds, runs, begin, end, before_or_tie);
}

/// hashes[i] = the row hash of row i, reduced modulo `partitions` when that is not 0.
__global__ void hash_kernel(std::uint64_t* hashes,
                            key_column const* keys,
                            std::size_t count,
                            std::size_t rows,
                            std::uint64_t seed,
                            std::uint64_t partitions) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < rows) {
    std::uint64_t const hash = row_hash(keys, count, i, seed, null_hash_salt);
    hashes[i]                = partitions == 0 ? hash : hash % partitions;
  }
}

}  // namespace

std::unique_ptr<column> bound_on_device(table_view const& haystack,
                                        table_view const& needles,
                                        sort_order const& orders,
                                        bool upper,
                                        stream_view stream,
                                        memory_resources mrs) {
  resource_ref const temporary = mrs.temporary();
  std::size_t const rows       = needles.num_rows();
  auto result                  = make_fixed_width_column(
    data_type{type_id::UINT64}, rows, mask_state::UNALLOCATED, stream, mrs.output());
  if (rows == 0) {
    return result;
  }
  expect_device_output(*result, upper ? "upper_bound" : "lower_bound");
  // Whichever side is on the host (splitters, a planner's keys) is copied to the device.
  std::unique_ptr<table> needles_copy;
  table_view needle_view = needles;
  if (!on_device(needles)) {
    needles_copy = detail::copy(needles, stream, memory_resources{temporary, temporary});
    needle_view  = needles_copy->view();
  }
  std::unique_ptr<table> haystack_copy;
  table_view haystack_view = haystack;
  if (haystack.num_rows() > 0 && !on_device(haystack)) {
    haystack_copy = detail::copy(haystack, stream, memory_resources{temporary, temporary});
    haystack_view = haystack_copy->view();
  }
  device_key_columns const hay{haystack_view, orders, stream, temporary};
  device_key_columns const probe{needle_view, orders, stream, temporary};
  search<<<grid_for(rows), BLOCK, 0, native(stream)>>>(result->mutable_data<std::uint64_t>(),
                                                       hay.data(),
                                                       haystack.num_rows(),
                                                       probe.data(),
                                                       rows,
                                                       hay.count(),
                                                       upper);
  check_launch("search");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return result;
}

bool is_sorted(table_view const& keys, sort_order const& orders, stream_view stream) {
  std::size_t const rows = keys.num_rows();
  if (rows <= 1 || keys.num_columns() == 0) {
    return true;
  }
  // `is_sorted` takes no resources: its few bytes (the flag and the key columns' descriptions)
  // come from the stream-ordered pool of the device, one block freed on every path.
  std::vector<key_column> const columns = key_columns_of(keys, orders);
  std::size_t const columns_bytes       = columns.size() * sizeof(key_column);
  struct stream_block {
    void* data = nullptr;
    cudaStream_t stream;
    ~stream_block() {
      if (data != nullptr) {
        (void)cudaFreeAsync(data, stream);
      }
    }
  } block{nullptr, native(stream)};
  check(cudaMallocAsync(&block.data, columns_bytes + sizeof(int), native(stream)),
        "cudaMallocAsync");
  auto* device_columns = static_cast<key_column*>(block.data);
  auto* unsorted = reinterpret_cast<int*>(static_cast<std::byte*>(block.data) + columns_bytes);
  check(cudaMemcpyAsync(
          device_columns, columns.data(), columns_bytes, cudaMemcpyHostToDevice, native(stream)),
        "cudaMemcpyAsync");
  check(cudaMemsetAsync(unsorted, 0, sizeof(int), native(stream)), "cudaMemsetAsync");
  find_descent<<<grid_for(rows - 1), BLOCK, 0, native(stream)>>>(
    unsorted, device_columns, rows, columns.size());
  check_launch("find_descent");
  int flag = 0;
  check(cudaMemcpyAsync(&flag, unsorted, sizeof(int), cudaMemcpyDeviceToHost, native(stream)),
        "cudaMemcpyAsync");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return flag == 0;
}

std::unique_ptr<column> sorted_sources_on_device(std::span<table_view const> keys,
                                                 sort_order const& orders,
                                                 stream_view stream,
                                                 memory_resources mrs) {
  resource_ref const temporary = mrs.temporary();
  memory_resources const scratch{temporary, temporary};
  std::vector<std::uint64_t> starts{0};
  for (auto const& key : keys) {
    starts.push_back(starts.back() + key.num_rows());
  }
  std::size_t const rows = starts.back();
  // The sort's order becomes the ids in place: its result (8 bytes a row) is allocated after its
  // own scratch (about 24) is freed, beside the stacked keys.
  std::unique_ptr<column> ids;
  if (rows > 0) {
    auto const whole = detail::concatenate(keys, stream, scratch);
    ids = sorted_order(whole->view(), orders, stream, memory_resources{mrs.output(), temporary});
  } else {
    ids = make_fixed_width_column(
      data_type{type_id::UINT64}, rows, mask_state::UNALLOCATED, stream, mrs.output());
    return ids;
  }
  expect_device_output(*ids, "sorted_sources");
  buffer device_starts{starts.size() * sizeof(std::uint64_t), stream, temporary};
  check(cudaMemcpyAsync(device_starts.data(),
                        starts.data(),
                        starts.size() * sizeof(std::uint64_t),
                        cudaMemcpyHostToDevice,
                        native(stream)),
        "cudaMemcpyAsync");
  std::uint64_t* const out = ids->mutable_data<std::uint64_t>();
  to_source_ids<<<grid_for(rows), BLOCK, 0, native(stream)>>>(
    out, out, rows, static_cast<std::uint64_t const*>(device_starts.data()), keys.size());
  check_launch("to_source_ids");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return ids;
}

std::unique_ptr<column> merge_order_on_device(std::span<table_view const> inputs,
                                              std::vector<std::size_t> const& key_columns,
                                              sort_order const& orders,
                                              stream_view stream,
                                              memory_resources mrs) {
  resource_ref const temporary = mrs.temporary();
  std::vector<std::uint64_t> bounds{0};
  std::vector<key_column> keys;  // input i's key columns at [i count, (i + 1) count)
  for (auto const& input : inputs) {
    table_view const selected = input.select(key_columns);
    for (std::size_t c = 0; c < selected.num_columns(); ++c) {
      // The kernel reads every key column: one in host memory would be an illegal address.
      SPILLWAY_EXPECTS(selected.column(c).size() == 0 || on_device(selected.column(c)),
                       "merge_order: key column " + std::to_string(key_columns[c]) +
                         " of an input is not in CUDA device memory while others are; inputs "
                         "are merged where they live",
                       invalid_argument);
    }
    auto const columns = key_columns_of(selected, orders);
    keys.insert(keys.end(), columns.begin(), columns.end());
    bounds.push_back(bounds.back() + input.num_rows());
  }
  std::size_t const rows = bounds.back();
  // Without key columns every row ties: the order is the input order, and so is each round's.
  std::size_t const rounds = key_columns.empty() ? 0 : merge_rounds(inputs.size());
  auto ids                 = make_fixed_width_column(
    data_type{type_id::UINT64}, rows, mask_state::UNALLOCATED, stream, mrs.output());
  if (rows == 0) {
    return ids;
  }
  expect_device_output(*ids, "merge_order");
  // Rounds alternate between the result and a scratch copy, starting where the last one ends.
  buffer scratch{rounds > 0 ? rows * sizeof(std::uint64_t) : 0, stream, temporary};
  std::uint64_t* current = ids->mutable_data<std::uint64_t>();
  std::uint64_t* next    = static_cast<std::uint64_t*>(scratch.data());
  if (rounds % 2 == 1) {
    std::swap(current, next);
  }
  // Every round's run bounds, one after another, uploaded once: round r's at offsets[r].
  std::vector<std::uint64_t> all_bounds;
  std::vector<std::size_t> offsets;
  for (std::vector<std::uint64_t> round_bounds = bounds;;
       round_bounds                            = merged_run_bounds(round_bounds)) {
    offsets.push_back(all_bounds.size());
    all_bounds.insert(all_bounds.end(), round_bounds.begin(), round_bounds.end());
    if (round_bounds.size() <= 2) {
      break;
    }
  }
  buffer device_bounds{all_bounds.size() * sizeof(std::uint64_t), stream, temporary};
  buffer device_keys{keys.size() * sizeof(key_column), stream, temporary};
  auto upload = [&](buffer& to, void const* from, std::size_t bytes) {
    check(cudaMemcpyAsync(to.data(), from, bytes, cudaMemcpyHostToDevice, native(stream)),
          "cudaMemcpyAsync");
  };
  upload(device_bounds, all_bounds.data(), all_bounds.size() * sizeof(std::uint64_t));
  if (!keys.empty()) {
    upload(device_keys, keys.data(), keys.size() * sizeof(key_column));
  }
  auto const* const bounds_on_device = static_cast<std::uint64_t const*>(device_bounds.data());
  to_source_ids<<<grid_for(rows), BLOCK, 0, native(stream)>>>(
    current, nullptr, rows, bounds_on_device, inputs.size());
  check_launch("to_source_ids");
  for (std::size_t round = 0; round < rounds; ++round) {
    std::size_t const runs =
      (round + 1 < offsets.size() ? offsets[round + 1] : all_bounds.size()) - offsets[round] - 1;
    merge_round<<<grid_for((rows + MERGE_SHARE - 1) / MERGE_SHARE), BLOCK, 0, native(stream)>>>(
      next,
      current,
      bounds_on_device + offsets[round],
      runs,
      rows,
      static_cast<key_column const*>(device_keys.data()),
      key_columns.size());
    check_launch("merge_round");
    std::swap(current, next);
  }
  // The uploads' host vectors and the scratch stay until the stream is done with them.
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return ids;
}

std::unique_ptr<column> hash_rows_on_device(table_view const& keys,
                                            std::uint64_t seed,
                                            std::uint64_t partitions,
                                            stream_view stream,
                                            memory_resources mrs) {
  std::size_t const rows = keys.num_rows();
  auto hashes            = make_fixed_width_column(
    data_type{type_id::UINT64}, rows, mask_state::UNALLOCATED, stream, mrs.output());
  if (rows == 0) {
    return hashes;
  }
  expect_device_output(*hashes, "hash_rows");
  device_key_columns const columns{keys, sort_order(keys.num_columns()), stream, mrs.temporary()};
  hash_kernel<<<grid_for(rows), BLOCK, 0, native(stream)>>>(
    hashes->mutable_data<std::uint64_t>(), columns.data(), columns.count(), rows, seed, partitions);
  check_launch("hash_kernel");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return hashes;
}

partitioned_table group_by_ids(table_view const& input,
                               column& ids,
                               std::size_t partitions,
                               stream_view stream,
                               memory_resources mrs) {
  partitioned_table result;
  auto const grouped = partition_rows(ids, partitions, stream, mrs.temporary());
  result.offsets     = grouped.offsets;
  result.rows        = input.num_rows() == 0
                         ? detail::copy(input, stream, mrs)
                         : detail::gather(input, grouped.map, out_of_bounds_policy::FAIL, stream, mrs);
  return result;
}

partitioned_table hash_partition(table_view const& input,
                                 std::span<std::size_t const> key_columns,
                                 std::size_t partitions,
                                 std::uint64_t seed,
                                 stream_view stream,
                                 memory_resources mrs) {
  memory_resources const scratch{mrs.temporary(), mrs.temporary()};
  auto ids = hash_rows(input.select(key_columns), seed, partitions, stream, scratch);
  return group_by_ids(input, *ids, partitions, stream, mrs);
}

partitioned_table range_partition(table_view const& input,
                                  std::span<std::size_t const> key_columns,
                                  table_view const& splitters,
                                  sort_order const& orders,
                                  stream_view stream,
                                  memory_resources mrs) {
  memory_resources const scratch{mrs.temporary(), mrs.temporary()};
  std::unique_ptr<table> splitters_copy;
  table_view splitter_view = splitters;
  if (splitters.num_rows() > 0 && !on_device(splitters)) {
    splitters_copy = detail::copy(splitters, stream, scratch);
    splitter_view  = splitters_copy->view();
  }
  SPILLWAY_EXPECTS(splitters.num_rows() == 0 || cuda::is_sorted(splitter_view, orders, stream),
                   "range_partition: the splitters are not sorted",
                   invalid_argument);
  auto ids = splitters.num_rows() == 0
               ? hash_rows(input.select(key_columns), 0, 1, stream, scratch)  // all in 0
               : bound(splitter_view, input.select(key_columns), orders, true, stream, scratch);
  return group_by_ids(input, *ids, splitters.num_rows() + 1, stream, mrs);
}

std::unique_ptr<column> bound(table_view const& haystack,
                              table_view const& needles,
                              sort_order const& orders,
                              bool upper,
                              stream_view stream,
                              memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return bound_on_device(haystack, needles, orders, upper, stream, device_mrs);
  });
}

std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return merge_order_on_device(inputs, key_columns, orders, stream, device_mrs);
  });
}

std::unique_ptr<column> sorted_sources(std::span<table_view const> keys,
                                       sort_order const& orders,
                                       stream_view stream,
                                       memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return sorted_sources_on_device(keys, orders, stream, device_mrs);
  });
}

std::unique_ptr<column> hash_rows(table_view const& keys,
                                  std::uint64_t seed,
                                  std::uint64_t partitions,
                                  stream_view stream,
                                  memory_resources mrs) {
  return with_device_output(mrs, stream, [&](memory_resources device_mrs) {
    return hash_rows_on_device(keys, seed, partitions, stream, device_mrs);
  });
}

}  // namespace spillway::detail::cuda
