/**
 * @file jobs.cpp
 * @brief The environment, inputs and jobs of the Python package (see jobs.hpp).
 */
#include "jobs.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/retry/copy_to_device.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/spill/spill_failures.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <string_view>
#include <utility>

namespace spillway::python {
namespace {

/// A read batch (and an output batch) is at most this fraction of the device, as in the CLI.
constexpr std::size_t DEVICE_SHARE_PER_BATCH = 8;
/// The sort's base lease, in input batches (the rest of the device is leased per merge).
constexpr std::size_t BASE_LEASE_BATCHES = 4;
/// The least rows one batch must hold for the sort to make progress.
constexpr std::size_t MIN_BATCH_ROWS = 64;
/// Characters assumed per string value when the budget is checked before reading.
constexpr std::size_t MIN_STRING_CHARS = 16;
/// Output batches are at most this large, whatever the device.
constexpr std::size_t MAX_OUTPUT_BATCH = std::size_t{64} << 20U;
/// The smallest host budget (the command line's minimum, `MIN_HOST_BUDGET`).
constexpr std::size_t MIN_HOST_MEMORY = std::size_t{1} << 20U;
/// How often the run report samples.
constexpr std::chrono::milliseconds REPORT_PERIOD{50};

std::size_t min_row_bytes(table_schema const& schema) {
  std::size_t bytes = 0;
  for (auto const& column : schema) {
    bytes +=
      is_fixed_width(column.type) ? size_of(column.type) : sizeof(std::int64_t) + MIN_STRING_CHARS;
  }
  return std::max<std::size_t>(bytes, 1);
}

std::string_view extension_of(std::string const& path) {
  auto const name = std::string_view{path}.substr(path.find_last_of('/') + 1);
  auto const dot  = name.find_last_of('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

std::optional<file_format> format_named(std::string_view name) {
  for (auto format : {file_format::PARQUET,
                      file_format::CSV,
                      file_format::ARROW_IPC_FILE,
                      file_format::ARROW_IPC_STREAM}) {
    if (name == extension(format)) {
      return format;
    }
  }
  if (name == "pq" || name == "parq") {
    return file_format::PARQUET;
  }
  if (name == "feather" || name == "ipc") {
    return file_format::ARROW_IPC_FILE;
  }
  return std::nullopt;
}

/** @return the index of `name` in `schema` @throws invalid_argument naming the columns there are */
std::size_t column_index(table_schema const& schema,
                         std::string const& name,
                         std::string const& source) {
  auto const found = std::find_if(
    schema.begin(), schema.end(), [&](column_schema const& c) { return c.name == name; });
  if (found == schema.end()) {
    throw invalid_argument("by: no column '" + name + "' in " + source + " (it has " +
                           to_string(schema) + ")");
  }
  return static_cast<std::size_t>(found - schema.begin());
}

void refuse_repeated(std::vector<std::string> const& names) {
  for (std::size_t i = 0; i < names.size(); ++i) {
    for (std::size_t j = 0; j < i; ++j) {
      if (names[i] == names[j]) {
        throw invalid_argument("by: column '" + names[i] + "' is named twice");
      }
    }
  }
}

/** @brief Refuses an output directory that holds files; creates it when missing. */
void prepare_output(std::string const& directory) {
  std::error_code error;
  if (std::filesystem::exists(directory, error)) {
    if (!std::filesystem::is_directory(directory, error)) {
      throw invalid_argument("output '" + directory + "' is not a directory");
    }
    if (!std::filesystem::is_empty(directory, error)) {
      throw invalid_argument("output directory '" + directory +
                             "' is not empty: spillway writes into a new or empty directory only");
    }
  }
}

/**
 * @return how a job of `env` writes `format` files into `directory`: within half the host budget
 * for the row groups being filled and encoded, as `spillway sort` writes
 */
batch_writer_options writer_options(environment const& env,
                                    std::string const& directory,
                                    std::string const& format,
                                    std::size_t file_bytes,
                                    table_schema const& schema) {
  batch_writer_options options;
  options.directory = directory;
  if (format == "csv") {
    options.format = file_format::CSV;
  } else if (format == "parquet") {
    options.format = file_format::PARQUET;
  } else if (format == "arrow" || format == "feather") {
    options.format = file_format::ARROW_IPC_FILE;
  } else {
    throw invalid_argument("output format '" + format + "': parquet, csv or arrow");
  }
  options.target_file_bytes      = file_bytes;
  options.parquet.encode_threads = std::max<std::size_t>(2, worker_threads());
  options.parquet.memory_bytes   = env.options().host_memory / 2;
  options.schema                 = schema;
  return options;
}

std::vector<std::string> names_of(table_schema const& schema) {
  std::vector<std::string> names;
  names.reserve(schema.size());
  for (auto const& column : schema) {
    names.push_back(column.name);
  }
  return names;
}

/** @return a table of no rows with the columns of `schema` */
std::unique_ptr<table> empty_table(table_schema const& schema, resource_ref resource) {
  std::vector<std::unique_ptr<column>> columns;
  for (auto const& column : schema) {
    columns.push_back(
      column.type.id() == type_id::STRING
        ? make_strings_column(0, 0, mask_state::UNALLOCATED, {}, resource)
        : make_fixed_width_column(column.type, 0, mask_state::UNALLOCATED, {}, resource));
  }
  return std::make_unique<table>(std::move(columns));
}

/**
 * @brief Calls `consume` with `batch` cut into pieces of about `batch_bytes` (a batch of an
 * Arrow stream may be as large as its producer made it).
 */
template <typename Consume>
void in_pieces(table_view const& batch, std::size_t batch_bytes, Consume&& consume) {
  std::size_t const rows  = batch.num_rows();
  std::size_t const bytes = estimate_size(batch);
  std::size_t const parts = std::max<std::size_t>(1, (bytes + batch_bytes - 1) / batch_bytes);
  std::size_t const step  = std::max<std::size_t>(1, (rows + parts - 1) / parts);
  for (std::size_t begin = 0; begin < rows; begin += step) {
    consume(parts == 1 ? batch : slice(batch, begin, std::min(rows, begin + step)));
  }
}

}  // namespace

resource_ref output_host() {
  // Never destroyed: batches handed to Python may be freed at any time, up to the process's end.
  static auto* const host = new host_memory_resource{std::size_t{64} << 20U};
  return *host;
}

void use_threads(std::size_t threads) {
  if (threads == 0 || threads == worker_threads()) {
    return;
  }
  set_worker_threads(threads);
  set_arrow_thread_pools(worker_threads());
}

environment::environment(environment_options const& options) : options_(options) {
  if (options.host_memory < MIN_HOST_MEMORY) {
    throw invalid_argument("host_memory " + format_bytes(options.host_memory) +
                           " is too small: give at least " + format_bytes(MIN_HOST_MEMORY));
  }
  if (options.record) {
    run_gauges gauges;
    gauges.device_bytes = [this] { return device_->device_used_bytes(); };
    gauges.host_bytes   = [this] { return device_->store().bytes_on(spill_tier::HOST); };
    gauges.disk_bytes   = [this] { return device_->store().bytes_on(spill_tier::DISK); };
    gauges.rows_done    = [this] { return rows_done.load(); };
    gauges.bytes_done   = [this] { return bytes_done.load(); };
    run_recorder_options recorder_options;
    recorder_options.interval = REPORT_PERIOD;
    recorder_options.title    = "spillway (Python)";
    recorder_                 = std::make_unique<run_recorder>(std::move(gauges), recorder_options);
  }
  device_environment_options device_options;
  device_options.backend       = resolve_device_backend(options.backend);
  device_options.device_memory = options.device_memory;
  device_options.host_memory   = options.host_memory;
  device_options.spill_root    = options.spill_dir;
  device_options.events        = recorder_ ? &recorder_->events() : nullptr;
  device_                      = std::make_unique<device_environment>(device_options);
  if (recorder_) {
    recorder_->start();
  }
}

environment::~environment() {
  if (recorder_) {
    recorder_->stop();  // its gauges read the device
  }
  device_.reset();
}

task_id environment::next_task() noexcept { return task_id{next_task_.fetch_add(1)}; }

void environment::set_last_sort(std::map<std::string, double> statistics) {
  std::lock_guard lock{mutex_};
  last_sort_ = std::move(statistics);
}

std::map<std::string, double> environment::last_sort() const {
  std::lock_guard lock{mutex_};
  return last_sort_;
}

file_format resolve_format(std::string const& path, std::string const& format) {
  if (!format.empty()) {
    auto const named = format_named(format);
    if (!named) {
      throw invalid_argument("format: unknown format '" + format +
                             "' (parquet, csv, arrow or arrows)");
    }
    return *named;
  }
  auto const probe     = expand_dataset(path).front();  // io_error when it names no file
  auto const format_of = format_named(extension_of(probe));
  if (!format_of) {
    throw invalid_argument("cannot tell the format of '" + probe +
                           "' from its extension; pass format='parquet', 'csv', 'arrow' or "
                           "'arrows'");
  }
  return *format_of;
}

input::input(ArrowArrayStream* stream, std::string name)
  : name_(std::move(name)),
    stream_(std::make_unique<arrow_stream_reader>(stream, name_, scratch_)) {
  schema_ = stream_->schema();
}

input::input(std::string const& path, std::string const& format, std::size_t batch_bytes)
  : name_(path) {
  auto const resolved = resolve_format(path, format);
  memory_resources const mrs{scratch_};
  switch (resolved) {
    case file_format::PARQUET: {
      parquet_read_options options;
      options.target_batch_bytes = batch_bytes;
      files_                     = open_parquet(path, options, default_stream(), mrs);
      break;
    }
    case file_format::CSV: {
      csv_read_options options;
      options.target_batch_bytes = batch_bytes;
      files_                     = open_csv(path, options, default_stream(), mrs);
      break;
    }
    case file_format::ARROW_IPC_FILE:
    case file_format::ARROW_IPC_STREAM: {
      arrow_ipc_read_options options;
      options.target_batch_bytes = batch_bytes;
      files_                     = open_arrow_ipc(path, resolved, options, default_stream(), mrs);
      break;
    }
  }
  files_  = read_ahead(std::move(files_));
  schema_ = files_->schema();
}

input::~input() = default;

std::optional<table_view> input::next() {
  if (stream_) {
    return stream_->next();
  }
  batch_.reset();
  batch_ = files_->next();
  if (batch_ == nullptr) {
    files_.reset();  // its read-ahead thread ends now
    return std::nullopt;
  }
  return batch_->view();
}

sort_job::sort_job(std::shared_ptr<environment> env,
                   input& source,
                   std::vector<sort_key> const& keys,
                   sort_options const& options,
                   interrupt_check const& interrupted)
  : env_(std::move(env)), schema_(source.schema()) {
  auto& device                    = env_->device();
  std::size_t const device_memory = device.device_memory();
  if (keys.empty()) {
    throw invalid_argument("by: give at least one column to sort by");
  }
  std::vector<std::string> names;
  external_sort_options sort;
  for (auto const& key : keys) {
    names.push_back(key.name);
    sort.key_columns.push_back(column_index(schema_, key.name, source.name()));
    sort.orders.push_back({key.descending ? order::DESCENDING : order::ASCENDING,
                           key.nulls_first ? null_order::BEFORE : null_order::AFTER});
  }
  refuse_repeated(names);
  std::size_t const batch_bytes =
    std::max<std::size_t>(1, std::min(options.batch_bytes, device_memory / DEVICE_SHARE_PER_BATCH));
  auto const row_bytes = min_row_bytes(schema_);
  auto const needed    = DEVICE_SHARE_PER_BATCH * MIN_BATCH_ROWS * row_bytes;
  if (device_memory < needed) {
    throw invalid_argument("device_memory " + format_bytes(device_memory) + " is too small for " +
                           source.name() + ": a batch (1/" +
                           std::to_string(DEVICE_SHARE_PER_BATCH) + " of the device) must hold " +
                           std::to_string(MIN_BATCH_ROWS) + " rows of at least " +
                           std::to_string(row_bytes) + " B; give at least " + format_bytes(needed));
  }
  if (options.strategy == "merge") {
    sort.strategy = sort_strategy::MERGE;
  } else if (options.strategy == "sample") {
    sort.strategy = sort_strategy::SAMPLE;
  } else if (options.strategy == "auto") {
    sort.strategy = sort_strategy::AUTO;
  } else {
    throw invalid_argument("strategy '" + options.strategy + "': merge, sample or auto");
  }
  task_                   = std::make_unique<device_task>(device, env_->next_task());
  sort.merge_budget_bytes = device_memory / 2;
  sort.output_batch_bytes = std::min(device_memory / DEVICE_SHARE_PER_BATCH, MAX_OUTPUT_BATCH);
  sort.coordinator        = &device.coordinator();
  sort.task               = &task_->context();
  sort.check_output_order = options.check_order;
  lease_request_options base;
  base.is_base = true;
  base_lease_.emplace(task_->context().request_lease(
    std::min(device_memory, BASE_LEASE_BATCHES * batch_bytes), base));
  sorter_ = std::make_unique<external_sorter>(
    device.store(), sort, device.stream(), device.device(), device.host());

  try {
    explaining_spill_failures(device.store(), [&] {
      while (auto batch = source.next()) {
        in_pieces(*batch, batch_bytes, [&](table_view const& piece) {
          interrupted();
          // The stream's batch stays alive while its rows are copied, pieces included.
          for (auto& on_device : copy_to_device(table_input{piece},
                                                device.coordinator(),
                                                task_->context(),
                                                device.stream(),
                                                device.device(),
                                                &copies_)) {
            env_->rows_done += on_device->num_rows();
            env_->bytes_done += on_device->allocated_bytes();
            sorter_->push(std::move(on_device));
          }
          ++input_batches_;
        });
      }
      interrupted();
      sorter_->finish();
    });
  } catch (...) {
    // Interrupted or failed while pushing: no destructor runs for a constructor that throws,
    // so the job lets its bytes go here as the destructor would, disk writes in flight included.
    release();
    throw;
  }
}

sort_job::~sort_job() { release(); }

void sort_job::release() noexcept {
  sorter_.reset();
  // A buffer released while its disk write was in flight goes when the write ends: the sort's
  // bytes are all gone from a shared environment once the job is.
  env_->device().store().wait_for_io();
  base_lease_.reset();
  task_.reset();
}

std::unique_ptr<table> sort_job::next() {
  std::lock_guard lock{mutex_};
  if (done_) {
    return nullptr;
  }
  auto& device = env_->device();
  auto batch   = explaining_spill_failures(device.store(), [&] { return sorter_->next(); });
  if (batch == nullptr) {
    done_ = true;
    env_->set_last_sort(statistics());
    // The sort's memory goes now, not when the consumer lets the stream go.
    sorter_.reset();
    base_lease_.reset();
    task_.reset();
    return nullptr;
  }
  env_->rows_done += batch->num_rows();
  env_->bytes_done += batch->allocated_bytes();
  auto on_host = spillway::copy(batch->view(), device.stream(), output_host());
  return on_host;
}

std::vector<std::string> sort_job::write(std::string const& directory,
                                         std::string const& format,
                                         std::size_t file_bytes,
                                         interrupt_check const& interrupted) {
  prepare_output(directory);
  auto options = writer_options(*env_, directory, format, file_bytes, schema_);
  batch_writer writer{
    options, names_of(schema_), env_->device().stream(), {env_->device().budgeted_host()}};
  while (auto batch = next()) {
    interrupted();
    writer.write(std::move(batch));
  }
  auto written = writer.close();
  if (written.empty()) {  // no rows: one file still carries the columns
    batch_writer empty{
      options, names_of(schema_), env_->device().stream(), {env_->device().budgeted_host()}};
    empty.write_no_rows(empty_table(schema_, output_host())->view());
    written = empty.close();
  }
  return written;
}

std::map<std::string, double> sort_job::statistics() const {
  if (!sorter_) {
    return env_->last_sort();
  }
  auto const& stats = sorter_->statistics();
  auto& device      = env_->device();
  return {{"input_rows", static_cast<double>(stats.input_rows)},
          {"input_bytes", static_cast<double>(stats.input_bytes)},
          {"input_batches", static_cast<double>(input_batches_)},
          {"output_rows", static_cast<double>(stats.output_rows)},
          {"output_batches", static_cast<double>(stats.output_batches)},
          {"rounds", static_cast<double>(stats.rounds)},
          {"retries", static_cast<double>(stats.retries + copies_.retries)},
          {"splits", static_cast<double>(stats.splits + copies_.splits)},
          {"copies_per_input_byte", stats.copies_per_input_byte()},
          {"sample_strategy", stats.strategy_used == sort_strategy::SAMPLE ? 1.0 : 0.0},
          {"order_check_seconds", stats.order_check_seconds},
          {"device_peak", static_cast<double>(device.device_peak_bytes())}};
}

shuffle_job::shuffle_job(std::shared_ptr<environment> env,
                         input& source,
                         std::vector<std::string> const& keys,
                         std::size_t partitions,
                         std::uint64_t seed,
                         interrupt_check const& interrupted)
  : env_(std::move(env)), schema_(source.schema()), partitions_(partitions), taken_(partitions) {
  if (keys.empty()) {
    throw invalid_argument("by: give at least one column to partition by");
  }
  if (partitions == 0) {
    throw invalid_argument("partitions must be at least 1");
  }
  refuse_repeated(keys);
  auto& device = env_->device();
  shuffle_options options(device.host());
  options.partitions.method = partition_method::HASH;
  for (auto const& key : keys) {
    options.partitions.key_columns.push_back(column_index(schema_, key, source.name()));
  }
  options.partitions.num_partitions = partitions;
  options.partitions.seed           = seed;
  shuffle_                          = std::make_unique<shuffler>(shuffle_mode::PULL,
                                        group_.rank(0),
                                        device.store(),
                                        options,
                                        device.stream(),
                                        memory_resources{device.device()});
  std::size_t const batch_bytes =
    std::max<std::size_t>(1, device.device_memory() / DEVICE_SHARE_PER_BATCH);
  explaining_spill_failures(device.store(), [&] {
    while (auto batch = source.next()) {
      in_pieces(*batch, batch_bytes, [&](table_view const& piece) {
        interrupted();
        env_->rows_done += piece.num_rows();
        // The map task copies the rows into the device while `add_map` runs (again when an
        // out-of-memory rolls an attempt back). They are gone from the input afterwards, so a
        // shard lost later cannot be recomputed (one rank loses none).
        auto const readable = std::make_shared<bool>(true);
        struct unreadable_on_return {
          std::shared_ptr<bool> flag;
          ~unreadable_on_return() { *flag = false; }
        } const on_return{readable};
        static_cast<void>(shuffle_->add_map(
          [piece, readable, name = source.name()](stream_view stream, memory_resources mrs) {
            if (!*readable) {
              throw io_error("a shard of a map task of " + name +
                             " was lost, and the input cannot be read again");
            }
            return spillway::copy(piece, stream, mrs.output());
          }));
      });
    }
    interrupted();
    shuffle_->finish_maps();
  });
}

shuffle_job::~shuffle_job() { shuffle_.reset(); }

std::deque<std::unique_ptr<table>> shuffle_job::take_partition(std::size_t partition) {
  std::lock_guard lock{mutex_};
  if (partition >= partitions_) {
    throw invalid_argument("partition " + std::to_string(partition) + " of " +
                           std::to_string(partitions_));
  }
  if (taken_[partition]) {
    throw invalid_argument("partition " + std::to_string(partition) + " was read already");
  }
  taken_[partition] = true;
  std::deque<std::unique_ptr<table>> batches;
  auto& device = env_->device();
  explaining_spill_failures(device.store(), [&] {
    shuffle_->for_each_batch(partition, [&](table_view const& batch) {
      batches.push_back(spillway::copy(batch, device.stream(), output_host()));
    });
  });
  return batches;
}

std::vector<std::vector<std::string>> shuffle_job::write(std::string const& directory,
                                                         std::string const& format,
                                                         std::size_t file_bytes,
                                                         interrupt_check const& interrupted) {
  prepare_output(directory);
  std::vector<std::vector<std::string>> written(partitions_);
  bool any = false;
  for (std::size_t partition = 0; partition < partitions_; ++partition) {
    interrupted();
    auto options = writer_options(*env_, directory, format, file_bytes, schema_);
    char prefix[32];
    std::snprintf(prefix, sizeof(prefix), "partition-%05zu", partition);
    options.file_prefix = prefix;
    batch_writer writer{
      options, names_of(schema_), env_->device().stream(), {env_->device().budgeted_host()}};
    for (auto& batch : take_partition(partition)) {
      writer.write(std::move(batch));
    }
    written[partition] = writer.close();
    any                = any || !written[partition].empty();
  }
  if (!any) {  // no rows: one file still carries the columns
    auto options        = writer_options(*env_, directory, format, file_bytes, schema_);
    options.file_prefix = "partition-00000";
    batch_writer empty{
      options, names_of(schema_), env_->device().stream(), {env_->device().budgeted_host()}};
    empty.write_no_rows(empty_table(schema_, output_host())->view());
    written[0] = empty.close();
  }
  return written;
}

}  // namespace spillway::python
