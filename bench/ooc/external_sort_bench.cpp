/**
 * One out-of-core sort of generated (int64 key, int64 payload) rows under a device and a host
 * budget, timed end to end (generation excluded), verified, and reported as one JSON line.
 *
 *   spillway_external_sort_bench --rows N --device-memory 256MiB --host-memory 256MiB
 *       [--distribution uniform|skewed|equal|sorted] [--batch-rows R] [--chunks-per-batch C]
 *       [--strategy merge|sample|auto] [--spill-root DIR] [--disk-codec none|lz4|zstd]
 *
 * Keys follow the formula used by bench/compare/sort_vs_peers.py for DuckDB and Polars, so all
 * engines sort the same values: uniform: (i * 6364136223846793005) mod 9223372036854775783;
 * skewed: 90% of rows share key 0; equal: every key is 42; sorted: the key is i (already in order).
 */
#include <spillway/core/units.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/table/column.hpp>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <limits>
#include <string>

namespace spillway {
namespace {

__extension__ using uint128 = unsigned __int128;

constexpr std::uint64_t MODULUS    = 9223372036854775783ULL;  // a prime below 2^63
constexpr std::uint64_t MULTIPLIER = 6364136223846793005ULL;

enum class key_shape : std::uint8_t { UNIFORM, SKEWED, EQUAL, SORTED };

key_shape shape_of(std::string const& distribution) {
  if (distribution == "uniform") {
    return key_shape::UNIFORM;
  }
  if (distribution == "skewed") {
    return key_shape::SKEWED;
  }
  if (distribution == "equal") {
    return key_shape::EQUAL;
  }
  if (distribution == "sorted") {
    return key_shape::SORTED;
  }
  std::fprintf(stderr, "unknown distribution: %s\n", distribution.c_str());
  std::exit(2);
}

std::int64_t key_of(std::uint64_t row, key_shape shape) {
  switch (shape) {
    case key_shape::EQUAL:
      return 42;
    case key_shape::SORTED:
      return static_cast<std::int64_t>(row);
    case key_shape::SKEWED:
    case key_shape::UNIFORM:
      break;
  }
  auto const uniform = static_cast<std::int64_t>(static_cast<uint128>(row) * MULTIPLIER % MODULUS);
  return shape == key_shape::SKEWED && row % 10 != 0 ? 0 : uniform;
}

struct arguments {
  std::size_t rows          = 10'000'000;
  std::size_t device_memory = 256_MiB;
  std::size_t host_memory   = 256_MiB;
  std::size_t batch_rows    = 0;  ///< 0: batches of an eighth of the device budget
  std::size_t chunks        = external_sort_options{}.chunks_per_batch;
  std::string distribution  = "uniform";
  sort_strategy strategy    = sort_strategy::AUTO;
  std::string spill_root;
  codec disk_codec = codec::LZ4;
};

arguments parse(int argc, char** argv) {
  arguments out;
  for (int index = 1; index + 1 < argc; index += 2) {
    std::string const flag  = argv[index];
    std::string const value = argv[index + 1];
    if (flag == "--rows") {
      out.rows = std::stoull(value);
    } else if (flag == "--device-memory") {
      out.device_memory = parse_bytes(value);
    } else if (flag == "--host-memory") {
      out.host_memory = parse_bytes(value);
    } else if (flag == "--batch-rows") {
      out.batch_rows = std::stoull(value);
    } else if (flag == "--chunks-per-batch") {
      out.chunks = std::stoull(value);
    } else if (flag == "--distribution") {
      out.distribution = value;
    } else if (flag == "--strategy") {
      if (value == "merge") {
        out.strategy = sort_strategy::MERGE;
      } else if (value == "sample") {
        out.strategy = sort_strategy::SAMPLE;
      } else if (value == "auto") {
        out.strategy = sort_strategy::AUTO;
      } else {
        std::fprintf(stderr, "unknown strategy %s (merge, sample or auto)\n", value.c_str());
        std::exit(2);
      }
    } else if (flag == "--spill-root") {
      out.spill_root = value;
    } else if (flag == "--disk-codec") {
      out.disk_codec = parse_codec(value);
    } else {
      std::fprintf(stderr, "unknown flag %s\n", flag.c_str());
      std::exit(2);
    }
  }
  if (out.batch_rows == 0) {
    // A reader hands over batches of a target size: an eighth of the device, at most 1 Mi rows.
    out.batch_rows = std::clamp<std::size_t>(out.device_memory / 8 / 16, 1, std::size_t{1} << 20);
  }
  return out;
}

int run(arguments const& args) {
  key_shape const shape = shape_of(args.distribution);
  // The same device, OOM protocol and spill store as `spillway sort`.
  device_environment_options environment_options;
  environment_options.device_memory = args.device_memory;
  environment_options.host_memory   = args.host_memory;
  environment_options.spill_root    = args.spill_root;
  environment_options.disk_codec    = args.disk_codec;
  device_environment environment{environment_options};
  device_task task{environment, task_id{1}};
  auto& store            = environment.store();
  auto device_with_spill = environment.device();

  external_sort_options options;
  options.key_columns        = {0};
  options.chunks_per_batch   = args.chunks;
  options.merge_budget_bytes = args.device_memory / 2;
  options.output_batch_bytes = std::min<std::size_t>(args.device_memory / 8, 64_MiB);
  options.strategy           = args.strategy;
  options.coordinator        = &environment.coordinator();
  options.task               = &task.context();
  external_sorter sorter{store, options, default_stream(), device_with_spill, environment.host()};

  std::chrono::nanoseconds generate{0};
  auto const start = std::chrono::steady_clock::now();
  for (std::size_t first = 0; first < args.rows; first += args.batch_rows) {
    auto const generate_start = std::chrono::steady_clock::now();
    std::size_t const rows    = std::min(args.batch_rows, args.rows - first);
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_width_column(data_type{type_id::INT64},
                                              rows,
                                              mask_state::UNALLOCATED,
                                              default_stream(),
                                              device_with_spill));
    columns.push_back(make_fixed_width_column(data_type{type_id::INT64},
                                              rows,
                                              mask_state::UNALLOCATED,
                                              default_stream(),
                                              device_with_spill));
    auto* keys    = columns[0]->mutable_data<std::int64_t>();
    auto* payload = columns[1]->mutable_data<std::int64_t>();
    for (std::size_t row = 0; row < rows; ++row) {
      keys[row]    = key_of(first + row, shape);
      payload[row] = static_cast<std::int64_t>(first + row);
    }
    generate += std::chrono::steady_clock::now() - generate_start;
    sorter.push(std::make_unique<table>(std::move(columns)));
  }
  auto const pushed = std::chrono::steady_clock::now();
  sorter.finish();
  std::size_t output_rows = 0;
  std::int64_t previous   = std::numeric_limits<std::int64_t>::min();
  bool ordered            = true;
  uint128 payload_sum     = 0;
  while (auto batch = sorter.next()) {
    auto const* keys    = batch->view().column(0).data<std::int64_t>();
    auto const* payload = batch->view().column(1).data<std::int64_t>();
    for (std::size_t row = 0; row < batch->num_rows(); ++row) {
      ordered  = ordered && previous <= keys[row];
      previous = keys[row];
      payload_sum += static_cast<std::uint64_t>(payload[row]);
    }
    output_rows += batch->num_rows();
  }
  auto const elapsed   = std::chrono::steady_clock::now() - start - generate;
  double const seconds = std::chrono::duration<double>(elapsed).count();
  // The push phase (batches sorted into chunks) and the rest (merges and output).
  double const push_seconds = std::chrono::duration<double>(pushed - start - generate).count();
  auto const expected_sum =
    static_cast<uint128>(args.rows) * (args.rows == 0 ? 0 : args.rows - 1) / 2;
  bool const complete = output_rows == args.rows && payload_sum == expected_sum;
  auto const stats    = sorter.statistics();
  auto const spilled  = store.statistics();
  std::printf(
    "{\"engine\":\"spillway\",\"rows\":%zu,\"distribution\":\"%s\",\"device_memory\":%zu,"
    "\"host_memory\":%zu,\"seconds\":%.3f,\"push_seconds\":%.3f,\"rows_per_second\":%.0f,"
    "\"verified\":%s,"
    "\"strategy\":\"%s\",\"ranges\":%zu,\"ranges_unmerged\":%zu,\"ranges_in_rounds\":%zu,"
    "\"rounds\":%zu,\"copies_per_input_byte\":%.2f,\"device_peak\":%zu,\"host_peak\":%zu,"
    "\"to_disk_bytes\":%zu,\"disk_compression\":%.2f}\n",
    args.rows,
    args.distribution.c_str(),
    args.device_memory,
    args.host_memory,
    seconds,
    push_seconds,
    static_cast<double>(args.rows) / seconds,
    ordered && complete ? "true" : "false",
    to_string(stats.strategy_used),
    stats.ranges,
    stats.ranges_unmerged,
    stats.ranges_in_rounds,
    stats.rounds,
    stats.copies_per_input_byte(),
    environment.device_peak_bytes(),
    environment.host_tier().statistics().peak_bytes,
    spilled.between(spill_tier::HOST, spill_tier::DISK).raw_bytes +
      spilled.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes,
    spilled.disk_compression_ratio());
  return ordered && complete ? 0 : 1;
}

}  // namespace
}  // namespace spillway

int main(int argc, char** argv) { return spillway::run(spillway::parse(argc, argv)); }
