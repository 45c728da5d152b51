/**
 * `spillway sort`: reads a dataset, sorts it with `external_sorter` on a device of
 * `--device-memory` (emulated, or a CUDA GPU's memory with `--backend cuda`) that spills through a
 * spill store (host budget `--host-memory`, disk under
 * `--spill-dir`), and writes Parquet (or CSV) files that appear only once all of them are
 * complete.
 *
 * On a terminal it redraws a progress line on stderr; `--report` records the run over time and
 * writes an HTML report with charts and the same data as JSON beside it.
 */
#include "command_line.hpp"
#include "commands.hpp"
#include "empty_output.hpp"
#include "output_directory.hpp"
#include "preflight.hpp"
#include "ranks.hpp"
#include "report_gauges.hpp"
#include "retry_guards.hpp"
#include "sort_tasks.hpp"
#include "spill_failures.hpp"

#include <spillway/core/task_event_counter.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/runtime/run_report.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/copy.hpp>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway::cli {
namespace {

/// The least rows one batch must hold for the sort to make progress.
constexpr std::size_t MIN_BATCH_ROWS = 64;
/// Characters assumed per string value when the budget is checked before reading.
constexpr std::size_t MIN_STRING_CHARS = 16;
/// Output batches are at most this large, whatever the device.
constexpr std::size_t MAX_OUTPUT_BATCH = 64_MiB;

/**
 * @return how many readers (at least one, at most `threads`) the host budget holds, each with
 * `batch_bytes` of decoded batches and `scratch` of its format's own: the batch ready for the
 * sort, and for each reader the batch it decodes while its converted copy is made (or one
 * converted, waiting its turn), a piece of rows decoded past it (`PARQUET_DECODE_PIECES`), and
 * its scratch
 */
std::size_t readers_within(std::size_t host_memory,
                           std::size_t batch_bytes,
                           std::size_t scratch,
                           std::size_t threads) {
  auto const share = static_cast<std::size_t>(static_cast<double>(host_memory) * READER_HOST_SHARE);
  std::size_t readers      = 1;
  std::size_t const reader = 2 * batch_bytes + batch_bytes / PARQUET_DECODE_PIECES + scratch;
  while (readers < threads && batch_bytes + (readers + 1) * reader <= share) {
    ++readers;
  }
  return readers;
}

/// How often the progress line is redrawn.
constexpr std::chrono::milliseconds PROGRESS_PERIOD{200};

struct sort_arguments {
  std::string input;
  std::string output;
  std::string by;
  std::string device_memory = "512MiB";
  std::string host_memory   = "2GiB";
  std::string spill_dir;
  std::string batch_size = "128MiB";
  std::string file_size  = "256MiB";
  std::string strategy   = "auto";
  std::string format;
  std::string report;
  std::size_t threads       = 0;  ///< 0: the cores this process may use
  std::size_t tasks         = 0;  ///< 0: one per worker thread
  std::size_t device_tasks  = DEFAULT_DEVICE_TASKS;
  int ranks                 = 1;       ///< in-process ranks of a distributed sort
  std::string shuffle_mode  = "push";  ///< its range shuffle
  std::string compression   = DEFAULT_COMPRESSION;
  std::string backend       = "cpu";
  std::string output_format = "parquet";
  bool json                 = false;
  bool overwrite            = false;
  bool no_order_check       = false;
  std::string csv_types;  ///< --csv-types
};

/** @return a lower bound of the bytes of one row of `schema` on the device */
std::size_t min_row_bytes(table_schema const& schema) {
  std::size_t bytes = 0;
  for (auto const& column : schema) {
    bytes +=
      is_fixed_width(column.type) ? size_of(column.type) : sizeof(std::int64_t) + MIN_STRING_CHARS;
  }
  return std::max<std::size_t>(bytes, 1);
}

/** @brief What the sort has done so far; written by the sorting thread, read by observers. */
struct sort_progress {
  std::atomic<bool> writing{false};           ///< false while reading, true once output starts
  std::atomic<std::size_t> rows_read{0};      ///< rows pushed into the sorter
  std::atomic<std::size_t> bytes_read{0};     ///< bytes of the batches pushed
  std::atomic<std::size_t> rows_sorted{0};    ///< rows to write (known once reading ends)
  std::atomic<std::size_t> rows_written{0};   ///< rows handed to the writer
  std::atomic<std::size_t> bytes_written{0};  ///< bytes of the batches written
};

/** @return the bytes of the files of `source` (a file or a directory), or 0 when unknown */
std::size_t input_file_bytes(std::string const& source) {
  std::error_code error;
  if (std::filesystem::is_regular_file(source, error)) {
    auto const size = std::filesystem::file_size(source, error);
    return error ? 0 : static_cast<std::size_t>(size);
  }
  if (!std::filesystem::is_directory(source, error)) {
    return 0;
  }
  std::size_t total = 0;
  for (auto it = std::filesystem::recursive_directory_iterator(source, error);
       !error && it != std::filesystem::recursive_directory_iterator();
       it.increment(error)) {
    if (it->is_regular_file(error)) {
      total += static_cast<std::size_t>(it->file_size(error));
    }
  }
  return total;
}

/** @return "1:05" or "1:02:03" */
std::string format_duration(double seconds) {
  auto const total   = static_cast<long long>(seconds + 0.5);
  auto const hours   = total / 3600;
  auto const minutes = (total / 60) % 60;
  char text[32];
  if (hours > 0) {
    std::snprintf(text, sizeof(text), "%lld:%02lld:%02lld", hours, minutes, total % 60);
  } else {
    std::snprintf(text, sizeof(text), "%lld:%02lld", minutes, total % 60);
  }
  return text;
}

/**
 * @brief Redraws one progress line on stderr every `PROGRESS_PERIOD` from its own thread: rows,
 * bytes, rate, ETA and the bytes on each spill tier. Erases the line when destroyed.
 *
 * The ETA is known once reading ends (rows written of rows sorted, with reading counted as half
 * of the work); while reading it is shown when the input's file bytes are known and the bytes
 * read so far are a fair measure of them (the caller passes 0 unless the input is CSV), else
 * "?".
 */
class progress_bar {
 public:
  progress_bar(sort_progress const& progress,
               std::size_t input_bytes,
               std::function<std::size_t(spill_tier)> tier_bytes)
    : progress_(progress),
      input_bytes_(input_bytes),
      tier_bytes_(std::move(tier_bytes)),
      start_(std::chrono::steady_clock::now()),
      thread_([this] { run(); }) {}
  ~progress_bar() {
    {
      std::lock_guard lock{mutex_};
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
    std::fputs("\r\033[K", stderr);
    std::fflush(stderr);
  }
  progress_bar(progress_bar const&)            = delete;
  progress_bar& operator=(progress_bar const&) = delete;
  progress_bar(progress_bar&&)                 = delete;
  progress_bar& operator=(progress_bar&&)      = delete;

 private:
  void run() {
    std::unique_lock lock{mutex_};
    draw();  // at once, so that even a short run shows its progress line
    while (!wake_.wait_for(lock, PROGRESS_PERIOD, [this] { return stopping_; })) {
      draw();
    }
  }

  void draw() const {
    double const seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    bool const writing     = progress_.writing.load();
    std::size_t const rows = writing ? progress_.rows_written.load() : progress_.rows_read.load();
    std::size_t const bytes =
      writing ? progress_.bytes_written.load() : progress_.bytes_read.load();
    double const rate = seconds > 0.0 ? static_cast<double>(rows) / seconds : 0.0;
    // The fraction of the whole run done: reading is the first half, writing the second.
    double done = -1.0;
    if (writing) {
      auto const sorted = progress_.rows_sorted.load();
      done =
        0.5 + (sorted > 0 ? 0.5 * static_cast<double>(rows) / static_cast<double>(sorted) : 0.0);
    } else if (input_bytes_ > 0 && bytes > 0 && bytes <= input_bytes_) {
      done = 0.5 * static_cast<double>(bytes) / static_cast<double>(input_bytes_);
    }
    std::string const eta =
      done > 0.0 && done < 1.0 ? format_duration(seconds * (1.0 - done) / done) : "?";
    std::fprintf(stderr,
                 "\r\033[K%s %zu rows, %s, %.0f rows/s, ETA %s | device %s host %s disk %s",
                 writing ? "writing" : "reading",
                 rows,
                 format_bytes(bytes).c_str(),
                 rate,
                 eta.c_str(),
                 format_bytes(tier_bytes_(spill_tier::DEVICE)).c_str(),
                 format_bytes(tier_bytes_(spill_tier::HOST)).c_str(),
                 format_bytes(tier_bytes_(spill_tier::DISK)).c_str());
    std::fflush(stderr);
  }

  sort_progress const& progress_;
  std::size_t const input_bytes_;
  std::function<std::size_t(spill_tier)> const tier_bytes_;
  std::chrono::steady_clock::time_point const start_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once everything above is set
};

nlohmann::ordered_json transfer_json(spill_statistics const& spilled,
                                     spill_tier from,
                                     spill_tier to) {
  auto const& moved = spilled.between(from, to);
  return {{"count", moved.count}, {"bytes", moved.raw_bytes}, {"stored_bytes", moved.stored_bytes}};
}

int run_sort(sort_arguments const& args) {
  (void)use_worker_threads(args.threads);
  if (args.ranks > 1 || launched_by_mpirun()) {
    if (!args.report.empty()) {
      throw usage_error(
        "--report is written by a sort in one process only: drop --ranks (or "
        "mpirun) or --report");
    }
    return run_distributed_sort({args.input,
                                 args.output,
                                 args.by,
                                 args.device_memory,
                                 args.host_memory,
                                 args.spill_dir,
                                 args.batch_size,
                                 args.file_size,
                                 args.strategy,
                                 args.format,
                                 args.shuffle_mode,
                                 args.compression,
                                 args.output_format,
                                 args.backend,
                                 args.ranks,
                                 args.json,
                                 args.overwrite,
                                 !args.no_order_check,
                                 args.csv_types});
  }
  install_spill_cleanup_on_signals();
  auto const start   = std::chrono::steady_clock::now();
  auto const backend = resolve_device_backend(args.backend);

  auto const keys          = parse_sort_keys(args.by);
  auto const device_memory = parse_size_flag("--device-memory", args.device_memory);
  auto const host_memory   = parse_size_flag("--host-memory", args.host_memory);
  auto const batch_size    = parse_size_flag("--batch-size", args.batch_size);
  auto const file_size     = parse_file_size_flag(args.file_size);
  refuse_repeated_keys(keys);
  check_host_budget(host_memory);
  auto const format    = resolve_format(args.input, args.format);
  auto const csv_types = parse_csv_types(args.csv_types, format);
  refuse_output_holding_input(args.output, expand_dataset(args.input));
  std::optional<report_files> report;
  if (!args.report.empty()) {
    report = check_report_files(args.report);
  }
  check_spill_directory(args.spill_dir);
  output_directory directory{args.output, args.overwrite};

  // The device, its OOM protocol and lease arbiter, and the spill store (host budget, disk under
  // --spill-dir) come from one `device_environment`; the I/O scratch and the keys kept on the
  // host are counted in the same host budget as the store's host tier (below).
  sort_progress progress;
  // The report's recorder: made before the environment, whose store records into it, and stopped
  // before the environment goes (its gauges read the store).
  std::optional<run_recorder> recorder;
  std::optional<device_environment> environment;
  if (report) {
    run_recorder_options recorder_options;
    recorder_options.interval = REPORT_PERIOD;
    recorder_options.title    = "spillway sort " + args.input;
    recorder.emplace(
      environment_gauges(
        [&environment]() -> device_environment& { return *environment; },
        [&progress] { return progress.rows_read.load() + progress.rows_written.load(); },
        [&progress] { return progress.bytes_read.load() + progress.bytes_written.load(); }),
      recorder_options);
  }
  // Each task's events counted for the JSON summary, then passed on to the report.
  task_event_counter task_events{recorder ? &recorder->events() : nullptr};
  // The sort's tasks hold leases from the device's arbiter, and the device runs the OOM protocol
  // for them (spill, retry, roll back, split), all recorded for the run report.
  device_environment_options environment_options;
  environment_options.backend       = backend;
  environment_options.device_memory = device_memory;
  environment_options.host_memory   = host_memory;
  environment_options.spill_root    = args.spill_dir;
  environment_options.events        = &task_events;
  try {
    environment.emplace(environment_options);
  } catch (invalid_argument const& failure) {  // a GPU with less free memory than asked for
    throw usage_error("--device-memory " + args.device_memory + ": " +
                      user_message(failure.what()));
  }
  statistics_resource_adaptor io_scratch{io_scratch_host(*environment)};
  auto& store            = environment->store();
  auto& coordinator      = environment->coordinator();
  auto& arbiter          = environment->arbiter();
  auto const stream      = environment->stream();
  auto const& host_tier  = environment->host_tier();
  auto device_with_spill = environment->device();
  recorder_stopper stop_recorder{recorder ? &*recorder : nullptr};
  if (recorder) {
    recorder->start();
  }
  std::optional<progress_bar> bar;
  if (::isatty(STDERR_FILENO) != 0) {
    // Decoded bytes measure CSV text roughly; Parquet and Arrow decode to far more than they hold.
    auto const measurable = format == file_format::CSV ? input_file_bytes(args.input) : 0;
    bar.emplace(progress, measurable, [&environment, &store](spill_tier tier) {
      return tier == spill_tier::DEVICE ? environment->device_used_bytes() : store.bytes_on(tier);
    });
  }

  // Decoded on threads of their own into host memory, ahead of the sort, which copies each batch
  // to the device (as a GPU's input arrives too): pieces of a Parquet dataset side by side, as
  // many readers (at most one per pool thread) as their batches and pages fit in a share of the
  // host budget (`readers_within`); one reader, one batch ahead, for the other formats. A batch
  // is a share of the device, and no larger than one reader and the batch ready beside it let
  // the host budget hold (a device larger than the host would have them go past it).
  std::size_t const scratch = format == file_format::PARQUET && worker_threads() > 1
                                ? parquet_decode_scratch_bytes(expand_dataset(args.input))
                                : 0;
  std::size_t const batch_bytes =
    batch_within_host(std::min(batch_size, device_memory / DEVICE_SHARE_PER_BATCH),
                      host_memory,
                      3.0 + 1.0 / static_cast<double>(PARQUET_DECODE_PIECES),
                      scratch);
  std::size_t const readers = readers_within(host_memory, batch_bytes, scratch, worker_threads());
  std::size_t readers_used  = 1;
  auto reader               = read_dataset_ahead(args.input,
                                   format,
                                   std::max<std::size_t>(batch_bytes, 1),
                                   memory_resources{io_scratch},
                                   default_stream(),
                                   csv_types,
                                   readers,
                                   &readers_used);
  auto const schema         = reader->schema();  // a copy: it outlives the reader
  auto const resolved       = resolve_sort_keys(keys, schema, args.input);
  auto const row_bytes      = min_row_bytes(schema);
  auto const needed         = DEVICE_SHARE_PER_BATCH * MIN_BATCH_ROWS * row_bytes;
  if (device_memory < needed) {
    throw usage_error("--device-memory " + format_bytes(device_memory) + " is too small for " +
                      args.input + ": a batch (1/" + std::to_string(DEVICE_SHARE_PER_BATCH) +
                      " of the device) must hold " + std::to_string(MIN_BATCH_ROWS) +
                      " rows of at least " + std::to_string(row_bytes) + " B; give at least " +
                      format_bytes(needed));
  }

  external_sort_options options;
  options.key_columns        = resolved.columns;
  options.orders             = resolved.orders;
  options.merge_budget_bytes = device_memory / 2;
  // Two output batches are on the host at once beside the writer's row groups (see below).
  options.output_batch_bytes           = std::min({device_memory / DEVICE_SHARE_PER_BATCH,
                                                   MAX_OUTPUT_BATCH,
                                                   host_memory / HOST_SHARE_PER_OUTPUT});
  options.strategy                     = parse_strategy(args.strategy);
  options.check_output_order           = !args.no_order_check;
  options.testing_reverse_output_batch = testing_reverse_output_batch();
  // The tasks (each its own sorter; merges ask for leases beyond the base when they need them),
  // --device-tasks of them on the device at once; task 1 merges everyone's runs.
  std::size_t const num_tasks = args.tasks == 0 ? worker_threads() : args.tasks;
  sort_tasks tasks{*environment,
                   options,
                   num_tasks,
                   args.device_tasks,
                   batch_bytes,
                   environment->budgeted_host(),
                   &task_events};
  std::size_t input_batches = 0;
  explaining_spill_failures(store, [&] {
    tasks.run(
      [&]() -> std::unique_ptr<table> {
        auto decoded = reader->next();
        input_batches += decoded ? 1U : 0U;
        return decoded;
      },
      [&](std::size_t rows, std::size_t bytes) {
        progress.rows_read += rows;
        progress.bytes_read += bytes;
      });
    reader.reset();
  });
  auto& sorter = tasks.merged();
  // The merge and the output are task 1's, on the device.
  task_context::thread_binding const bind_merge{tasks.merging_task()};
  std::optional<device_semaphore::guard> merging;
  merging.emplace(tasks.semaphore(), tasks.merging_task());
  progress.rows_sorted = progress.rows_read.load();
  progress.writing     = true;

  std::vector<std::string> names;
  for (auto const& column : schema) {
    names.push_back(column.name);
  }
  batch_writer_options writer_options;
  writer_options.directory           = args.output;
  writer_options.format              = parse_output_format(args.output_format);
  writer_options.target_file_bytes   = file_size;
  writer_options.parquet.compression = parse_compression(args.compression);
  // As many as the pool (any number of them lays the file out alike, whatever --threads says),
  // within the host budget: the row groups being filled and encoded take at most half of it, less
  // the output batches on the host beside them (one handed to the writer, one copied off the
  // device), and at least 1/8 of it (the writer fits its threads and row groups to that).
  writer_options.parquet.encode_threads = worker_threads();
  writer_options.parquet.memory_bytes   = std::max(
    host_memory / 8, host_memory / 2 - std::min(host_memory / 2, 2 * options.output_batch_bytes));
  writer_options.schema = schema;  // string columns keep their Arrow type
  batch_writer writer{
    writer_options, names, stream, memory_resources{device_with_spill, io_scratch}};
  explaining_spill_failures(store, [&] {
    while (auto batch = sorter.next()) {
      progress.rows_written += batch->num_rows();
      progress.bytes_written += batch->allocated_bytes();
      // Off the device at once, then encoded on the writer's thread while the next batch is
      // merged (a GPU's output is encoded from host memory too).
      auto on_host = spillway::copy(batch->view(), stream, io_scratch);
      batch.reset();
      writer.write(std::move(on_host));
    }
  });
  merging.reset();
  auto written = writer.close();
  if (written.empty()) {  // no rows: one file still carries the columns
    written.push_back(
      write_empty_file(writer_options, schema, stream, memory_resources{io_scratch}));
  }
  directory.commit(written);
  bar.reset();
  if (recorder) {
    recorder->stop();
    recorder->write_run_report(report->html, report->json);
  }

  double const seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  auto const& stats  = sorter.statistics();
  auto const spilled = store.statistics();
  double const rows_per_second =
    seconds > 0.0 ? static_cast<double>(stats.output_rows) / seconds : 0.0;
  auto const to_host = spilled.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes;
  auto const to_disk = spilled.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes +
                       spilled.between(spill_tier::HOST, spill_tier::DISK).raw_bytes;
  std::fprintf(stderr,
               "spillway sort: %zu rows (%s) in %.2f s (%.0f rows/s), strategy %s, %zu rounds, "
               "%.2f copies/byte, %s device peak %s of %s, host peak %s of %s, spilled %s to host "
               "and %s to disk, %zu file(s) in %s\n",
               stats.output_rows,
               format_bytes(stats.input_bytes).c_str(),
               seconds,
               rows_per_second,
               to_string(stats.strategy_used),
               stats.rounds,
               stats.copies_per_input_byte(),
               to_string(backend).data(),
               format_bytes(environment->device_peak_bytes()).c_str(),
               format_bytes(device_memory).c_str(),
               format_bytes(host_tier.statistics().peak_bytes).c_str(),
               format_bytes(host_memory).c_str(),
               format_bytes(to_host).c_str(),
               format_bytes(to_disk).c_str(),
               written.size(),
               args.output.c_str());
  warn_past_host_budget(
    "spillway sort", spilled.host_over_budget_peak, args.host_memory, host_memory);
  if (args.json) {
    nlohmann::ordered_json tiers;
    for (auto from : {spill_tier::DEVICE, spill_tier::HOST, spill_tier::DISK}) {
      for (auto to : {spill_tier::DEVICE, spill_tier::HOST, spill_tier::DISK}) {
        if (from != to) {
          tiers[std::string{to_string(from)} + "_to_" + std::string{to_string(to)}] =
            transfer_json(spilled, from, to);
        }
      }
    }
    // Every task's roll-backs: its copies onto the device and its sorter's steps (the merge's
    // are task 1's).
    auto const task_summaries = tasks.summaries();
    std::size_t retries       = 0;
    std::size_t splits        = 0;
    for (auto const& task : task_summaries) {
      retries += task.retries;
      splits += task.splits;
    }
    nlohmann::ordered_json summary{
      {"input", args.input},
      {"output", args.output},
      {"by", args.by},
      {"rows", stats.output_rows},
      {"bytes", stats.input_bytes},
      {"seconds", seconds},
      {"rows_per_second", rows_per_second},
      {"strategy", to_string(stats.strategy_used)},
      {"strategy_requested", args.strategy},
      {"rounds", stats.rounds},
      {"copies_per_input_byte", stats.copies_per_input_byte()},
      {"backend", std::string{to_string(backend)}},
      {"device_memory", device_memory},
      {"device_peak", environment->device_peak_bytes()},
      {"host_memory", host_memory},
      {"host_peak", host_tier.statistics().peak_bytes},
      {"io_scratch_peak", io_scratch.statistics().peak_bytes},
      {"host_over_budget_peak", spilled.host_over_budget_peak},
      {"host_bookkeeping_peak", spilled.bookkeeping_peak},
      {"spilled", tiers},
      {"disk_compression", spilled.disk_compression_ratio()},
      {"retries", retries},
      {"splits", splits},
      {"spill_callbacks", coordinator.statistics().failures},
      {"lease_waits", arbiter.total_statistics().waits},
      {"input_batches", input_batches},
      {"readers", readers_used},
      {"batch_bytes", batch_bytes},
      {"output_batches", stats.output_batches},
      {"output_batch_bytes", options.output_batch_bytes},
      {"output_files", written.size()},
      {"order_check_seconds", stats.order_check_seconds},
      {"threads", worker_threads()},
      {"tasks", num_tasks},
      {"device_tasks", args.device_tasks},
      {"oom_injected", environment->injected_failures()},
    };
    nlohmann::ordered_json per_task = nlohmann::ordered_json::array();
    for (auto const& task : task_summaries) {
      per_task.push_back(
        {{"task", task.id.value},
         {"batches", task.batches},
         {"rows", task.rows},
         {"bytes", task.bytes},
         {"chunks", task.chunks},
         {"semaphore_acquires", task_events.count(task.id, event_kind::SEMAPHORE_ACQUIRED)},
         {"oom_spills", task_events.count(task.id, event_kind::OOM_SPILLED)},
         {"retries", task.retries},
         {"splits", task.splits},
         {"leases", task.leases.grants},
         {"lease_bytes", task.leases.granted_bytes},
         {"lease_waits", task.leases.waits},
         {"lent_bytes", task.leases.lent_bytes},
         {"borrowed_bytes", task.leases.borrowed_bytes},
         {"whole_device", task.leases.whole_device}});
    }
    summary["per_task"] = std::move(per_task);
    report_retry_coverage("spillway sort", summary);
    std::cout << summary.dump() << '\n';
  } else {
    nlohmann::ordered_json unused;
    report_retry_coverage("spillway sort", unused);
  }
  return static_cast<int>(exit_code::OK);
}

}  // namespace

command add_sort_command(CLI::App& parent) {
  auto args = std::make_shared<sort_arguments>();
  auto* app = parent.add_subcommand(
    "sort",
    "Sort a dataset (a file, a directory or a glob; Parquet, CSV or Arrow IPC) into Parquet (or "
    "CSV) files "
    "on a device of --device-memory (emulated, or a GPU's with --backend cuda) that spills to "
    "host (--host-memory) and disk "
    "(--spill-dir). Output files appear only when all are complete.");
  app->add_option("input", args->input, "The dataset to sort")->required();
  app->add_option("-o,--output", args->output, "Output directory")->required();
  app
    ->add_option("--by",
                 args->by,
                 "Key columns: col[:asc|desc][:nulls_first|nulls_last],... (default asc, "
                 "nulls_first)")
    ->required();
  app->add_option("--device-memory", args->device_memory, "Device capacity (on a GPU: a limit)")
    ->capture_default_str();
  app
    ->add_option("--backend",
                 args->backend,
                 "cpu (an emulated device), cuda (the GPU; fails without one) or auto (the GPU "
                 "when there is one)")
    ->check(CLI::IsMember({"cpu", "cuda", "auto"}))
    ->capture_default_str();
  app
    ->add_option("--host-memory",
                 args->host_memory,
                 "Host budget: the spill store's host tier and the I/O buffers together")
    ->capture_default_str();
  app->add_option(
    "--spill-dir", args->spill_dir, "Where spill files go (default: $TMPDIR or /tmp)");
  app
    ->add_option("--batch-size",
                 args->batch_size,
                 "Target bytes of each read batch (capped at 1/8 of --device-memory)")
    ->capture_default_str();
  app->add_option("--file-size", args->file_size, "Target size of each output file")
    ->capture_default_str();
  app->add_option("--strategy", args->strategy, "merge, sample or auto (chosen at finish)")
    ->check(CLI::IsMember({"merge", "sample", "auto"}))
    ->capture_default_str();
  app
    ->add_option("--threads",
                 args->threads,
                 "Worker threads of the sort kernels and the Parquet output (default: the cores "
                 "this process may use)")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS));
  app
    ->add_option("--tasks",
                 args->tasks,
                 "Tasks that read and sort input batches side by side, each into runs of its "
                 "own, merged by the first (default: one per worker thread)")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS));
  app
    ->add_option("--device-tasks",
                 args->device_tasks,
                 "Tasks that hold the device at once (the device semaphore), each with its base "
                 "lease")
    ->check(CLI::Range(std::size_t{1}, MAX_THREADS))
    ->capture_default_str();
  app->add_option("--format", args->format, "Input format (default: from the extension)")
    ->check(CLI::IsMember({"parquet", "csv", "arrow", "arrows"}));
  app
    ->add_option("--ranks",
                 args->ranks,
                 "Sort across this many in-process ranks (sample, range shuffle, local sort; rank "
                 "r writes part-<r>-*). Under mpirun the ranks are its processes")
    ->check(CLI::Range(1, 256))
    ->capture_default_str();
  app->add_option("--shuffle-mode", args->shuffle_mode, "Across ranks: pull or push shuffle")
    ->check(CLI::IsMember({"pull", "push"}))
    ->capture_default_str();
  app->add_option("--output-format", args->output_format, "Format of the output files")
    ->check(CLI::IsMember(OUTPUT_FORMAT_NAMES))
    ->capture_default_str();
  app->add_option("--compression", args->compression, "Parquet page compression of the output")
    ->check(CLI::IsMember(COMPRESSION_NAMES))
    ->capture_default_str();
  app->add_flag("--json", args->json, "Print a JSON summary on stdout");
  app->add_option("--report",
                  args->report,
                  "Write an HTML run report (charts of device, host and disk bytes, leases, "
                  "spills and retries over time) here, and the same data as JSON beside it "
                  "(the extension replaced by .json)");
  app->add_flag("--no-order-check",
                args->no_order_check,
                "Do not check the order of the output as it is written (on by default: an output "
                "row out of order fails the sort with no output)");
  app->add_flag("--overwrite", args->overwrite, "Replace the files of an existing output dataset");
  app->add_option("--csv-types", args->csv_types, CSV_TYPES_HELP);
  return command{app, [args] { return run_sort(*args); }};
}

}  // namespace spillway::cli
