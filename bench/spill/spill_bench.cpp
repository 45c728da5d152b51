/**
 * Spill and unspill throughput of the spill store for each tier pair and codec, beside this
 * machine's memcpy bandwidth and raw sequential write bandwidth to the spill root.
 *
 * The table is 64 MiB: an int64 column counting up by one every 8 rows (compressible) and an
 * int64 column of random values (incompressible), 4 Mi rows. Times are per 64 MiB of packed
 * (raw) data, so throughput is raw bytes per second whatever the codec.
 *
 * - memcpy: 64 MiB host to host.
 * - raw_sequential_write: write + fdatasync of a 256 MiB file in 8 MiB chunks in the spill root.
 * - device_to_host/<codec>: `spill(DEVICE)` with the host codec; host_to_device: `acquire()`.
 * - host_to_disk/<codec>: `spill(HOST)` + wait for the write + fdatasync of the spill file (so the
 *   bytes are on the device, as in the raw write); disk_to_device: `acquire()` after the file's
 * pages were dropped from the page cache (posix_fadvise DONTNEED), so the read comes from the disk.
 * - spill_among_many/N: one `spill(DEVICE)` + `acquire()` of a 4 KiB buffer while N other
 *   buffers sit on the host: what choosing a victim costs as the store fills up.
 */
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/spill/codec.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/copy.hpp>

#include <benchmark/benchmark.h>

#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t TABLE_ROWS = 4_MiB;  // two int64 columns: 64 MiB

host_memory_resource& host() {
  static host_memory_resource resource;
  return resource;
}

emulated_device_memory_resource& device() {
  static emulated_device_memory_resource resource{1_GiB};
  return resource;
}

/// The table, built once on the host; each run copies it to the device.
table const& source_table() {
  static std::unique_ptr<table> const instance = [] {
    auto sequence = make_fixed_width_column(
      data_type{type_id::INT64}, TABLE_ROWS, mask_state::UNALLOCATED, default_stream(), host());
    auto payload = make_fixed_width_column(
      data_type{type_id::INT64}, TABLE_ROWS, mask_state::UNALLOCATED, default_stream(), host());
    std::mt19937_64 random(7);
    auto* sequence_values = sequence->mutable_data<std::int64_t>();
    auto* payload_values  = payload->mutable_data<std::int64_t>();
    for (std::size_t row = 0; row < TABLE_ROWS; ++row) {
      sequence_values[row] = static_cast<std::int64_t>(row / 8);
      payload_values[row]  = static_cast<std::int64_t>(random());
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(std::move(sequence));
    columns.push_back(std::move(payload));
    return std::make_unique<table>(std::move(columns));
  }();
  return *instance;
}

std::unique_ptr<table> device_copy() {
  return copy(source_table().view(), default_stream(), device());
}

double seconds_since(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

/// fdatasync of every spill file (as the raw write does for its file), not a whole-fs syncfs.
void sync_directory(std::string const& directory) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    int const descriptor = ::open(it->path().c_str(), O_RDONLY);
    if (descriptor >= 0) {
      ::fdatasync(descriptor);
      ::close(descriptor);
    }
  }
}

void drop_page_cache(std::string const& directory) {
  std::error_code error;
  for (std::filesystem::directory_iterator it(directory, error), end; !error && it != end;
       it.increment(error)) {
    int const descriptor = ::open(it->path().c_str(), O_RDONLY);
    if (descriptor >= 0) {
      ::fdatasync(descriptor);
      ::posix_fadvise(descriptor, 0, 0, POSIX_FADV_DONTNEED);
      ::close(descriptor);
    }
  }
}

void memcpy_bandwidth(benchmark::State& state) {
  std::vector<char> source(64_MiB, 1);
  std::vector<char> destination(64_MiB, 0);
  for (auto _ : state) {
    std::memcpy(destination.data(), source.data(), source.size());
    benchmark::DoNotOptimize(destination.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(source.size()));
}

/// The checksum every spilled block gets on its way to disk and back.
void checksum_bandwidth(benchmark::State& state) {
  std::vector<std::byte> block(64_MiB);
  for (std::size_t index = 0; index < block.size(); ++index) {
    block[index] = static_cast<std::byte>(index * 131);
  }
  for (auto _ : state) {
    benchmark::DoNotOptimize(checksum64(block));
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(block.size()));
}

void raw_sequential_write(benchmark::State& state) {
  std::vector<char> chunk(8_MiB);
  std::mt19937_64 random(3);
  for (auto& byte : chunk) {
    byte = static_cast<char>(random());
  }
  std::string const path =
    default_spill_root() + "/spillway-bench-raw-" + std::to_string(::getpid());
  for (auto _ : state) {
    int const descriptor = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (descriptor < 0) {
      state.SkipWithError("cannot create the raw write file");
      break;
    }
    for (std::size_t written = 0; written < 256_MiB; written += chunk.size()) {
      if (::write(descriptor, chunk.data(), chunk.size()) != static_cast<ssize_t>(chunk.size())) {
        state.SkipWithError("short write");
        break;
      }
    }
    ::fdatasync(descriptor);
    ::close(descriptor);
    state.PauseTiming();
    ::unlink(path.c_str());
    state.ResumeTiming();
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(256_MiB));
}

spill_store_options bench_options(codec host_codec, codec disk_codec) {
  spill_store_options options(device(), host());
  options.host_budget = 1_GiB;
  options.host_codec  = host_codec;
  options.disk_codec  = disk_codec;
  return options;
}

/// Times device -> host (`unspill` false) or host -> device (`unspill` true).
void device_host(benchmark::State& state, codec host_codec, bool unspill) {
  spill_store store(bench_options(host_codec, codec::NONE));
  std::size_t raw = 0;
  for (auto _ : state) {
    auto handle = store.make_spillable(device_copy(), 0);
    auto start  = std::chrono::steady_clock::now();
    (void)store.spill(1_GiB, spill_tier::DEVICE);
    double spill_seconds = seconds_since(start);
    start                = std::chrono::steady_clock::now();
    {
      auto const pinned = handle.acquire();
      benchmark::DoNotOptimize(pinned.view().num_rows());
    }
    double const unspill_seconds = seconds_since(start);
    state.SetIterationTime(unspill ? unspill_seconds : spill_seconds);
    auto const moved = store.statistics().between(spill_tier::DEVICE, spill_tier::HOST);
    raw              = moved.raw_bytes / moved.count;
  }
  auto const stats = store.statistics();
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(raw));
  state.counters["ratio"] = stats.host_compression_ratio();
}

