/**
 * @file ranks.hpp
 * @brief What the multi-rank subcommands share: running one body per rank (the processes of an
 * `mpirun`, or threads of this process), a rank's share of the input, and the small
 * exchanges that turn per-rank results into one summary.
 */
#pragma once

#include "command_line.hpp"
#include "output_directory.hpp"
#include "spill_failures.hpp"

#include <spillway/io/file_format.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/communicator.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway::cli {

/**
 * @brief The output directory of a multi-rank command. Every rank writes its files into a hidden
 * staging directory inside it; only `commit()`, once every rank has finished, moves them in. A
 * command that fails on any rank leaves no visible file behind, however far the other ranks got.
 *
 * The process of rank 0 claims the output directory (`output_directory::claim`: its lock is held
 * by that process for the job), creates the staging directory (removing one a killed run left
 * behind), commits, and removes it again on failure.
 */
class shared_output {
 public:
  /** @see output_directory */
  shared_output(std::string path, bool overwrite);
  /** @brief Without `commit()`: removes the staging directory and what it holds. */
  ~shared_output();
  shared_output(shared_output const&)            = delete;
  shared_output& operator=(shared_output const&) = delete;
  shared_output(shared_output&&)                 = delete;
  shared_output& operator=(shared_output&&)      = delete;

  /** @brief Every rank calls it first: guards the directory, then waits for every rank. */
  void open(communicator& comm);
  /** @return where the ranks write their files until `commit()` */
  [[nodiscard]] std::string const& staging() const noexcept { return staging_; }
  /**
   * @brief Moves `written` (every rank's files, in `staging()`) into the directory and keeps
   * them, on the process of rank 0.
   * @return the files' final paths
   */
  std::vector<std::string> commit(std::vector<std::string> const& written);
  /**
   * @brief What the destructor does on failure, now: this process's part of the job failed.
   * Under mpirun it must come before MPI's teardown, which waits for every process (a failed peer
   * may never come), while mpirun ends the processes of a failed job with SIGTERM and, a second
   * later, SIGKILL, which no cleanup survives. Later calls, and the destructor, do nothing more.
   */
  void abandon() noexcept;

 private:
  void release(bool failing) noexcept;

  std::string path_;
  std::string staging_;
  bool overwrite_;
  int unwinding_;  ///< exceptions in flight at construction
  bool owns_staging_ = false;
  bool committed_    = false;
  bool released_     = false;
  std::mutex mutex_;
  std::unique_ptr<output_directory> directory_;
  /// Removes the staging directory when mpirun ends this process with SIGTERM because another
  /// rank failed (its destructor would not run).
  std::unique_ptr<removed_on_signal> staging_cleanup_;
  /// Likewise the output directory, when this command created it and only when it is empty.
  std::unique_ptr<removed_on_signal> output_cleanup_;
};

/**
 * @return the device ranks compute on, from `--backend` as `resolve_device_backend` reads it
 * (under mpirun too: the communicator stages a GPU's shards through host memory)
 * @param ranks in-process ranks, which share the GPU: on CUDA their `device_memory` bytes each
 * must fit in its free memory together. Under mpirun (one rank per process) the processes on this
 * machine must fit in its total memory together, and each in its free memory.
 * @throws usage_error naming --device-memory; not_supported for `cuda` without a usable GPU
 */
device_backend resolve_rank_backend(std::string const& name, int ranks, std::size_t device_memory);

/**
 * @return where a command's I/O scratch goes: the environment's host, counted in the host budget
 * with the spill store's host tier (`device_environment::budgeted_host`), so that `--host-memory`
 * covers decoded input, Arrow's buffers and encoded output too. On the emulated device that host
 * shares its cache with the device: the blocks a decode frees serve the next shards or sorted
 * runs on the device without fresh pages, and the other way round.
 */
resource_ref io_scratch_host(device_environment& environment);

