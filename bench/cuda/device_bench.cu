// The CUDA backend's numbers in one run: copy bandwidth between device and (pinned) host, a spill
// of a device buffer to pinned host memory through the spill store, and the in-memory sort of
// (int64 key, int64 payload) rows by spillway beside CUB's own radix sort of the same pairs.
// A plain program (no benchmark library), so that it runs from a portable build. Last, the
// out-of-core sort of --ooc-bytes under a device budget of --ooc-device (0 bytes: skipped).
//
//   spillway_device_bench [--sort-bytes 1GiB] [--copy-bytes 1GiB] [--repetitions 3]
//                         [--ooc-bytes 16GiB] [--ooc-device 2GiB] [--ooc-host 20GiB]
//
// Prints one line per measurement and a last line `summary {...}` (JSON).
#include "memory/cuda/cuda_check.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/spill/spillable_buffer.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <cub/device/device_radix_sort.cuh>
#include <cuda_runtime.h>
#include <exception>
#include <filesystem>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace {

using namespace spillway;
using detail::cuda::BLOCK;
using detail::cuda::check;
using detail::cuda::grid_for;
using detail::cuda::native;

struct options {
  std::size_t ooc_bytes  = 16_GiB;  ///< 0: no out-of-core sort
  std::size_t ooc_device = 2_GiB;
  std::size_t ooc_host   = 20_GiB;
  std::size_t sort_bytes = 1_GiB;
  std::size_t copy_bytes = 1_GiB;
  int repetitions        = 3;
};

/// Keys from splitmix64 of the row and the seed; payload = 3 * key + 1, so that a sort that
/// loses the pairing is caught.
__global__ void fill_pairs(std::int64_t* keys,
                           std::int64_t* payload,
                           std::size_t rows,
                           std::uint64_t seed) {
  std::size_t const i = blockIdx.x * std::size_t{blockDim.x} + threadIdx.x;
  if (i < rows) {
    std::uint64_t z = (i + seed) * 0x9E3779B97F4A7C15ULL;
    z               = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z               = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    z ^= z >> 31;
    keys[i]    = static_cast<std::int64_t>(z);
    payload[i] = static_cast<std::int64_t>(3 * z + 1);
  }
}

