/**
 * `spillway sort` across ranks (`--ranks N`, or under `mpirun`): every rank samples its share of
 * the input (for Parquet, an even share of its row groups), the ranks agree on splitters,
 * range-shuffle their rows and sort their range out of core on their own emulated device; rank r
 * writes `part-<r>-<n>.parquet`.
 */
#include "command_line.hpp"
#include "empty_output.hpp"
#include "output_directory.hpp"
#include "preflight.hpp"
#include "ranks.hpp"
#include "retry_guards.hpp"
#include "spill_failures.hpp"

#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/retry/copy_to_device.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/distributed_sort.hpp>
#include <spillway/spill/spill_directory.hpp>

#include <nlohmann/json.hpp>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <mutex>

namespace spillway::cli {
namespace {

/// The sort task's base lease, in input batches.
constexpr std::size_t BASE_LEASE_BATCHES = 4;
/// Output batches are at most this large.
constexpr std::size_t MAX_OUTPUT_BATCH = 64_MiB;

}  // namespace

int run_distributed_sort(distributed_sort_request const& request) {
  install_spill_cleanup_on_signals();
  auto const start         = std::chrono::steady_clock::now();
  auto const keys          = parse_sort_keys(request.by);
  auto const device_memory = parse_size_flag("--device-memory", request.device_memory);
  auto const host_memory   = parse_size_flag("--host-memory", request.host_memory);
  auto const batch_size    = parse_size_flag("--batch-size", request.batch_size);
  auto const file_size     = parse_file_size_flag(request.file_size);
  refuse_repeated_keys(keys);
  check_host_budget(host_memory);
  if (request.mode != "pull" && request.mode != "push") {
    throw usage_error("--shuffle-mode must be pull or push, not '" + request.mode + "'");
  }
  auto const input = describe_input(request.input, request.format, request.csv_types);
  refuse_output_holding_input(request.output, input.files);
  auto const& format  = input.format;
  auto const& names   = input.names;
  auto const resolved = resolve_sort_keys(keys, input.schema, request.input);
  auto const backend  = resolve_rank_backend(request.backend, request.ranks, device_memory);
  // A share of the device, and no larger than a rank's host budget holds beside its reader's
  // pages: the batch decoded (with the piece decoded past it) and its converted copy.
  std::size_t const scratch     = format == file_format::PARQUET && worker_threads() > 1
                                    ? parquet_decode_scratch_bytes(input.files)
                                    : 0;
  std::size_t const batch_bytes = std::max<std::size_t>(
    1,
    batch_within_host(std::min(batch_size, device_memory / DEVICE_SHARE_PER_BATCH),
                      host_memory,
                      2.0 + 1.0 / static_cast<double>(PARQUET_DECODE_PIECES),
                      scratch));
  check_spill_directory(request.spill_dir);

  std::mutex mutex;
  shared_output output(request.output, request.overwrite);
  std::vector<std::string> written;
  std::string summary_line;
  nlohmann::ordered_json summary;

  run_on_ranks(request.ranks, output, [&](communicator& comm) {
    rank_device rank(comm, device_memory, host_memory, request.spill_dir, backend);
    run_rank_work(comm, rank.environment().store(), [&] {
      auto& environment = rank.environment();
      auto& rank_host   = rank.host();
      auto& io_scratch  = rank.io_scratch();
      lease_request_options base_options;
      base_options.is_base  = true;
      auto const base_lease = rank.task().request_lease(
        std::min(device_memory, BASE_LEASE_BATCHES * batch_bytes), base_options);

      distributed_sort_options options;
      options.key_columns  = resolved.columns;
      options.orders       = resolved.orders;
      options.mode         = request.mode == "pull" ? shuffle_mode::PULL : shuffle_mode::PUSH;
      options.inbox_budget = device_memory / 4;
      options.sort.merge_budget_bytes           = device_memory / 2;
      options.sort.output_batch_bytes           = std::min({device_memory / DEVICE_SHARE_PER_BATCH,
                                                            MAX_OUTPUT_BATCH,
                                                            host_memory / HOST_SHARE_PER_OUTPUT});
      options.sort.strategy                     = parse_strategy(request.strategy);
      options.sort.coordinator                  = &environment.coordinator();
      options.sort.task                         = &rank.task();
      options.sort.check_output_order           = request.check_order;
      options.sort.testing_reverse_output_batch = testing_reverse_output_batch();

      auto const mine = input_of_rank(comm, input);
      // Read into host scratch, then onto the device under the OOM protocol.
      memory_resources const reader_resources{io_scratch};
      batch_writer_options writer_options;
      writer_options.directory         = output.staging();
      writer_options.target_file_bytes = file_size;
      char prefix[32];
      std::snprintf(prefix, sizeof(prefix), "part-%05d", comm.rank());
      writer_options.file_prefix         = prefix;
      writer_options.parquet.compression = parse_compression(request.compression);
      writer_options.format              = parse_output_format(request.output_format);
      writer_options.schema              = input.schema;  // string columns keep their Arrow type
      batch_writer writer(
        writer_options, names, environment.stream(), memory_resources{io_scratch});
      auto const stats = distributed_sort(
        comm,
        environment.store(),
        [&](std::function<void(std::unique_ptr<table>)> const& consume) {
          read_pieces(mine,
                      format,
                      batch_bytes,
                      reader_resources,
                      environment.stream(),
                      [&](std::unique_ptr<table> batch) {
                        for (auto& piece : copy_to_device(std::move(batch),
                                                          environment.coordinator(),
                                                          rank.task(),
                                                          environment.stream(),
                                                          environment.device())) {
                          consume(std::move(piece));
                        }
                      });
        },
        [&](table_view const& batch) { writer.write(batch); },
        options,
        environment.stream(),
        memory_resources{environment.device()},
        rank_host);
      auto my_files = writer.close();
      maybe_fail_after_writing(comm.rank());
      auto const spills = environment.store().statistics();
      auto const sums =
        sum_over_ranks(comm,
                       {stats.input_rows,
                        stats.sort.input_bytes,
                        stats.output_rows,
                        stats.shuffle.bytes_written,
                        spills.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes,
                        spills.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes +
                          spills.between(spill_tier::HOST, spill_tier::DISK).raw_bytes,
                        environment.injected_failures()});
      auto const peaks = max_over_ranks(comm,
                                        {environment.device_peak_bytes(),
                                         environment.host_tier().statistics().peak_bytes,
                                         stats.output_rows,
                                         static_cast<std::uint64_t>(stats.sample_time.count()),
                                         static_cast<std::uint64_t>(stats.shuffle_time.count()),
                                         static_cast<std::uint64_t>(stats.sort_time.count()),
                                         stats.input_rows});
      if (comm.rank() == 0 && sums[2] == 0) {  // no rows: one file still carries the columns
        my_files.push_back(write_empty_file(
          writer_options, input.schema, environment.stream(), memory_resources{io_scratch}));
      }
      auto all_files = gather_names(comm, my_files);
      if (sums[0] != sums[2]) {
        throw std::runtime_error("distributed sort wrote " + std::to_string(sums[2]) + " rows of " +
                                 std::to_string(sums[0]) + " read");
      }
      if (comm.rank() != 0) {
        return;
      }
      double const seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      std::lock_guard lock(mutex);
      written = std::move(all_files);
      summary = {{"input", request.input},
                 {"output", request.output},
                 {"by", request.by},
                 {"ranks", comm.size()},
                 {"transport", launched_by_mpirun() ? "mpi" : "in-process"},
                 {"backend", std::string{to_string(backend)}},
                 {"shuffle_mode", request.mode},
                 {"rows", sums[0]},
                 {"bytes", sums[1]},
                 {"seconds", seconds},
                 {"rows_per_second", seconds > 0 ? static_cast<double>(sums[0]) / seconds : 0.0},
                 {"largest_rank_rows", peaks[2]},
                 {"rows_read_max_rank", peaks[6]},
                 {"sample_seconds_max", static_cast<double>(peaks[3]) * 1e-9},
                 {"shuffle_seconds_max", static_cast<double>(peaks[4]) * 1e-9},
                 {"sort_seconds_max", static_cast<double>(peaks[5]) * 1e-9},
                 {"shuffled_bytes", sums[3]},
                 {"spilled_device_to_host_bytes", sums[4]},
                 {"spilled_to_disk_bytes", sums[5]},
                 {"device_memory_per_rank", device_memory},
                 {"device_peak_max", peaks[0]},
                 {"host_memory_per_rank", host_memory},
                 {"host_peak_max", peaks[1]},
                 {"oom_injected", sums[6]},
                 {"output_files", written.size()}};
      char line[256];
      std::snprintf(line,
                    sizeof(line),
                    "spillway sort: %llu rows (%s) on %d ranks in %.2f s (%.0f rows/s), largest "
                    "rank %llu rows, device peak %s of %s per rank, %zu file(s) in %s",
                    static_cast<unsigned long long>(sums[0]),
                    format_bytes(sums[1]).c_str(),
                    comm.size(),
                    seconds,
                    seconds > 0 ? static_cast<double>(sums[0]) / seconds : 0.0,
                    static_cast<unsigned long long>(peaks[2]),
                    format_bytes(peaks[0]).c_str(),
                    format_bytes(device_memory).c_str(),
                    written.size(),
                    request.output.c_str());
      summary_line = line;
    });
  });
  if (!summary_line.empty()) {
    output.commit(written);
    std::fprintf(stderr, "%s\n", summary_line.c_str());
    report_retry_coverage("spillway sort", summary);
    if (request.json) {
      std::cout << summary.dump() << std::endl;
    }
  }
  return static_cast<int>(exit_code::OK);
}

}  // namespace spillway::cli