/**
 * @brief One rank's device (emulated or CUDA; its OOM protocol, lease arbiter and spill store)
 * and its task, bound to the constructing thread, plus host memory for I/O scratch (shared
 * with the emulated device's cache) and for control messages and keys. The environment
 * records its events into `events` when it is not null (which must outlive the rank).
 * @note Construct it on the rank's own thread.
 */
class rank_device {
 public:
  rank_device(communicator const& comm,
              std::size_t device_memory,
              std::size_t host_memory,
              std::string const& spill_dir,
              device_backend backend = device_backend::EMULATED,
              event_sink* events     = nullptr);

  [[nodiscard]] device_environment& environment() noexcept { return environment_; }
  [[nodiscard]] task_context& task() noexcept { return task_.context(); }
  /** @return plain host memory for this rank's control messages and keys */
  [[nodiscard]] host_memory_resource& host() noexcept { return host_; }
  /** @return host memory for reader and writer scratch, counted */
  [[nodiscard]] statistics_resource_adaptor& io_scratch() noexcept { return io_scratch_; }

 private:
  static device_environment_options options(std::size_t device_memory,
                                            std::size_t host_memory,
                                            std::string const& spill_dir,
                                            device_backend backend,
                                            event_sink* events);

  device_environment environment_;
  device_task task_;
  task_context::thread_binding bind_;
  host_memory_resource host_{IO_SCRATCH_CACHE_BYTES};
  statistics_resource_adaptor io_scratch_{io_scratch_host(environment_)};
};

/**
 * @brief Fault injection for the output tests: `SPILLWAY_TEST_FAIL_AFTER_WRITING=<rank>` makes
 * that rank fail once its files are written, while the other ranks go on.
 * @throws std::runtime_error on that rank
 */
void maybe_fail_after_writing(int rank);

/**
 * @brief Under mpirun: fails `comm`'s group with this rank's `error`, so that the other ranks learn
 * why and this rank's transfers still under way are abandoned. A no-op for in-process ranks (their
 * group fails when their thread ends) and for a group that failed already.
 */
void fail_group_with(communicator& comm, std::exception const& error);

/**
 * @brief Runs a rank's work, `body`, on its device: as `explaining_spill_failures`, and when it
 * throws, fails the group first (`fail_group_with`), while the rank's memory is still there. MPI
 * may still be moving bytes of transfers under way in and out of that memory; failing the group
 * only after the device's memory is gone could have them touch freed memory.
 */
template <typename Body>
void run_rank_work(communicator& comm, spill_store const& store, Body&& body) {
  try {
    explaining_spill_failures(store, std::forward<Body>(body));
  } catch (std::exception const& error) {
    fail_group_with(comm, error);
    throw;
  }
}

/** @return whether this process was started by `mpirun` (OpenMPI, MPICH or PMIx variables) */
bool launched_by_mpirun() noexcept;

/**
 * @brief Runs `body` on every rank, once `output` is open on it (`shared_output::open`): under
 * `mpirun`, once in this process on the world communicator (`in_process_ranks` must then be 1);
 * otherwise on `in_process_ranks` threads. A process that fails under mpirun tells the others,
 * abandons `output` and leaves MPI unfinalized (`mpi_environment::leave_unfinalized`) before it
 * rethrows.
 * @throws usage_error when ranks are asked for in both ways, or MPI support is not built in
 */
void run_on_ranks(int in_process_ranks,
                  shared_output& output,
                  std::function<void(communicator&)> const& body);

/** @brief A multi-rank command's input: its files (split among the ranks) and its columns. */
struct dataset_input {
  file_format format;
  std::vector<std::string> files;  ///< in name order
  table_schema schema;             ///< of the first file (CSV: of every file; one schema)
  std::vector<std::string> names;  ///< the column names, for the writers
};

/**
 * @brief Resolves `source`'s format and files and reads its schema from the first file; a CSV
 * dataset's from all its files, with the types of `csv_types_flag` (see `parse_csv_types`).
 */
