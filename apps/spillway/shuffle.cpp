/**
 * `spillway shuffle`: hash-partitions a dataset by `--by` into `--partitions` partitions across
 * ranks (threads of this process with `--ranks`, or the processes of `mpirun`) with the pull or
 * push shuffle, every rank on its own emulated device of `--device-memory` that spills through its
 * spill store. Partition p is written by its owner as `partition-<p>-<n>.parquet`; the files
 * appear only once all of them are complete.
 */
#include "command_line.hpp"
#include "commands.hpp"
#include "empty_output.hpp"
#include "output_directory.hpp"
#include "partition_writers.hpp"
#include "preflight.hpp"
#include "ranks.hpp"
#include "report_gauges.hpp"
#include "retry_guards.hpp"
#include "shuffle_tasks.hpp"
#include "spill_failures.hpp"

#include <spillway/core/logging.hpp>
#include <spillway/core/task_event_counter.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/runtime/run_report.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unistd.h>
#include <vector>

namespace spillway::cli {
namespace {

/// The most partitions accepted.
constexpr std::size_t MAX_PARTITIONS = 1U << 20U;
/// The most in-process ranks accepted.
constexpr int MAX_RANKS = 256;

struct shuffle_arguments {
  std::string input;
  std::string output;
  std::string by;
  std::size_t partitions    = 0;
  std::string mode          = "push";
  int ranks                 = 1;
  std::string device_memory = "512MiB";
  std::string host_memory   = "2GiB";
  std::string spill_dir;
  std::string batch_size   = "64MiB";
  std::string file_size    = "256MiB";
  std::string inbox_budget = "64MiB";
  std::string format;
  std::string checkpoint_dir;
  std::string compression   = DEFAULT_COMPRESSION;
  std::string backend       = "cpu";
  std::string output_format = "parquet";
  std::uint64_t seed        = 0;
  bool json                 = false;
  bool overwrite            = false;
  std::string csv_types;         ///< --csv-types
  std::string report;            ///< --report
  std::size_t threads      = 0;  ///< --threads; 0: the cores this process may use
  std::size_t tasks        = 0;  ///< --tasks per rank; 0: the rank's share of the threads
  std::size_t device_tasks = DEFAULT_DEVICE_TASKS;
};

/** @brief One rank's counters, summed or maximised over the ranks for the summary. */
struct rank_totals {
  /// rows and bytes read and written so far (the run report's thread reads them as they grow)
  std::atomic<std::uint64_t> rows_in{0}, bytes_in{0}, rows_out{0}, bytes_out{0};
  std::uint64_t files = 0, shards = 0, bytes_shuffled = 0, messages = 0, recomputed = 0,
                backpressure_waits = 0, spilled_host = 0, spilled_disk = 0, resumed = 0;
  std::uint64_t device_peak = 0, host_peak = 0;
};

/** @return what names batch `index` of `piece` read in batches of `batch_bytes`, in every run */
std::string map_identity(input_piece const& piece, std::size_t batch_bytes, std::size_t index) {
  auto const& file = piece.file;
  std::error_code error;
  auto const size     = std::filesystem::file_size(file, error);
  auto const modified = std::filesystem::last_write_time(file, error).time_since_epoch().count();
  std::string const groups = piece.row_groups ? std::to_string(piece.row_groups->first) + "-" +
                                                  std::to_string(piece.row_groups->second) + "|"
                                              : std::string{};
  return std::filesystem::absolute(file).string() + "|" + std::to_string(size) + "|" +
         std::to_string(modified) + "|" + groups + std::to_string(batch_bytes) + "|" +
         std::to_string(index);
}

/** @return the marker that says every map task of `piece` is checkpointed, and how many */
std::filesystem::path done_marker(std::string const& directory,
                                  input_piece const& piece,
                                  std::size_t batch_bytes) {
  auto const identity = map_identity(piece, batch_bytes, 0);
  char name[48];
  std::snprintf(name,
                sizeof(name),
                "file-%016llx.done",
                static_cast<unsigned long long>(std::hash<std::string>{}(identity)));
  return std::filesystem::path(directory) / name;
}

/** @return batch `index` of `piece`, read again (a lost shard's lineage) */
std::unique_ptr<table> reread_batch(input_piece const& piece,
                                    file_format format,
                                    std::size_t batch_bytes,
                                    std::size_t index,
                                    memory_resources mrs,
                                    stream_view stream) {
  auto reader = open_piece(piece, format, batch_bytes, mrs, stream);
  for (std::size_t k = 0;; ++k) {
    auto batch = reader->next();
    if (!batch) {
      throw std::runtime_error(piece.describe() + " no longer has batch " + std::to_string(index) +
                               ": it changed during the shuffle");
    }
    if (k == index) {
      return batch;
    }
  }
}

/// Fault injection for the resume tests: "<rank>:<maps>" kills the process that hosts that rank
/// (SIGKILL, as a lost machine) once it has added that many map tasks.
void maybe_die(int rank, std::size_t maps_added) {
  static char const* const spec = std::getenv("SPILLWAY_TEST_KILL_AFTER_MAPS");
  if (spec == nullptr) {
    return;
  }
  int kill_rank       = -1;
  unsigned long after = 0;
  if (std::sscanf(spec, "%d:%lu", &kill_rank, &after) == 2 && kill_rank == rank &&
      maps_added == after) {
    std::raise(SIGKILL);
  }
}

/** @brief Writes `marker`: every map task of `piece` is checkpointed, `batches` of them. */
void mark_checkpointed(std::filesystem::path const& marker,
                       input_piece const& piece,
                       std::string const& directory,
                       std::size_t batches) {
  // Written under a temporary name and renamed: a marker that exists is complete.
  auto const temporary = marker.string() + ".tmp";
  std::ofstream out{temporary};
  out << batches << '\n';
  out.close();
  std::error_code error;
  if (out) {
    std::filesystem::rename(temporary, marker, error);
  }
  if (!out || error) {
    std::filesystem::remove(temporary, error);
    log(log_level::WARN,
        "cannot mark " + piece.describe() + " as checkpointed in " + directory +
          "; a rerun reads it again (its map tasks are still resumed)");
  }
}

/**
 * @return the read batch of a shuffle whose checkpoints go to `directory`: the one that an earlier
 * run with the same `uncapped` batch (`--batch-size` within the device's share) chose, as recorded
 * there, so that a rerun on other ranks, tasks, threads or host budget names its maps as that run
 * did and resumes them; else `chosen`, recorded for the runs after it
 */
std::size_t checkpointed_batch_bytes(std::string const& directory,
                                     std::size_t uncapped,
                                     std::size_t chosen) {
  auto const record =
    std::filesystem::path(directory) / ("batch-" + std::to_string(uncapped) + ".bytes");
  if (std::ifstream in{record}; in) {
    std::size_t recorded = 0;
    if (in >> recorded && recorded > 0 && recorded <= uncapped) {
      return recorded;
    }
  }
  // Written under a name of this process's and renamed: a record that exists is complete (the
  // processes of one run write the same value).
  std::error_code error;
  std::filesystem::create_directories(directory, error);
  auto const temporary = record.string() + "." + std::to_string(::getpid()) + ".tmp";
  std::ofstream out{temporary};
  out << chosen << '\n';
  out.close();
  if (out) {
    std::filesystem::rename(temporary, record, error);
  }
  if (!out || error) {
    std::filesystem::remove(temporary, error);
    log(log_level::WARN,
        "cannot record the read batch size in " + directory +
          "; a rerun whose budgets or tasks cut the batches otherwise maps them again");
  }
  return chosen;
}

/**
 * @brief Adds a map task per batch of `pieces` (this rank's files, or runs of row groups), run by
 * `tasks`. Its lineage is the file itself: a lost shard's map task reads its batch from the file
 * again, so no copy of the input is kept. With a checkpoint directory the maps are named (their
 * shards are checkpointed) and a piece whose maps were all checkpointed by an earlier run is not
 * read at all.
 *
 * The batches are read in order, one task at a time, and each gets its map number as it is read
 * (`shuffler::reserve_map`): the rows of a partition come in map order, so the output is the same
 * whatever the number of tasks and however they interleave.
 */
void add_input_maps(shuffler& shuffle,
                    shuffle_map_tasks& tasks,
                    std::string const& directory,
                    std::vector<input_piece> const& pieces,
                    file_format format,
                    std::size_t batch_bytes,
                    memory_resources mrs,
                    stream_view read_stream,
                    int rank,
                    rank_totals& totals) {
  bool const checkpointed = !directory.empty();
  // Per piece: its batches once all are read (or known from its marker), and the map tasks done.
  struct piece_state {
    std::optional<std::size_t> batches;
    std::size_t done = 0;
    bool resumed     = false;  ///< its marker was there: its maps are all checkpointed
  };
  std::vector<piece_state> states(pieces.size());
  std::mutex states_mutex;
  std::atomic<std::size_t> added{0};
  // Marks piece `p` checkpointed once every batch of it is read and every map of it done.
  auto const one_done = [&](std::size_t p, bool finished_map) {
    std::optional<std::size_t> complete;
    {
      std::lock_guard lock(states_mutex);
      auto& state = states[p];
      state.done += finished_map ? 1U : 0U;
      if (checkpointed && !state.resumed && state.batches && state.done == *state.batches) {
        complete = state.batches;
      }
    }
    if (complete) {
      mark_checkpointed(
        done_marker(directory, pieces[p], batch_bytes), pieces[p], directory, *complete);
    }
  };
  // The batch into the shuffle's memory; the reader's own scratch on the host, as when the piece
  // was first read.
  auto const reader_scratch = mrs.temporary();
  auto const lineage        = [&, reader_scratch](std::size_t p, std::size_t index) -> map_input {
    return [piece = pieces[p], format, batch_bytes, index, reader_scratch](stream_view stream,
                                                                           memory_resources out) {
      return reread_batch(
        piece, format, batch_bytes, index, memory_resources{out.output(), reader_scratch}, stream);
    };
  };
  auto const identity = [&](std::size_t p, std::size_t index) {
    return checkpointed ? map_identity(pieces[p], batch_bytes, index) : std::string{};
  };
  // Where the reading stands (touched by one task at a time).
  std::size_t p     = 0;
  std::size_t index = 0;
  std::unique_ptr<batch_reader> reader;
  auto const next = [&]() -> std::optional<map_work> {
    while (p < pieces.size()) {
      auto& state = states[p];
      if (index == 0 && !reader && !state.batches) {
        std::size_t batches = 0;
        auto const marker =
          checkpointed ? done_marker(directory, pieces[p], batch_bytes) : std::filesystem::path{};
        if (std::ifstream in{marker}; checkpointed && in >> batches) {
          std::lock_guard lock(states_mutex);
          state.batches = batches;
          state.resumed = true;
        } else {
          // Read into host scratch; the map task copies it onto the device as its first step,
          // under the shuffle's OOM protocol.
          reader = open_piece(
            pieces[p], format, batch_bytes, memory_resources{mrs.temporary()}, read_stream);
        }
      }
      std::size_t const piece = p;
      std::size_t const batch = index;
      if (!reader) {  // resumed: its map tasks' shards are read from the checkpoint
        if (batch == *state.batches) {
          ++p;
          index = 0;
          continue;
        }
        ++index;
        std::size_t const map = shuffle.reserve_map();
        return map_work{0, 0, [&, piece, batch, map] {
                          static_cast<void>(shuffle.add_reserved_map(
                            map, lineage(piece, batch), identity(piece, batch)));
                          maybe_die(rank, ++added);
                        }};
      }
      auto read = reader->next();
      if (!read) {
        reader.reset();
        {
          std::lock_guard lock(states_mutex);
          state.batches = batch;
        }
        one_done(piece, false);
        ++p;
        index = 0;
        continue;
      }
      ++index;
      std::size_t const rows  = read->num_rows();
      std::size_t const bytes = read->allocated_bytes();
      totals.rows_in += rows;
      totals.bytes_in += bytes;
      std::size_t const map = shuffle.reserve_map();
      auto first            = std::make_shared<std::unique_ptr<table>>(std::move(read));
      auto again            = lineage(piece, batch);
      map_input input       = [first, again](stream_view stream, memory_resources out) {
        if (*first) {  // the batch just read, once; then read again from the piece
          auto on_device = spillway::copy((*first)->view(), stream, out.output());
          first->reset();  // copied: a later attempt reads it again
          return on_device;
        }
        return again(stream, out);
      };
      return map_work{
        rows, bytes, [&, piece, batch, map, input = std::move(input)] {
          static_cast<void>(shuffle.add_reserved_map(map, input, identity(piece, batch)));
          one_done(piece, true);
          maybe_die(rank, ++added);
        }};
    }
    return std::nullopt;
  };
  tasks.run(next);
}

int run_shuffle(shuffle_arguments const& args) {
  (void)use_worker_threads(args.threads);
  install_spill_cleanup_on_signals();
  auto const start         = std::chrono::steady_clock::now();
  auto const device_memory = parse_size_flag("--device-memory", args.device_memory);
  auto const host_memory   = parse_size_flag("--host-memory", args.host_memory);
  check_host_budget(host_memory);
  auto const batch_size   = parse_size_flag("--batch-size", args.batch_size);
  auto const file_size    = parse_file_size_flag(args.file_size);
  auto const inbox_budget = parse_size_flag("--inbox-budget", args.inbox_budget);
  auto const compression  = parse_compression(args.compression);
  if (args.partitions == 0 || args.partitions > MAX_PARTITIONS) {
    throw usage_error("--partitions must be between 1 and " + std::to_string(MAX_PARTITIONS));
  }
  if (args.ranks < 1 || args.ranks > MAX_RANKS) {
    throw usage_error("--ranks must be between 1 and " + std::to_string(MAX_RANKS));
  }
  if (args.mode != "pull" && args.mode != "push") {
    throw usage_error("--mode must be pull or push, not '" + args.mode + "'");
  }
  auto const keys = parse_sort_keys(args.by);
  refuse_repeated_keys(keys);
  for (auto const& key : keys) {
    if (key.ordering.direction != order::ASCENDING || key.ordering.nulls != null_order::BEFORE) {
      throw usage_error("--by " + args.by + ": a shuffle hashes its keys; give column names only");
    }
  }
  auto const input = describe_input(args.input, args.format, args.csv_types);
  refuse_output_holding_input(args.output, input.files);
  auto const& format  = input.format;
  auto const& names   = input.names;
  auto const resolved = resolve_sort_keys(keys, input.schema, args.input);
  auto const backend  = resolve_rank_backend(args.backend, args.ranks, device_memory);
  check_spill_directory(args.spill_dir);
  if (!args.report.empty() && !launched_by_mpirun()) {
    for (int rank = 0; rank < args.ranks; ++rank) {
      static_cast<void>(check_report_files(args.report, rank, args.ranks));
    }
  }
  // Tasks per rank: by default one per worker thread, the threads shared by this process's ranks.
  std::size_t const num_tasks =
    args.tasks != 0
      ? args.tasks
      : std::max<std::size_t>(1, worker_threads() / static_cast<std::size_t>(args.ranks));
  // A read batch is a share of the device, and no larger than a rank's host budget holds beside
  // its reader's pages: the batch its reader decodes (with the piece decoded past it) and converts,
  // and one waiting to be copied onto the device for each other map task.
  std::size_t const scratch = format == file_format::PARQUET && worker_threads() > 1
                                ? parquet_decode_scratch_bytes(input.files)
                                : 0;
  // With checkpoints, the batch the run that wrote them chose: their maps are named by it.
  std::size_t const uncapped = std::min(batch_size, device_memory / DEVICE_SHARE_PER_BATCH);
  std::size_t const chosen   = batch_within_host(
    uncapped,
    host_memory,
    static_cast<double>(num_tasks) + 1.0 + 1.0 / static_cast<double>(PARQUET_DECODE_PIECES),
    scratch);
  std::size_t const batch_bytes =
    args.checkpoint_dir.empty() ? chosen
                                : checkpointed_batch_bytes(args.checkpoint_dir, uncapped, chosen);

  std::mutex summary_mutex;
  nlohmann::ordered_json summary;
  std::string summary_line;
  std::vector<std::string> written;
  shared_output output(args.output, args.overwrite);

  run_on_ranks(args.ranks, output, [&](communicator& comm) {
    rank_totals totals;
    // Each rank's own report of its device, when asked for: made before the environment, whose
    // store records into it, and stopped before the environment goes.
    std::optional<report_files> report;
    std::optional<run_recorder> recorder;
    device_environment* sampled = nullptr;  // the rank's, once made
    if (!args.report.empty()) {
      report = check_report_files(args.report, comm.rank(), comm.size());
      run_recorder_options recorder_options;
      recorder_options.interval = REPORT_PERIOD;
      recorder_options.title    = "spillway shuffle " + args.input + ", rank " +
                               std::to_string(comm.rank()) + " of " + std::to_string(comm.size());
      recorder.emplace(environment_gauges([&sampled]() -> device_environment& { return *sampled; },
                                          [&totals] { return totals.rows_in + totals.rows_out; },
                                          [&totals] { return totals.bytes_in + totals.bytes_out; }),
                       recorder_options);
    }
    // Each task's allocation failures resolved by spilling, roll-backs and splits, passed on to
    // the report.
    task_event_counter task_events{recorder ? &recorder->events() : nullptr};
    rank_device rank(comm, device_memory, host_memory, args.spill_dir, backend, &task_events);
    sampled = &rank.environment();
    recorder_stopper stop_recorder{recorder ? &*recorder : nullptr};
    if (recorder) {
      recorder->start();
    }
    run_rank_work(comm, rank.environment().store(), [&] {
      auto& environment = rank.environment();
      auto& rank_host   = rank.host();
      auto& io_scratch  = rank.io_scratch();

      shuffle_options options(rank_host);
      options.partitions.method         = partition_method::HASH;
      options.partitions.key_columns    = resolved.columns;
      options.partitions.num_partitions = args.partitions;
      options.partitions.seed           = args.seed;
      options.inbox_budget              = inbox_budget;
      options.checkpoint_directory      = args.checkpoint_dir;
      if (char const* loss = std::getenv("SPILLWAY_TEST_SHARD_LOSS"); loss != nullptr) {
        // Fault injection for the recompute tests: drop shards with this probability.
        options.testing_shard_loss = random_shard_loss(std::strtod(loss, nullptr), args.seed + 1);
      }
      shuffler shuffle(args.mode == "pull" ? shuffle_mode::PULL : shuffle_mode::PUSH,
                       comm,
                       environment.store(),
                       options,
                       environment.stream(),
                       memory_resources{environment.device()});
      memory_resources const reader_resources{environment.device(), io_scratch};
      auto const my_input = input_of_rank(comm, input);
      // The rank's map tasks: ids after the rank's own task, --device-tasks of them on the device
      // at once.
      shuffle_map_tasks tasks{environment,
                              num_tasks,
                              args.device_tasks,
                              std::max<std::size_t>(batch_bytes, 1),
                              task_id{rank.task().id().value + 1},
                              &task_events};
      add_input_maps(shuffle,
                     tasks,
                     args.checkpoint_dir,
                     my_input,
                     format,
                     std::max<std::size_t>(batch_bytes, 1),
                     reader_resources,
                     environment.stream(),
                     comm.rank(),
                     totals);
      shuffle.finish_maps();
      std::vector<std::string> mine;
      auto const parquet_options = partition_parquet_options(host_memory / 2, worker_threads());
      auto const options_of      = [&](std::size_t partition) {
        batch_writer_options writer_options;
        writer_options.directory         = output.staging();
        writer_options.target_file_bytes = file_size;
        char prefix[32];
        std::snprintf(prefix, sizeof(prefix), "partition-%05zu", partition);
        writer_options.file_prefix = prefix;
        // The row groups being filled and encoded, all writers together, take at most half the
        // host budget.
        writer_options.parquet             = parquet_options;
        writer_options.parquet.compression = compression;
        writer_options.format              = parse_output_format(args.output_format);
        writer_options.schema              = input.schema;  // strings keep their Arrow type
        return writer_options;
      };
      // The bytes of every rank's map tasks, read now or resumed: what a resumed run wrote too.
      std::size_t bytes_mapped = 0;
      bool no_rows             = true;
      for (std::size_t partition = 0; partition < args.partitions; ++partition) {
        bytes_mapped += shuffle.directory().partition_bytes(partition);
        no_rows = no_rows && shuffle.directory().partition_rows(partition) == 0;
      }
      // Partitions are read one after another; each is closed (its last row groups encoded)
      // while the next is read, as many at once as the pool has threads.
      partition_writers writers(std::min(worker_threads(), PARTITION_WRITERS) - 1);
      for (auto const partition : shuffle.owned_partitions()) {
        if (shuffle.directory().partition_bytes(partition) == 0) {
          if (partition == 0 && no_rows) {  // one file still carries the columns
            mine.push_back(write_empty_file(
              options_of(0), input.schema, environment.stream(), memory_resources{io_scratch}));
          }
          continue;
        }
        auto writer = std::make_unique<batch_writer>(
          options_of(partition), names, environment.stream(), memory_resources{io_scratch});
        shuffle.for_each_batch(partition, [&](table_view const& batch) {
          totals.rows_out += batch.num_rows();
          totals.bytes_out += estimate_size(batch);
          writer->write(batch);
        });
        writers.close(std::move(writer));
      }
      for (auto& name : writers.finish()) {
        mine.push_back(std::move(name));
      }
      maybe_fail_after_writing(comm.rank());
      shuffle.close();
      if (recorder) {
        recorder->stop();
        recorder->write_run_report(report->html, report->json);
      }
      totals.files              = mine.size();
      auto const stats          = shuffle.statistics();
      auto const spills         = environment.store().statistics();
      totals.resumed            = stats.resumed_maps;
      totals.shards             = stats.shards_written;
      totals.bytes_shuffled     = stats.bytes_written;
      totals.messages           = stats.messages_sent;
      totals.recomputed         = stats.recomputed_maps;
      totals.backpressure_waits = stats.backpressure_waits;
      totals.spilled_host       = spills.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes;
      totals.spilled_disk       = spills.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes +
                            spills.between(spill_tier::HOST, spill_tier::DISK).raw_bytes;
      auto const sums  = sum_over_ranks(comm,
                                       {totals.rows_in,
                                         totals.bytes_in,
                                         totals.rows_out,
                                         totals.files,
                                         totals.shards,
                                         totals.bytes_shuffled,
                                         totals.messages,
                                         totals.recomputed,
                                         totals.backpressure_waits,
                                         totals.spilled_host,
                                         totals.spilled_disk,
                                         totals.resumed,
                                         environment.injected_failures()});
      auto const peaks = max_over_ranks(comm,
                                        {environment.device_peak_bytes(),
                                         environment.host_tier().statistics().peak_bytes,
                                         totals.rows_in,
                                         spills.host_over_budget_peak});
      // Task k of every rank, summed over the ranks.
      std::vector<std::uint64_t> task_counts;
      auto const run_again = [&stats](task_id id) -> std::uint64_t {
        auto const at = stats.oom_retries_by_task.find(id.value);
        return at == stats.oom_retries_by_task.end() ? 0 : at->second;
      };
      auto const summaries = tasks.summaries();
      for (std::size_t index = 0; index < summaries.size(); ++index) {
        auto const& task = summaries[index];
        task_id const id{rank.task().id().value + 1 + index};
        task_counts.insert(task_counts.end(),
                           {task.maps,
                            task.rows,
                            task.bytes,
                            task.leases.grants,
                            task.leases.granted_bytes,
                            task.leases.waits,
                            task.leases.lent_bytes,
                            task.leases.borrowed_bytes,
                            task.leases.whole_device,
                            static_cast<std::uint64_t>(task.device_seconds * 1e6),
                            task_events.count(id, event_kind::OOM_SPILLED),
                            task_events.count(id, event_kind::OOM_RETRY),
                            task_events.count(id, event_kind::OOM_SPLIT),
                            run_again(id)});
      }
      task_counts             = sum_over_ranks(comm, std::move(task_counts));
      auto const protocol     = environment.coordinator().statistics();
      auto const oom_counts   = sum_over_ranks(comm,
                                             {stats.oom_retries,
                                                protocol.failures,
                                                protocol.blocks,
                                                protocol.retries,
                                                protocol.deadlocks});
      auto all_files          = gather_names(comm, mine);
      std::size_t rows_mapped = 0;  // by every rank's map tasks, read now or resumed
      for (std::size_t partition = 0; partition < args.partitions; ++partition) {
        rows_mapped += shuffle.directory().partition_rows(partition);
      }
      if (rows_mapped != sums[2] || (args.checkpoint_dir.empty() && sums[0] != sums[2])) {
        throw std::runtime_error("shuffle wrote " + std::to_string(sums[2]) + " rows of " +
                                 std::to_string(rows_mapped) + " mapped");
      }
      if (comm.rank() != 0) {
        return;
      }
      double const seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      double const per_second = static_cast<double>(bytes_mapped) / std::max(seconds, 1e-9);
      std::lock_guard lock(summary_mutex);
      written                         = std::move(all_files);
      summary                         = {{"input", args.input},
                                         {"output", args.output},
                                         {"ranks", comm.size()},
                                         {"threads", worker_threads()},
                                         {"transport", launched_by_mpirun() ? "mpi" : "in-process"},
                                         {"backend", std::string{to_string(backend)}},
                                         {"mode", args.mode},
                                         {"partitions", args.partitions},
                                         {"rows", sums[2]},
                                         {"rows_read", sums[0]},
                                         {"rows_read_max_rank", peaks[2]},
                                         {"bytes", bytes_mapped},
                                         {"bytes_read", sums[1]},
                                         {"files", sums[3]},
                                         {"seconds", seconds},
                                         {"bytes_per_second", per_second},
                                         {"shards", sums[4]},
                                         {"shard_bytes", sums[5]},
                                         {"messages", sums[6]},
                                         {"recomputed_maps", sums[7]},
                                         {"resumed_maps", sums[11]},
                                         {"backpressure_waits", sums[8]},
                                         {"spilled_device_to_host_bytes", sums[9]},
                                         {"spilled_to_disk_bytes", sums[10]},
                                         {"device_budget_per_rank", device_memory},
                                         {"device_peak_max", peaks[0]},
                                         {"host_budget_per_rank", host_memory},
                                         {"host_peak_max", peaks[1]},
                                         {"host_over_budget_peak_max", peaks[3]},
                                         {"oom_injected", sums[12]},
                                         {"steps_run_again_alone", oom_counts[0]},
                                         {"allocation_failures", oom_counts[1]},
                                         {"oom_blocks", oom_counts[2]},
                                         {"oom_roll_backs", oom_counts[3]},
                                         {"oom_deadlocks_broken", oom_counts[4]},
                                         {"tasks", num_tasks},
                                         {"device_tasks", args.device_tasks},
                                         {"batch_bytes", batch_bytes}};
      nlohmann::ordered_json per_task = nlohmann::ordered_json::array();
      constexpr std::size_t FIELDS    = 14;
      for (std::size_t at = 0; at + FIELDS <= task_counts.size(); at += FIELDS) {
        per_task.push_back({{"task", at / FIELDS + 1},
                            {"maps", task_counts[at]},
                            {"rows", task_counts[at + 1]},
                            {"bytes", task_counts[at + 2]},
                            {"leases", task_counts[at + 3]},
                            {"lease_bytes", task_counts[at + 4]},
                            {"lease_waits", task_counts[at + 5]},
                            {"lent_bytes", task_counts[at + 6]},
                            {"borrowed_bytes", task_counts[at + 7]},
                            {"whole_device", task_counts[at + 8]},
                            {"device_seconds", static_cast<double>(task_counts[at + 9]) / 1e6},
                            {"oom_spills", task_counts[at + 10]},
                            {"retries", task_counts[at + 11]},
                            {"splits", task_counts[at + 12]},
                            {"steps_run_again_alone", task_counts[at + 13]}});
      }
      summary["per_task"] = std::move(per_task);
      char line[256];
      std::snprintf(line,
                    sizeof(line),
                    "spillway shuffle: %llu rows (%s) into %zu partitions on %d ranks (%s) in "
                    "%.2f s, %s/s; device peak %s of %s per rank",
                    static_cast<unsigned long long>(sums[2]),
                    format_bytes(bytes_mapped).c_str(),
                    args.partitions,
                    comm.size(),
                    args.mode.c_str(),
                    seconds,
                    format_bytes(static_cast<std::size_t>(per_second)).c_str(),
                    format_bytes(peaks[0]).c_str(),
                    format_bytes(device_memory).c_str());
      summary_line = line;
    });
  });
  if (!summary_line.empty()) {  // rank 0 of this process
    output.commit(written);
    std::fprintf(stderr, "%s\n", summary_line.c_str());
    warn_past_host_budget("spillway shuffle",
                          summary["host_over_budget_peak_max"].get<std::size_t>(),
                          args.host_memory,
                          host_memory);
    report_retry_coverage("spillway shuffle", summary);
    if (args.json) {
      std::cout << summary.dump() << std::endl;
    }
  }
  return static_cast<int>(exit_code::OK);
}

}  // namespace

command add_shuffle_command(CLI::App& parent) {
  auto args = std::make_shared<shuffle_arguments>();
  auto* app = parent.add_subcommand(
    "shuffle",
    "Hash-partition a dataset by key columns across ranks (in-process, or mpirun's processes) "
    "with the pull or push shuffle, within per-rank memory budgets");
  app->add_option("input", args->input, "Input dataset (file, directory or glob)")->required();
  app->add_option("-o,--output", args->output, "Output directory")->required();
  app->add_option("--by", args->by, "Key columns to hash, comma-separated")->required();
  app->add_option("--partitions", args->partitions, "Number of partitions")->required();
  app->add_option("--mode", args->mode, "pull or push (default push)");
  app->add_option("--ranks", args->ranks, "In-process ranks (default 1; under mpirun: 1)");
  app->add_option("--device-memory", args->device_memory, "Device budget per rank (512MiB)");
  app
    ->add_option("--backend",
                 args->backend,
                 "cpu (an emulated device per rank), cuda (the GPU; fails without one) or auto "
                 "(the GPU when there is one)")
    ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
    ->capture_default_str();
  app->add_option("--host-memory",
                  args->host_memory,
                  "Host budget per rank: spilled shards and I/O buffers together (2GiB)");
  app->add_option("--spill-dir", args->spill_dir, "Where spill files go (default $TMPDIR)");
  app->add_option("--batch-size", args->batch_size, "Target bytes of a read batch (64MiB)");
  app->add_option("--file-size", args->file_size, "Target bytes of an output file (256MiB)");
  app->add_option("--inbox-budget", args->inbox_budget, "Push: bytes in flight to a rank (64MiB)");
  app->add_option("--seed", args->seed, "Hash seed (default 0)");
  app
    ->add_option("--threads",
                 args->threads,
                 "Worker threads of this process, shared by its ranks (default: the cores this "
                 "process may use)")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS));
  app
    ->add_option("--tasks",
                 args->tasks,
                 "Map tasks per rank that read and partition input batches side by side (default: "
                 "one per worker thread, the threads shared by the ranks of this process)")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS));
  app
    ->add_option("--device-tasks",
                 args->device_tasks,
                 "Map tasks per rank that hold the device at once (the device semaphore), each "
                 "with its base lease")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS))
    ->capture_default_str();
  app->add_option("--format", args->format, "Input format (default: from the extension)");
  app->add_option("--checkpoint-dir",
                  args->checkpoint_dir,
                  "Persist every map task's shards here; a rerun with the same input, flags and "
                  "directory reads them back instead of reading and partitioning that input again "
                  "(remove the directory once the shuffle has succeeded)");
  app->add_option("--output-format", args->output_format, "Format of the output files")
    ->check(CLI::IsMember(OUTPUT_FORMAT_NAMES))
    ->capture_default_str();
  app->add_option("--compression", args->compression, "Parquet page compression of the output")
    ->check(CLI::IsMember(COMPRESSION_NAMES))
    ->capture_default_str();
  app->add_flag("--json", args->json, "Print a JSON summary on stdout");
  app->add_option("--report",
                  args->report,
                  "Write an HTML run report of each rank's device (bytes on each tier, leases, "
                  "spills, retries over time, and a lane per task) here, and the same data as "
                  "JSON beside it (the extension replaced by .json); with more than one rank, "
                  "rank r's goes to <name>.rank-<r>.html");
  app->add_flag("--overwrite", args->overwrite, "Replace the files of an existing output");
  app->add_option("--csv-types", args->csv_types, CSV_TYPES_HELP);
  return {app, [args] { return run_shuffle(*args); }};
}

}  // namespace spillway::cli
