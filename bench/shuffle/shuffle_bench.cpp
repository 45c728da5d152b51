/**
 * The shuffle alone, data in memory: every rank reads its share of a Parquet dataset's files into
 * its spill store first (not timed), then the timed part runs the map tasks (hash partitioning
 * into shards), the exchange (pull or push) and the reading of every owned partition (each batch
 * is touched, not written anywhere). Ranks are threads (--ranks) or, under mpirun, processes.
 * Prints one JSON line from rank 0; bench/compare/shuffle_vs_dask.py --in-memory drives it.
 * `--repeat N` runs the timed part N times on the same input (for profiles; the line reports
 * the fastest run, every run's time in "runs" and its minor page faults, the fresh pages the
 * kernel cleared for rank 0's process, in "minor_faults").
 *
 *   spillway_shuffle_bench DATASET --by id --partitions 64 --mode push --ranks 2 [--repeat N]
 */
#include <spillway/core/units.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/in_process_communicator.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>
#include <spillway/shuffle/shuffler.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

using namespace spillway;

struct arguments {
  std::string dataset;
  std::string by         = "id";
  std::size_t partitions = 64;
  std::string mode       = "push";
  int ranks              = 2;
  std::size_t device     = 512_MiB;
  std::size_t host       = 2_GiB;
  std::size_t batch      = 64_MiB;
  int repeat             = 1;
};

arguments parse(int argc, char** argv) {
  arguments args;
  for (int i = 1; i < argc; ++i) {
    std::string const flag = argv[i];
    auto const value       = [&] { return i + 1 < argc ? std::string{argv[++i]} : std::string{}; };
    if (flag == "--by") {
      args.by = value();
    } else if (flag == "--partitions") {
      args.partitions = std::stoull(value());
    } else if (flag == "--mode") {
      args.mode = value();
    } else if (flag == "--ranks") {
      args.ranks = std::stoi(value());
    } else if (flag == "--device-memory") {
      args.device = parse_bytes(value());
    } else if (flag == "--host-memory") {
      args.host = parse_bytes(value());
    } else if (flag == "--batch-size") {
      args.batch = parse_bytes(value());
    } else if (flag == "--repeat") {
      args.repeat = std::max(1, std::stoi(value()));
    } else {
      args.dataset = flag;
    }
  }
  return args;
}

/// CPU seconds (user and system) this process has used so far, every thread.
double process_cpu_seconds() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  auto const seconds = [](timeval const& value) {
    return static_cast<double>(value.tv_sec) + static_cast<double>(value.tv_usec) / 1e6;
  };
  return seconds(usage.ru_utime) + seconds(usage.ru_stime);
}

/// Minor page faults of this process so far (fresh pages the kernel handed out), every thread.
long process_minor_faults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

std::uint64_t sum_over(communicator& comm, std::uint64_t value) {
  std::uint64_t total = 0;
  for (auto const& theirs :
       comm.allgather(std::as_bytes(std::span<std::uint64_t const>(&value, 1)))) {
    std::uint64_t v = 0;
    std::memcpy(&v, theirs.data(), sizeof(v));
    total += v;
  }
  return total;
}