/// Seconds of the best of `repetitions` runs of `body`, each after `prepare`, timed by events.
double best_of(int repetitions,
               stream_view stream,
               std::function<void()> const& prepare,
               std::function<void()> const& body) {
  cudaEvent_t start = nullptr;
  cudaEvent_t stop  = nullptr;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  double best = std::numeric_limits<double>::infinity();
  for (int r = 0; r < repetitions; ++r) {
    prepare();
    check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
    auto const wall = std::chrono::steady_clock::now();
    check(cudaEventRecord(start, native(stream)), "cudaEventRecord");
    body();
    check(cudaEventRecord(stop, native(stream)), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float milliseconds = 0;
    check(cudaEventElapsedTime(&milliseconds, start, stop), "cudaEventElapsedTime");
    // Synchronous host code (spillway's operators wait for their work) is timed by the wall
    // clock, which then also covers what the events miss.
    double const wall_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - wall).count();
    best = std::min(best, std::max(static_cast<double>(milliseconds) / 1e3, wall_seconds));
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  return best;
}

double gbps(std::size_t bytes, double seconds) {
  return static_cast<double>(bytes) / seconds / 1e9;
}

struct results {
  double h2d_pinned = 0, d2h_pinned = 0, h2d_pageable = 0, d2h_pageable = 0;
  double copy_bytes_d2h = 0, spill_to_pinned = 0;
  double cub_sort = 0, spillway_sort = 0, spillway_sorted_order = 0;
  double ooc_sort = 0, ooc_seconds = 0;
  std::size_t ooc_device_peak = 0, ooc_spilled = 0;
  std::size_t sort_rows = 0;
};

void copies(options const& opts, cuda_stream const& stream, results& out) {
  std::size_t const bytes = opts.copy_bytes;
  cuda_async_memory_resource device;
  pinned_host_memory_resource pinned;
  void* on_device = device.allocate(bytes, DEFAULT_ALIGNMENT, stream.view());
  void* on_pinned = pinned.allocate(bytes);
  std::vector<std::byte> pageable(bytes, std::byte{1});
  std::memset(on_pinned, 1, bytes);
  auto const time_copy = [&](void* to, void const* from) {
    return gbps(bytes,
                best_of(
                  opts.repetitions,
                  stream.view(),
                  [] {},
                  [&] {
                    check(
                      cudaMemcpyAsync(to, from, bytes, cudaMemcpyDefault, native(stream.view())),
                      "cudaMemcpyAsync");
                  }));
  };
  out.h2d_pinned     = time_copy(on_device, on_pinned);
  out.d2h_pinned     = time_copy(on_pinned, on_device);
  out.h2d_pageable   = time_copy(on_device, pageable.data());
  out.d2h_pageable   = time_copy(pageable.data(), on_device);
  out.copy_bytes_d2h = gbps(bytes,
                            best_of(
                              opts.repetitions,
                              stream.view(),
                              [] {},
                              [&] {
                                copy_bytes(on_pinned,
                                           memory_kind::PINNED_HOST,
                                           on_device,
                                           memory_kind::DEVICE,
                                           bytes,
                                           stream.view());
                              }));
  std::printf("copy host->device pinned      %8.2f GB/s\n", out.h2d_pinned);
  std::printf("copy device->host pinned      %8.2f GB/s\n", out.d2h_pinned);
  std::printf("copy host->device pageable    %8.2f GB/s\n", out.h2d_pageable);
  std::printf("copy device->host pageable    %8.2f GB/s\n", out.d2h_pageable);
  std::printf("copy_bytes device->pinned     %8.2f GB/s (%.0f%% of the raw copy)\n",
              out.copy_bytes_d2h,
              100.0 * out.copy_bytes_d2h / out.d2h_pinned);
  pinned.deallocate(on_pinned, bytes);
  device.deallocate(on_device, bytes, DEFAULT_ALIGNMENT, stream.view());
  stream.synchronize();

  // A device buffer spilled to the store's host tier: pinned memory from a pool, so that the
  // spill pays the copy and not cudaHostAlloc.
  pinned_host_memory_resource pinned_upstream;
  pool_memory_resource pinned_pool{pinned_upstream, bytes + 64_MiB};
  spill_store_options store_options{device, pinned_pool};
  store_options.host_budget = bytes + 64_MiB;
  store_options.stream      = stream.view();
  store_options.spill_root  = std::filesystem::temp_directory_path().string();
  double best               = std::numeric_limits<double>::infinity();
  spill_store store{store_options};
  for (int r = 0; r < opts.repetitions; ++r) {
    buffer data{bytes, stream.view(), device};
    check(cudaMemsetAsync(data.data(), 7, bytes, native(stream.view())), "cudaMemsetAsync");
    stream.synchronize();
    spillable_buffer handle = store.make_spillable(std::move(data), 0);
    auto const start        = std::chrono::steady_clock::now();
    std::size_t const moved = store.spill(bytes, spill_tier::DEVICE);
    double const seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    SPILLWAY_EXPECTS(moved >= bytes && handle.tier() == spill_tier::HOST,
                     "the spill did not move the buffer to the host tier",
                     logic_error);
    best = std::min(best, seconds);
  }
  out.spill_to_pinned = gbps(bytes, best);
  std::printf("spill device->pinned host     %8.2f GB/s (%.0f%% of the raw copy)\n",
              out.spill_to_pinned,
              100.0 * out.spill_to_pinned / out.d2h_pinned);
}

void sorts(options const& opts, cuda_stream const& stream, results& out) {
  std::size_t const rows = opts.sort_bytes / 16;
  out.sort_rows          = rows;
  cuda_async_memory_resource device;
  memory_resources const mrs{device, device};
  auto keys = make_fixed_width_column(
    data_type{type_id::INT64}, rows, mask_state::UNALLOCATED, stream.view(), device);
  auto payload = make_fixed_width_column(
    data_type{type_id::INT64}, rows, mask_state::UNALLOCATED, stream.view(), device);
  auto const fill = [&] {
    fill_pairs<<<grid_for(rows), BLOCK, 0, native(stream.view())>>>(
      keys->mutable_data<std::int64_t>(), payload->mutable_data<std::int64_t>(), rows, 42);
    detail::cuda::check_launch("fill_pairs");
  };

  // CUB's radix sort of the same (key, payload) pairs, over all 64 key bits.
  {
    buffer alternate_keys{rows * 8, stream.view(), device};
    buffer alternate_payload{rows * 8, stream.view(), device};
    cub::DoubleBuffer<std::int64_t> key_buffers{keys->mutable_data<std::int64_t>(),
                                                static_cast<std::int64_t*>(alternate_keys.data())};
    cub::DoubleBuffer<std::int64_t> payload_buffers{
      payload->mutable_data<std::int64_t>(), static_cast<std::int64_t*>(alternate_payload.data())};
    std::size_t scratch_bytes = 0;
    check(cub::DeviceRadixSort::SortPairs(
            nullptr, scratch_bytes, key_buffers, payload_buffers, static_cast<std::int64_t>(rows)),
          "cub::DeviceRadixSort::SortPairs");
    buffer scratch{scratch_bytes, stream.view(), device};
    double const seconds = best_of(opts.repetitions, stream.view(), fill, [&] {
      key_buffers.selector     = 0;
      payload_buffers.selector = 0;
      check(cub::DeviceRadixSort::SortPairs(scratch.data(),
                                            scratch_bytes,
                                            key_buffers,
                                            payload_buffers,
                                            static_cast<std::int64_t>(rows),
                                            0,
                                            64,
                                            native(stream.view())),
            "cub::DeviceRadixSort::SortPairs");
    });
    out.cub_sort         = gbps(rows * 16, seconds);
  }

  // spillway: the permutation alone, and the whole sort (permutation and gather of both columns).
  table_view const values{keys->view(), payload->view()};
  table_view const key_view{keys->view()};
  out.spillway_sorted_order =
    gbps(rows * 16, best_of(opts.repetitions, stream.view(), fill, [&] {
           (void)sorted_order(key_view, {}, sort_stability::STABLE, stream.view(), mrs);
         }));
  std::unique_ptr<table> sorted;
  out.spillway_sort =
    gbps(rows * 16, best_of(opts.repetitions, stream.view(), fill, [&] {
           sorted = sort(values, key_view, {}, sort_stability::STABLE, stream.view(), mrs);
         }));
  // The last result, checked on the host: keys in order, each payload still 3 * key + 1.
  std::vector<std::int64_t> host_keys(rows);
  std::vector<std::int64_t> host_payload(rows);
  copy_bytes(host_keys.data(),
             memory_kind::HOST,
             sorted->view().column(0).head(),
             memory_kind::DEVICE,
             rows * 8,
             stream.view());
  copy_bytes(host_payload.data(),
             memory_kind::HOST,
             sorted->view().column(1).head(),
             memory_kind::DEVICE,
             rows * 8,
             stream.view());
  SPILLWAY_EXPECTS(std::is_sorted(host_keys.begin(), host_keys.end()),
                   "spillway's device sort left keys out of order",
                   logic_error);
  for (std::size_t row = 0; row < rows; ++row) {
    SPILLWAY_EXPECTS(
      static_cast<std::uint64_t>(host_payload[row]) ==
        3 * static_cast<std::uint64_t>(host_keys[row]) + 1,
      "spillway's device sort separated row " + std::to_string(row) + " from its payload",
      logic_error);
  }
  std::printf("sort %zu rows of (int64, int64), %s:\n", rows, format_bytes(rows * 16).c_str());
  std::printf("  CUB radix sort of the pairs   %8.2f GB/s\n", out.cub_sort);
  std::printf("  spillway sorted_order         %8.2f GB/s\n", out.spillway_sorted_order);
  std::printf("  spillway sort (with gather)   %8.2f GB/s (%.0f%% of CUB; verified)\n",
              out.spillway_sort,
              100.0 * out.spillway_sort / out.cub_sort);
}

/// The out-of-core sort of `ooc_bytes` of (int64, int64) under a device budget of `ooc_device`:
/// batches generated on the device, spills to pinned host memory (a pool of `ooc_host`) and then
/// disk; every output batch checked in order on the device, and against the previous one.
void out_of_core(options const& opts, cuda_stream const& stream, results& out) {
  std::size_t const batch_bytes = opts.ooc_device / 16;
  std::size_t const batch_rows  = batch_bytes / 16;
  std::size_t const batches     = opts.ooc_bytes / batch_bytes;
  cuda_async_memory_resource gpu;
  limiting_resource_adaptor limited{gpu, opts.ooc_device};
  statistics_resource_adaptor counted{limited};
  std::unique_ptr<spill_store> store;
  allocation_failure_callback spill;
  failure_callback_resource_adaptor device{counted, [&](std::size_t bytes, std::size_t attempt) {
                                             return store != nullptr && spill(bytes, attempt);
                                           }};
  pinned_host_memory_resource pinned;
  pool_memory_resource host_tier{pinned, opts.ooc_host};
  host_memory_resource host;
  // The store goes before the resources it spills between, on every path out.
  struct store_first {
    std::unique_ptr<spill_store>& store;
    ~store_first() { store.reset(); }
  } const release_store{store};
  spill_store_options store_options{device, host_tier};
  store_options.host_budget = opts.ooc_host;
  store_options.stream      = stream.view();
  store_options.spill_root  = std::filesystem::temp_directory_path().string();
  store                     = std::make_unique<spill_store>(store_options);
  spill                     = store->make_failure_callback();
  external_sort_options sort_options;
  sort_options.key_columns = {0};
  // A quarter of the device per merge: on the device a merge order takes about 32 bytes a row
  // of scratch beside the loaded chunks (the CPU's takes 8).
  sort_options.merge_budget_bytes = opts.ooc_device / 4;
  sort_options.output_batch_bytes = batch_bytes;
  memory_resources const on_device{device};
  auto const start        = std::chrono::steady_clock::now();
  std::size_t output_rows = 0;
  {
    external_sorter sorter{*store, sort_options, stream.view(), on_device, host};
    for (std::size_t index = 0; index < batches; ++index) {
      auto keys = make_fixed_width_column(
        data_type{type_id::INT64}, batch_rows, mask_state::UNALLOCATED, stream.view(), device);
      auto payload = make_fixed_width_column(
        data_type{type_id::INT64}, batch_rows, mask_state::UNALLOCATED, stream.view(), device);
      fill_pairs<<<grid_for(batch_rows), BLOCK, 0, native(stream.view())>>>(
        keys->mutable_data<std::int64_t>(),
        payload->mutable_data<std::int64_t>(),
        batch_rows,
        index * batch_rows);
      detail::cuda::check_launch("fill_pairs");
      stream.synchronize();
      std::vector<std::unique_ptr<column>> columns;
      columns.push_back(std::move(keys));
      columns.push_back(std::move(payload));
      sorter.push(std::make_unique<table>(std::move(columns)));
    }
    sorter.finish();
    std::int64_t previous = std::numeric_limits<std::int64_t>::min();
    while (auto batch = sorter.next()) {
      table_view const keys{batch->view().column(0)};
      SPILLWAY_EXPECTS(
        is_sorted(keys), "out-of-core sort: an output batch is out of order", logic_error);
      std::int64_t ends[2] = {0, 0};
      auto const* values   = batch->view().column(0).data<std::int64_t>();
      copy_bytes(&ends[0], memory_kind::HOST, values, memory_kind::DEVICE, 8, stream.view());
      copy_bytes(&ends[1],
                 memory_kind::HOST,
                 values + batch->num_rows() - 1,
                 memory_kind::DEVICE,
                 8,
                 stream.view());
      SPILLWAY_EXPECTS(previous <= ends[0],
                       "out-of-core sort: an output batch starts below the previous one",
                       logic_error);
      previous = ends[1];
      output_rows += batch->num_rows();
    }
  }
  out.ooc_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  SPILLWAY_EXPECTS(output_rows == batches * batch_rows,
                   "out-of-core sort: " + std::to_string(output_rows) + " rows out of " +
                     std::to_string(batches * batch_rows),
                   logic_error);
  auto const spilled_stats = store->statistics();
  store.reset();  // before the resources it spills between
  out.ooc_sort        = gbps(batches * batch_rows * 16, out.ooc_seconds);
  out.ooc_device_peak = counted.statistics().peak_bytes;
  auto const& spilled = spilled_stats;
  out.ooc_spilled     = spilled.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes +
                    spilled.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes;
  std::printf(
    "out-of-core sort of %s at a %s device budget: %.2f s, %8.2f GB/s (verified); "
    "device peak %s, spilled from the device %s\n",
    format_bytes(batches * batch_rows * 16).c_str(),
    format_bytes(opts.ooc_device).c_str(),
    out.ooc_seconds,
    out.ooc_sort,
    format_bytes(out.ooc_device_peak).c_str(),
    format_bytes(out.ooc_spilled).c_str());
}

}  // namespace