dataset_input describe_input(std::string const& source,
                             std::string const& format_flag,
                             std::string_view csv_types_flag = {});

/** @brief A part of a rank's input: a whole file, or a run of a Parquet file's row groups. */
struct input_piece {
  std::string file;
  /// Parquet: the row groups [first, second) of `file`; none: the whole file.
  std::optional<std::pair<std::size_t, std::size_t>> row_groups;
  /// The dataset's columns, which `open_piece` checks `file` against (none: not checked), and
  /// the file they were read from.
  std::shared_ptr<table_schema const> schema;
  std::string schema_file;
  /** @return the file, and its row groups when only some are read */
  [[nodiscard]] std::string describe() const;
};

/**
 * @return what this rank of `comm` reads of `input`: for Parquet, its share of the row groups of
 * every file, cut into one share per rank of about equal rows (`split_row_groups`), so that ranks
 * share the rows evenly however many files there are; for the other formats every `size`-th file
 * from its rank. Collective for Parquet: each rank reads the footers of every `size`-th file only,
 * and one allgather gives every rank all the row counts to cut the same shares from.
 */
std::vector<input_piece> input_of_rank(communicator& comm, dataset_input const& input);

/**
 * @brief Opens `piece` for streaming in batches of about `batch_bytes`, as `open_dataset` opens a
 * file; a CSV file with the piece's schema (inferred for the whole dataset).
 * @throws spillway::invalid_argument, naming both files, when the piece's file has other columns
 * than the dataset (`input_piece::schema`)
 */
std::unique_ptr<batch_reader> open_piece(input_piece const& piece,
                                         file_format format,
                                         std::size_t batch_bytes,
                                         memory_resources mrs,
                                         stream_view stream);

/**
 * @brief Reads `pieces` one after another in batches of about `batch_bytes`, handing each batch to
 * `consume`; batches from `mrs.output()`, reader scratch from `mrs.temporary()`, copies to a
 * device ordered on `stream`.
 */
void read_pieces(std::vector<input_piece> const& pieces,
                 file_format format,
                 std::size_t batch_bytes,
                 memory_resources mrs,
                 stream_view stream,
                 std::function<void(std::unique_ptr<table>)> const& consume);

/** @return `values` summed element-wise over the ranks (every rank passes as many) */
std::vector<std::uint64_t> sum_over_ranks(communicator& comm, std::vector<std::uint64_t> values);

/** @return `values` maximised element-wise over the ranks */
std::vector<std::uint64_t> max_over_ranks(communicator& comm, std::vector<std::uint64_t> values);

/** @return every rank's `names`, concatenated in rank order */
std::vector<std::string> gather_names(communicator& comm, std::vector<std::string> const& names);

}  // namespace spillway::cli

namespace spillway::cli {

/** @brief What `spillway sort` passes on when it runs across ranks. */
struct distributed_sort_request {
  std::string input;
  std::string output;
  std::string by;
  std::string device_memory;  ///< per rank
  std::string host_memory;    ///< per rank
  std::string spill_dir;
  std::string batch_size;
  std::string file_size;
  std::string strategy;
  std::string format;
  std::string mode = "push";              ///< the range shuffle: pull or push
  std::string compression;                ///< of the output's Parquet pages (see parse_compression)
  std::string output_format = "parquet";  ///< see parse_output_format
  std::string backend       = "cpu";      ///< see resolve_rank_backend
  int ranks                 = 1;          ///< in-process ranks (1 under mpirun)
  bool json                 = false;
  bool overwrite            = false;
  bool check_order          = true;  ///< each rank checks the order of its output as it writes
  std::string csv_types;             ///< see parse_csv_types
};

/**
 * @brief `spillway sort` across ranks: sample, splitters, range shuffle, local out-of-core sort;
 * rank r writes `part-<r>-<n>.parquet`, so the files in name order are globally sorted.
 */
int run_distributed_sort(distributed_sort_request const& request);

}  // namespace spillway::cli