/// Times host -> disk (`unspill` false, includes fdatasync) or disk -> device (`unspill` true,
/// cold).
void host_disk(benchmark::State& state, codec disk_codec, bool unspill) {
  spill_store store(bench_options(codec::NONE, disk_codec));
  std::size_t raw = 0;
  for (auto _ : state) {
    auto handle = store.make_spillable(device_copy(), 0);
    (void)store.spill(1_GiB, spill_tier::DEVICE);
    auto start = std::chrono::steady_clock::now();
    (void)store.spill(1_GiB, spill_tier::HOST);
    store.wait_for_io();
    sync_directory(store.directory());
    double const spill_seconds = seconds_since(start);
    drop_page_cache(store.directory());
    start = std::chrono::steady_clock::now();
    {
      auto const pinned = handle.acquire();
      benchmark::DoNotOptimize(pinned.view().num_rows());
    }
    double const unspill_seconds = seconds_since(start);
    state.SetIterationTime(unspill ? unspill_seconds : spill_seconds);
    auto const written = store.statistics().between(spill_tier::HOST, spill_tier::DISK);
    raw                = written.raw_bytes / written.count;
  }
  auto const stats = store.statistics();
  if (stats.write_errors + stats.read_errors > 0) {
    state.SkipWithError(stats.last_error.c_str());
  }
  state.SetBytesProcessed(state.iterations() * static_cast<std::int64_t>(raw));
  state.counters["ratio"] = stats.disk_compression_ratio();
}

/// One device buffer spilled and brought back while `state.range(0)` others sit on the host.
void spill_among_many(benchmark::State& state) {
  auto const others = static_cast<std::size_t>(state.range(0));
  spill_store store(bench_options(codec::NONE, codec::NONE));
  std::vector<spillable_buffer> resting;
  resting.reserve(others);
  for (std::size_t i = 0; i < others; ++i) {
    resting.push_back(store.make_spillable(buffer(64, default_stream(), device()), 0));
  }
  (void)store.spill(others * 64, spill_tier::DEVICE);
  auto moving = store.make_spillable(buffer(4_KiB, default_stream(), device()), 0);
  for (auto _ : state) {
    benchmark::DoNotOptimize(store.spill(1, spill_tier::DEVICE));
    benchmark::DoNotOptimize(moving.acquire());
  }
  state.SetItemsProcessed(state.iterations());
}

BENCHMARK(memcpy_bandwidth)->Unit(benchmark::kMillisecond);
BENCHMARK(checksum_bandwidth)->Unit(benchmark::kMillisecond);
BENCHMARK(raw_sequential_write)->Unit(benchmark::kMillisecond)->Iterations(3);

#define SPILLWAY_CODEC_BENCH(function, name, direction, value) \
  BENCHMARK_CAPTURE(function, name, value, direction)          \
    ->UseManualTime()                                          \
    ->Unit(benchmark::kMillisecond)                            \
    ->Iterations(4)

SPILLWAY_CODEC_BENCH(device_host, device_to_host_none, false, codec::NONE);
SPILLWAY_CODEC_BENCH(device_host, device_to_host_lz4, false, codec::LZ4);
SPILLWAY_CODEC_BENCH(device_host, device_to_host_zstd, false, codec::ZSTD);
SPILLWAY_CODEC_BENCH(device_host, host_to_device_none, true, codec::NONE);
SPILLWAY_CODEC_BENCH(device_host, host_to_device_lz4, true, codec::LZ4);
SPILLWAY_CODEC_BENCH(device_host, host_to_device_zstd, true, codec::ZSTD);
SPILLWAY_CODEC_BENCH(host_disk, host_to_disk_none, false, codec::NONE);
SPILLWAY_CODEC_BENCH(host_disk, host_to_disk_lz4, false, codec::LZ4);
SPILLWAY_CODEC_BENCH(host_disk, host_to_disk_zstd, false, codec::ZSTD);
SPILLWAY_CODEC_BENCH(host_disk, disk_to_device_none, true, codec::NONE);
SPILLWAY_CODEC_BENCH(host_disk, disk_to_device_lz4, true, codec::LZ4);
SPILLWAY_CODEC_BENCH(host_disk, disk_to_device_zstd, true, codec::ZSTD);
BENCHMARK(spill_among_many)->Arg(10)->Arg(1000)->Arg(100000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace spillway

BENCHMARK_MAIN();
