/**
 * @file jobs.hpp
 * @brief What the Python package runs, in C++ and without Python: an environment of budgets, an
 * input (an Arrow C stream or a dataset path), and the sort and shuffle jobs over them, wired as
 * `spillway sort` and `spillway shuffle` wire the library.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/io/arrow_c_stream.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/lease/memory_lease.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/runtime/run_report.hpp>
#include <spillway/shuffle/in_process_communicator.hpp>
#include <spillway/shuffle/shuffler.hpp>

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace spillway::python {

/// Called between batches; throws to stop the job (a pending KeyboardInterrupt, say).
using interrupt_check = std::function<void()>;

/** @brief The budgets of an environment. */
struct environment_options {
  std::size_t device_memory = std::size_t{512} << 20U;  ///< the emulated device's capacity
  std::size_t host_memory   = std::size_t{2} << 30U;    ///< the spill store's host budget
  std::string spill_dir;                                ///< empty: $TMPDIR or /tmp
  std::string backend = "cpu";                          ///< cpu, cuda or auto
  bool record         = false;                          ///< keep a run report
};

/**
 * @brief A device with its lease arbiter and spill store (`device_environment`), shared by the
 * jobs run in it, and counters of what they did; optionally a `run_recorder` for the run report.
 * @note Thread-safe as `device_environment` is: jobs of one environment may run at once.
 */
class environment {
 public:
  explicit environment(environment_options const& options);
  ~environment();
  environment(environment const&)            = delete;
  environment& operator=(environment const&) = delete;
  environment(environment&&)                 = delete;
  environment& operator=(environment&&)      = delete;

  [[nodiscard]] device_environment& device() noexcept { return *device_; }
  [[nodiscard]] environment_options const& options() const noexcept { return options_; }
  /** @return a task id no other job of this environment has */
  [[nodiscard]] task_id next_task() noexcept;
  /** @return the recorder, or null without `record` */
  [[nodiscard]] run_recorder* recorder() noexcept { return recorder_.get(); }

  /// Rows and bytes read and written by the jobs, for the run report's progress.
  std::atomic<std::size_t> rows_done{0};
  std::atomic<std::size_t> bytes_done{0};

  /** @brief The statistics of the last sort that finished, as name/value pairs. */
  void set_last_sort(std::map<std::string, double> statistics);
  [[nodiscard]] std::map<std::string, double> last_sort() const;

 private:
  environment_options options_;
  std::unique_ptr<run_recorder> recorder_;  ///< before the device: the store records into it
  std::unique_ptr<device_environment> device_;
  std::atomic<std::uint64_t> next_task_{1};
  mutable std::mutex mutex_;
  std::map<std::string, double> last_sort_;
};

/**
 * @brief Where a job's rows come from: an Arrow C stream (its batches viewed where Arrow holds
 * them), or a dataset path read as `spillway sort` reads it (a file, directory or glob of Parquet,
 * Arrow IPC or CSV), one batch ahead on a thread of its own.
 */
