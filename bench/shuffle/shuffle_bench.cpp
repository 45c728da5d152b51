/**
 * The shuffle alone, data in memory: every rank reads its share of a Parquet dataset's row groups
 * into its spill store first (not timed), then the timed part runs the map tasks (hash partitioning
 * into shards), the exchange (pull or push) and the reading of every owned partition (each batch
 * is touched, not written anywhere). Ranks are threads (--ranks) or, under mpirun, processes.
 * A run's time is from the first rank's start to the last rank's end (`makespan_over`).
 * Prints one JSON line from rank 0; bench/compare/shuffle_vs_dask.py --in-memory drives it.
 * `--repeat N` runs the timed part N times on the same input (for profiles; the line reports
 * the fastest run, every run's time in "runs" and its minor page faults, the fresh pages the
 * kernel cleared for rank 0's process, in "minor_faults").
 *
 * With `--sort`, the timed part is instead the distributed sort of the same input by the --by
 * columns (sample, splitters by one allgather, range shuffle in --mode, each rank's local
 * out-of-core sort), its batches lent from the spill store (`lent_batches`: no copy); every
 * output batch is checked in order and counted, not written, and the ranks' first and last
 * keys are checked across ranks after the run (untimed). "sorted_in_place" gives, per run, the
 * ranks' batches whose rows the local sorts moved in place (`batches_sorted_in_place`) and
 * the shards they read (their input batches).
 *
 *   spillway_shuffle_bench DATASET --by id --partitions 64 --mode push --ranks 2 [--repeat N]
 *   spillway_shuffle_bench DATASET --sort --by id,timestamp --mode pull --ranks 2 [--repeat N]
 *
 * `--latency-us N` hands every point-to-point message to the communicator N microseconds after
 * it was sent (bench/shuffle/delayed_communicator.hpp): a network's latency between ranks that
 * share a machine.
 */
#include "delayed_communicator.hpp"

#include <spillway/core/units.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/distributed_sort.hpp>
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
#include <functional>
#include <stdexcept>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

using namespace spillway;