void run_rank(communicator& comm, arguments const& args, std::vector<std::string> const& files) {
  device_environment_options options;
  options.device_memory = args.device;
  options.host_memory   = args.host;
  device_environment environment(options);
  device_task task(environment, task_id{static_cast<std::uint64_t>(comm.rank()) + 1});
  task_context::thread_binding bind(task.context());

  // Untimed: this rank's files into the spill store (where a pipeline would hold its input).
  std::vector<spillable_table> inputs;
  std::uint64_t bytes = 0;
  std::size_t key     = 0;
  for (std::size_t f = static_cast<std::size_t>(comm.rank()); f < files.size();
       f += static_cast<std::size_t>(comm.size())) {
    parquet_read_options read;
    // As `spillway shuffle`: a batch is at most an eighth of the rank's device.
    read.target_batch_bytes = std::max<std::size_t>(1, std::min(args.batch, args.device / 8));
    auto reader             = open_parquet(
      files[f], read, default_stream(), memory_resources{environment.device(), environment.host()});
    for (std::size_t c = 0; c < reader->schema().size(); ++c) {
      if (reader->schema()[c].name == args.by) {
        key = c;
      }
    }
    while (auto batch = reader->next()) {
      bytes += batch->allocated_bytes();
      inputs.push_back(environment.store().make_spillable(std::move(batch), 0));
    }
  }
  double seconds     = 0.0;
  double cpu_seconds = 0.0;
  std::uint64_t rows = 0;
  std::string runs;
  std::string faults;
  for (int run = 0; run < args.repeat; ++run) {
    comm.barrier();
    auto const start         = std::chrono::steady_clock::now();
    double const cpu_start   = process_cpu_seconds();
    long const faults_before = process_minor_faults();
    shuffle_options shuffle_config(environment.host());
    shuffle_config.partitions.method         = partition_method::HASH;
    shuffle_config.partitions.key_columns    = {key};
    shuffle_config.partitions.num_partitions = args.partitions;
    shuffler shuffle(args.mode == "pull" ? shuffle_mode::PULL : shuffle_mode::PUSH,
                     comm,
                     environment.store(),
                     shuffle_config,
                     default_stream(),
                     memory_resources{environment.device()});
    for (auto const& input : inputs) {  // the lineage is the stored input itself, lent pinned
      static_cast<void>(shuffle.add_map(map_view_input{[&input](stream_view, memory_resources) {
        auto pinned           = std::make_shared<pinned_table>(input.acquire());
        table_view const view = pinned->view();
        return map_rows{view, std::move(pinned)};
      }}));
    }
    shuffle.finish_maps();
    rows = 0;
    for (auto const partition : shuffle.owned_partitions()) {
      shuffle.for_each_batch(partition, [&](table_view const& batch) { rows += batch.num_rows(); });
    }
    shuffle.close();
    double const elapsed =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    // The process's CPU time over the timed part (with in-process ranks: every rank's).
    double const cpu = process_cpu_seconds() - cpu_start;
    if (run == 0 || elapsed < seconds) {
      seconds     = elapsed;
      cpu_seconds = cpu;
    }
    char text[32];
    std::snprintf(text, sizeof(text), "%s%.3f", run == 0 ? "" : ", ", elapsed);
    runs += text;
    std::snprintf(
      text, sizeof(text), "%s%ld", run == 0 ? "" : ", ", process_minor_faults() - faults_before);
    faults += text;
  }
  auto const total_rows  = sum_over(comm, rows);
  auto const total_bytes = sum_over(comm, bytes);
  auto const spilled     = sum_over(
    comm, environment.store().statistics().between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes);
  if (comm.rank() == 0) {
    std::printf(
      "{\"ranks\": %d, \"mode\": \"%s\", \"partitions\": %zu, \"rows\": %llu, \"bytes\": %llu, "
      "\"seconds\": %.3f, \"cpu_seconds\": %.3f, \"MB_per_s\": %.1f, "
      "\"spilled_device_to_host_bytes\": %llu, \"runs\": [%s], \"minor_faults\": [%s]}\n",
      comm.size(),
      args.mode.c_str(),
      args.partitions,
      static_cast<unsigned long long>(total_rows),
      static_cast<unsigned long long>(total_bytes),
      seconds,
      cpu_seconds,
      static_cast<double>(total_bytes) / seconds / 1e6,
      static_cast<unsigned long long>(spilled),
      runs.c_str(),
      faults.c_str());
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto const args = parse(argc, argv);
  if (args.dataset.empty()) {
    std::fprintf(stderr,
                 "usage: spillway_shuffle_bench DATASET [--by col] [--partitions P] "
                 "[--mode pull|push] [--ranks N] [--device-memory B] [--host-memory B]\n");
    return 2;
  }
  try {
    auto const files = expand_dataset(args.dataset);
    if (std::getenv("OMPI_COMM_WORLD_SIZE") != nullptr && mpi_backend_available()) {
      mpi_environment environment;
      mpi_communicator comm(environment);
      run_rank(comm, args, files);
      return 0;
    }
    run_in_process(args.ranks, [&](communicator& comm) { run_rank(comm, args, files); });
  } catch (std::exception const& error) {
    std::fprintf(stderr, "spillway_shuffle_bench: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