class input {
 public:
  /** @brief Takes `stream` over (see `arrow_stream_reader`). */
  input(ArrowArrayStream* stream, std::string name);
  /**
   * @param format "parquet", "csv", "arrow", "arrows", or empty: from the extension
   * @param batch_bytes the target bytes of a batch
   */
  input(std::string const& path, std::string const& format, std::size_t batch_bytes);
  ~input();
  input(input const&)            = delete;
  input& operator=(input const&) = delete;
  input(input&&)                 = delete;
  input& operator=(input&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept { return schema_; }
  [[nodiscard]] std::string const& name() const noexcept { return name_; }
  /** @return the next batch, valid until the next call; none at the end */
  [[nodiscard]] std::optional<table_view> next();

 private:
  std::string name_;
  host_memory_resource scratch_{std::size_t{64} << 20U};  ///< decoded and converted batches
  std::unique_ptr<arrow_stream_reader> stream_;
  std::unique_ptr<batch_reader> files_;
  std::unique_ptr<table> batch_;  ///< the batch of `files_` the last view is of
  table_schema schema_;
};

/** @return the format named ("parquet", ...), or from the extension of `path`'s first file */
file_format resolve_format(std::string const& path, std::string const& format);

/** @brief One key of a sort: a column name, its direction and where its nulls go. */
struct sort_key {
  std::string name;
  bool descending  = false;
  bool nulls_first = false;
};

/** @brief What a sort is asked to do beyond its keys. */
struct sort_options {
  std::size_t batch_bytes = std::size_t{128} << 20U;  ///< read batches (at most 1/8 device)
  std::string strategy    = "auto";                   ///< merge, sample or auto
  bool check_order        = true;                     ///< check every output batch's order
};

/**
 * @brief Sorts `input` as `spillway sort` does: each batch copied into the device and pushed into
 * an `external_sorter` whose chunks live in the environment's spill store, under one task with a
 * base lease of a few batches. The constructor reads all of the input and finishes the sort
 * (calling `interrupted` between batches); `next()` then hands out the sorted rows.
 * @note One thread at a time (the calls are serialized).
 */
class sort_job {
 public:
  sort_job(std::shared_ptr<environment> env,
           input& source,
           std::vector<sort_key> const& keys,
           sort_options const& options,
           interrupt_check const& interrupted);
  ~sort_job();
  sort_job(sort_job const&)            = delete;
  sort_job& operator=(sort_job const&) = delete;
  sort_job(sort_job&&)                 = delete;
  sort_job& operator=(sort_job&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept { return schema_; }
  /**
   * @return the next sorted batch in host memory (from a resource that outlives the job, so that
   * the batch may outlive it too), or null at the end
   */
  [[nodiscard]] std::unique_ptr<table> next();
  /**
   * @brief Writes every remaining batch into `directory` (created; must hold no files) as
   * `format` files of about `file_bytes`; calls `interrupted` between batches.
   * @return the files written, in order
   */
  std::vector<std::string> write(std::string const& directory,
                                 std::string const& format,
                                 std::size_t file_bytes,
                                 interrupt_check const& interrupted);
  /** @return what the sort did, as name/value pairs */
  [[nodiscard]] std::map<std::string, double> statistics() const;

 private:
  /** @brief Lets the sort's memory go, and waits for its disk writes in flight. */
  void release() noexcept;

  std::mutex mutex_;
  std::shared_ptr<environment> env_;
  table_schema schema_;
  std::unique_ptr<device_task> task_;
  std::optional<memory_lease> base_lease_;
  std::unique_ptr<external_sorter> sorter_;
  retry_counts copies_;  ///< what the copies of the input onto the device rolled back
  std::size_t input_batches_ = 0;
  bool done_                 = false;
};

/**
 * @brief Hash-partitions `input` by `keys` into `partitions` as `spillway shuffle` does on one
 * rank: one map task per batch, the shards spillable in the environment's store. The constructor
 * runs every map task (calling `interrupted` between batches); each partition is then read once.
 */
class shuffle_job {
 public:
  shuffle_job(std::shared_ptr<environment> env,
              input& source,
              std::vector<std::string> const& keys,
              std::size_t partitions,
              std::uint64_t seed,
              interrupt_check const& interrupted);
  ~shuffle_job();
  shuffle_job(shuffle_job const&)            = delete;
  shuffle_job& operator=(shuffle_job const&) = delete;
  shuffle_job(shuffle_job&&)                 = delete;
  shuffle_job& operator=(shuffle_job&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept { return schema_; }
  [[nodiscard]] std::size_t partitions() const noexcept { return partitions_; }
  /** @return the rows of `partition` (read from the shuffle once), as host tables */
  [[nodiscard]] std::deque<std::unique_ptr<table>> take_partition(std::size_t partition);
  /**
   * @brief Writes every partition into `directory` (created; must hold no files) as
   * `partition-<p>-<n>` files.
   * @return the files of each partition
   */
  std::vector<std::vector<std::string>> write(std::string const& directory,
                                              std::string const& format,
                                              std::size_t file_bytes,
                                              interrupt_check const& interrupted);

 private:
  std::mutex mutex_;
  std::shared_ptr<environment> env_;
  table_schema schema_;
  std::size_t partitions_;
  std::vector<bool> taken_;
  in_process_group group_{1};
  std::unique_ptr<shuffler> shuffle_;
};

/** @return the host resource the jobs' output batches come from; it lives as long as the process */
resource_ref output_host();

/** @brief Sizes the worker pool (and Arrow's pools) to `threads`; 0: the usable cores. */
void use_threads(std::size_t threads);

}  // namespace spillway::python