int main(int argc, char** argv) {
  try {
    options opts;
    for (int i = 1; i + 1 < argc; i += 2) {
      std::string const flag = argv[i];
      if (flag == "--sort-bytes") {
        opts.sort_bytes = parse_bytes(argv[i + 1]);
      } else if (flag == "--copy-bytes") {
        opts.copy_bytes = parse_bytes(argv[i + 1]);
      } else if (flag == "--ooc-bytes") {
        opts.ooc_bytes = parse_bytes(argv[i + 1]);
      } else if (flag == "--ooc-device") {
        opts.ooc_device = parse_bytes(argv[i + 1]);
      } else if (flag == "--ooc-host") {
        opts.ooc_host = parse_bytes(argv[i + 1]);
      } else if (flag == "--repetitions") {
        opts.repetitions = std::max(1, std::stoi(argv[i + 1]));
      } else {
        throw invalid_argument("unknown option " + flag +
                               "; options: --sort-bytes, --copy-bytes, --ooc-bytes, --ooc-device, "
                               "--ooc-host, --repetitions");
      }
    }
    if (cuda_device_count() == 0) {
      std::fprintf(stderr, "spillway_device_bench: %s\n", cuda_unavailable_reason().c_str());
      return 2;
    }
    cudaDeviceProp properties{};
    check(cudaGetDeviceProperties(&properties, 0), "cudaGetDeviceProperties");
    std::printf(
      "device: %s, %s\n", properties.name, format_bytes(cuda_device_memory().total_bytes).c_str());
    cuda_stream const stream;
    results out;
    copies(opts, stream, out);
    sorts(opts, stream, out);
    if (opts.ooc_bytes > 0) {
      out_of_core(opts, stream, out);
    }
    std::printf(
      "summary {\"device\": \"%s\", \"copy_h2d_pinned_gbps\": %.2f, \"copy_d2h_pinned_gbps\": "
      "%.2f, \"copy_bytes_d2h_gbps\": %.2f, \"spill_to_pinned_gbps\": %.2f, "
      "\"spill_vs_copy\": %.3f, \"sort_rows\": %zu, \"cub_sort_gbps\": %.2f, "
      "\"spillway_sort_gbps\": %.2f, \"spillway_sorted_order_gbps\": %.2f, \"sort_vs_cub\": "
      "%.3f, \"ooc_bytes\": %zu, \"ooc_device_budget\": %zu, \"ooc_seconds\": %.2f, "
      "\"ooc_gbps\": %.2f, \"ooc_device_peak\": %zu, \"ooc_spilled_bytes\": %zu}\n",
      properties.name,
      out.h2d_pinned,
      out.d2h_pinned,
      out.copy_bytes_d2h,
      out.spill_to_pinned,
      out.spill_to_pinned / out.d2h_pinned,
      out.sort_rows,
      out.cub_sort,
      out.spillway_sort,
      out.spillway_sorted_order,
      out.spillway_sort / out.cub_sort,
      opts.ooc_bytes,
      opts.ooc_device,
      out.ooc_seconds,
      out.ooc_sort,
      out.ooc_device_peak,
      out.ooc_spilled);
    return 0;
  } catch (std::exception const& error) {
    std::fprintf(stderr, "spillway_device_bench: %s\n", error.what());
    return 1;
  }
}