struct arguments {
  std::string dataset;
  std::string by           = "id";
  std::size_t partitions   = 64;
  std::string mode         = "push";
  int ranks                = 2;
  std::size_t device       = 512_MiB;
  std::size_t host         = 2_GiB;
  std::size_t batch        = 64_MiB;
  int repeat               = 1;
  bool sort                = false;  ///< time the distributed sort instead of the shuffle
  long latency_us          = 0;      ///< one-way latency added to every message (0: none)
  std::size_t merge_budget = 0;      ///< --sort: the local sort's merge budget (0: half the device)
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
    } else if (flag == "--merge-budget") {
      args.merge_budget = parse_bytes(value());
    } else if (flag == "--sort") {
      args.sort = true;
    } else if (flag == "--repeat") {
      args.repeat = std::max(1, std::stoi(value()));
    } else if (flag == "--latency-us") {
      args.latency_us = std::max(0L, std::stol(value()));
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

/// Every rank's `values`, rank after rank.
std::vector<std::int64_t> gather_over(communicator& comm, std::vector<std::int64_t> const& values) {
  std::vector<std::int64_t> all;
  for (auto const& theirs : comm.allgather(std::as_bytes(std::span{values}))) {
    std::size_t const at = all.size();
    all.resize(at + theirs.size() / sizeof(std::int64_t));
    std::memcpy(all.data() + at, theirs.data(), theirs.size());
  }
  return all;
}

std::uint64_t sum_over(communicator& comm, std::uint64_t value) {
  std::uint64_t total = 0;
  for (auto const v : gather_over(comm, {static_cast<std::int64_t>(value)})) {
    total += static_cast<std::uint64_t>(v);
  }
  return total;
}

double max_seconds_over(communicator& comm, std::chrono::nanoseconds value) {
  std::int64_t most = 0;
  for (auto const v : gather_over(comm, {static_cast<std::int64_t>(value.count())})) {
    most = std::max(most, v);
  }
  return static_cast<double>(most) / 1e9;
}

/**
 * @brief Seconds from the first rank's start to the last rank's end. Ranks leave the barrier
 * before a run at different times (more so with more processes than cores): one rank's own start
 * would miss the time the others ran before it. Ranks on one machine share the steady clock, as
 * this bench's do; across machines their clocks' offsets would add in.
 */
double makespan_over(communicator& comm,
                     std::chrono::steady_clock::time_point start,
                     std::chrono::steady_clock::time_point end) {
  auto const all = gather_over(
    comm,
    {static_cast<std::int64_t>(
       std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count()),
     static_cast<std::int64_t>(
       std::chrono::duration_cast<std::chrono::nanoseconds>(end.time_since_epoch()).count())});
  std::int64_t first = all.at(0);
  std::int64_t last  = all.at(1);
  for (std::size_t at = 0; at + 1 < all.size(); at += 2) {
    first = std::min(first, all[at]);
    last  = std::max(last, all[at + 1]);
  }
  return static_cast<double>(last - first) / 1e9;
}

/**
 * @brief Checks that a rank's sorted batches come in order of their 64-bit integer key columns
 * (INT64 or TIMESTAMP, ascending), and keeps its first and last key.
 */
struct order_check {
  std::vector<std::size_t> keys;
  std::vector<std::int64_t> first;  ///< empty until a row was seen
  std::vector<std::int64_t> last;
  bool ordered       = true;
  std::uint64_t rows = 0;

  void operator()(table_view const& batch) {
    std::vector<std::int64_t const*> columns;
    for (auto const key : keys) {  // (keys without nulls: checked as the input was stored)
      columns.push_back(batch.column(key).data<std::int64_t>());
    }
    std::vector<std::int64_t> row(keys.size());
    for (std::size_t r = 0; r < batch.num_rows(); ++r) {
      for (std::size_t k = 0; k < keys.size(); ++k) {
        row[k] = columns[k][r];
      }
      if (first.empty()) {
        first = row;
      } else if (row < last) {
        ordered = false;
      }
      last = row;
    }
    rows += batch.num_rows();
  }
};

/// Whether every rank's sorted output is in order and each rank's keys follow the last rank's.
bool ordered_across_ranks(communicator& comm, order_check const& check) {
  std::size_t const width = check.keys.size();
  std::vector<std::int64_t> mine{check.ordered ? 1 : 0, check.first.empty() ? 0 : 1};
  for (auto const* side : {&check.first, &check.last}) {
    for (std::size_t k = 0; k < width; ++k) {
      mine.push_back(side->empty() ? 0 : (*side)[k]);
    }
  }
  auto const all          = gather_over(comm, mine);
  std::size_t const entry = 2 + 2 * width;
  std::vector<std::int64_t> previous;
  for (std::size_t at = 0; at < all.size(); at += entry) {
    if (all[at] == 0) {
      return false;
    }
    if (all[at + 1] == 0) {
      continue;  // a rank without rows
    }
    std::vector<std::int64_t> const first(
      all.begin() + static_cast<std::ptrdiff_t>(at + 2),
      all.begin() + static_cast<std::ptrdiff_t>(at + 2 + width));
    if (!previous.empty() && first < previous) {
      return false;
    }
    previous.assign(all.begin() + static_cast<std::ptrdiff_t>(at + 2 + width),
                    all.begin() + static_cast<std::ptrdiff_t>(at + entry));
  }
  return true;
}

/**
 * @brief The columns named in `by` (comma-separated), by their place in `schema`; for a sort,
 * each must be INT64 or TIMESTAMP (what `order_check` reads).
 * @throws std::runtime_error for an unknown column, or another key type for a sort
 */
std::vector<std::size_t> key_columns(table_schema const& schema, std::string const& by, bool sort) {
  std::vector<std::size_t> keys;
  std::size_t begin = 0;
  while (begin <= by.size()) {
    std::size_t const end  = std::min(by.find(',', begin), by.size());
    std::string const name = by.substr(begin, end - begin);
    std::size_t found      = 0;
    while (found < schema.size() && schema[found].name != name) {
      ++found;
    }
    if (found == schema.size()) {
      throw std::runtime_error("no column '" + name + "' in the input");
    }
    auto const type = schema[found].type.id();
    if (sort && type != type_id::INT64 && type != type_id::TIMESTAMP) {
      throw std::runtime_error("--sort checks 64-bit integer keys only; '" + name + "' is not one");
    }
    keys.push_back(found);
    begin = end + 1;
  }
  return keys;
}

void run_timed(communicator& comm, arguments const& args, std::vector<std::string> const& files);

/// Runs this rank's part, every message `--latency-us` late when given.
void run_rank(communicator& comm, arguments const& args, std::vector<std::string> const& files) {
  if (args.latency_us > 0) {
    bench::delayed_communicator delayed(comm, std::chrono::microseconds{args.latency_us});
    run_timed(delayed, args, files);
    return;
  }
  run_timed(comm, args, files);
}

void run_timed(communicator& comm, arguments const& args, std::vector<std::string> const& files) {
  device_environment_options options;
  options.device_memory = args.device;
  options.host_memory   = args.host;
  device_environment environment(options);
  device_task task(environment, task_id{static_cast<std::uint64_t>(comm.rank()) + 1});
  task_context::thread_binding bind(task.context());

  // Untimed: this rank's share into the spill store (where a pipeline would hold its input).
  std::vector<spillable_table> inputs;
  std::uint64_t bytes       = 0;
  std::uint64_t stored_rows = 0;
  // The key columns from the first file, on every rank (a rank may have no row group).
  std::vector<std::size_t> const keys = key_columns(
    open_parquet(
      files.front(), parquet_read_options{}, default_stream(), memory_resources{environment.host()})
      ->schema(),
    args.by,
    args.sort);
  // As `spillway shuffle`: an even share of the row groups, a reader per file's run of them,
  // batches of at most an eighth of the rank's device (each rank reads every footer here, where
  // the command shares the footers' row counts in an allgather).
  auto const share = split_parquet(
    files, static_cast<std::size_t>(comm.size()))[static_cast<std::size_t>(comm.rank())];
  for (auto const& piece : share) {
    parquet_read_options read;
    read.target_batch_bytes = std::max<std::size_t>(1, std::min(args.batch, args.device / 8));
    auto reader             = open_parquet(std::vector<parquet_row_groups>{piece},
                               read,
                               default_stream(),
                               memory_resources{environment.device(), environment.host()});
    while (auto batch = reader->next()) {
      for (auto const key : keys) {
        if (args.sort && batch->view().column(key).has_nulls()) {
          throw std::runtime_error("--sort checks keys without nulls only");
        }
      }
      bytes += batch->allocated_bytes();
      stored_rows += batch->num_rows();
      inputs.push_back(environment.store().make_spillable(std::move(batch), 0));
    }
  }
  double seconds     = 0.0;
  double cpu_seconds = 0.0;
  std::uint64_t rows = 0;
  bool ordered       = true;
  std::string runs;
  std::string faults;
  std::string phases;
  std::string in_place;
  // The stored inputs, lent pinned (the lineage of a map task is the stored input itself).
  auto const lend = [&inputs](std::size_t index) {
    auto pinned           = std::make_shared<pinned_table>(inputs[index].acquire());
    table_view const view = pinned->view();
    return map_rows{view, std::move(pinned)};
  };
  auto const mode = args.mode == "pull" ? shuffle_mode::PULL : shuffle_mode::PUSH;
  for (int run = 0; run < args.repeat; ++run) {
    comm.barrier();
    auto const start         = std::chrono::steady_clock::now();
    double const cpu_start   = process_cpu_seconds();
    long const faults_before = process_minor_faults();
    order_check check;
    check.keys = keys;
    distributed_sort_statistics sorted;
    if (args.sort) {
      distributed_sort_options sort_options;
      sort_options.key_columns  = keys;
      sort_options.mode         = mode;
      sort_options.inbox_budget = args.device / 4;  // as `spillway sort` across ranks
      sort_options.sort.merge_budget_bytes =
        args.merge_budget > 0 ? args.merge_budget : args.device / 2;
      sort_options.sort.output_batch_bytes = std::min(args.device / 8, 64_MiB);
      sort_options.sort.coordinator        = &environment.coordinator();
      sort_options.sort.task               = &task.context();
      sorted                               = distributed_sort(comm,
                                environment.store(),
                                lent_batches{inputs.size(), lend},
                                std::ref(check),
                                sort_options,
                                default_stream(),
                                memory_resources{environment.device()},
                                environment.host());
      rows                                 = check.rows;
      comm.barrier();  // done when the slowest rank is
    } else {
      shuffle_options shuffle_config(environment.host());
      shuffle_config.partitions.method         = partition_method::HASH;
      shuffle_config.partitions.key_columns    = keys;
      shuffle_config.partitions.num_partitions = args.partitions;
      shuffler shuffle(mode,
                       comm,
                       environment.store(),
                       shuffle_config,
                       default_stream(),
                       memory_resources{environment.device()});
      for (std::size_t index = 0; index < inputs.size(); ++index) {
        static_cast<void>(shuffle.add_map(
          map_view_input{[&lend, index](stream_view, memory_resources) { return lend(index); }}));
      }
      shuffle.finish_maps();
      rows = 0;
      for (auto const partition : shuffle.owned_partitions()) {
        shuffle.for_each_batch(partition,
                               [&](table_view const& batch) { rows += batch.num_rows(); });
      }
      shuffle.close();
    }
    double const elapsed = makespan_over(comm, start, std::chrono::steady_clock::now());
    // The process's CPU time over the timed part (with in-process ranks: every rank's).
    double const cpu = process_cpu_seconds() - cpu_start;
    if (args.sort) {  // untimed: the order across ranks, and the phases of the slowest rank
      ordered = ordered_across_ranks(comm, check) && ordered;
      char text[96];
      std::snprintf(text,
                    sizeof(text),
                    "%s[%.3f, %.3f, %.3f]",
                    run == 0 ? "" : ", ",
                    max_seconds_over(comm, sorted.sample_time),
                    max_seconds_over(comm, sorted.shuffle_time),
                    max_seconds_over(comm, sorted.sort_time));
      phases += text;
      std::snprintf(
        text,
        sizeof(text),
        "%s[%llu, %llu]",
        run == 0 ? "" : ", ",
        static_cast<unsigned long long>(sum_over(comm, sorted.sort.batches_sorted_in_place)),
        static_cast<unsigned long long>(sum_over(comm, sorted.shuffle.shards_read)));
      in_place += text;
    }
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
  auto const input_rows = sum_over(comm, stored_rows);
  if (total_rows != input_rows || !ordered) {
    throw std::runtime_error("the " + std::string(args.sort ? "sort" : "shuffle") + " gave " +
                             std::to_string(total_rows) + " rows of " + std::to_string(input_rows) +
                             (ordered ? "" : ", out of order"));
  }
  if (comm.rank() == 0) {
    std::printf(
      "{\"operation\": \"%s\", \"ranks\": %d, \"mode\": \"%s\", \"partitions\": %zu, "
      "\"rows\": %llu, \"bytes\": %llu, "
      "\"seconds\": %.3f, \"cpu_seconds\": %.3f, \"MB_per_s\": %.1f, "
      "\"spilled_device_to_host_bytes\": %llu, \"runs\": [%s], \"minor_faults\": "
      "[%s]%s%s%s%s%s%s}\n",
      args.sort ? "sort" : "shuffle",
      comm.size(),
      args.mode.c_str(),
      args.sort ? static_cast<std::size_t>(comm.size()) : args.partitions,
      static_cast<unsigned long long>(total_rows),
      static_cast<unsigned long long>(total_bytes),
      seconds,
      cpu_seconds,
      static_cast<double>(total_bytes) / seconds / 1e6,
      static_cast<unsigned long long>(spilled),
      runs.c_str(),
      faults.c_str(),
      args.sort ? ", \"phases_sample_shuffle_sort\": [" : "",
      phases.c_str(),
      args.sort ? "]" : "",
      args.sort ? ", \"sorted_in_place\": [" : "",
      in_place.c_str(),
      args.sort ? "]" : "");
  }
}

}  // namespace

int main(int argc, char** argv) {
  auto const args = parse(argc, argv);
  if (args.dataset.empty()) {
    std::fprintf(stderr,
                 "usage: spillway_shuffle_bench DATASET [--sort] [--by col,...] [--partitions P] "
                 "[--mode pull|push] [--ranks N] [--device-memory B] [--host-memory B] "
                 "[--batch-size B] [--merge-budget B] [--repeat N] [--latency-us N]\n");
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
