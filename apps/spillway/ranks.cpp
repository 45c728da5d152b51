#include "command_line.hpp"
#include "ranks.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/shuffle/in_process_communicator.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace spillway::cli {
namespace {

std::vector<std::vector<std::byte>> gather_words(communicator& comm,
                                                 std::vector<std::uint64_t> const& values) {
  return comm.allgather(std::as_bytes(std::span<std::uint64_t const>(values)));
}

std::uint64_t word_at(std::vector<std::byte> const& bytes, std::size_t index) {
  std::uint64_t value = 0;
  std::memcpy(&value, bytes.data() + index * sizeof(value), sizeof(value));
  return value;
}

}  // namespace

shared_output::shared_output(std::string path, bool overwrite)
  : path_(std::move(path)),
    staging_((std::filesystem::path(path_) / ".spillway-incomplete").string()),
    overwrite_(overwrite),
    unwinding_(std::uncaught_exceptions()) {}

shared_output::~shared_output() {
  std::lock_guard lock(mutex_);
  release(std::uncaught_exceptions() > unwinding_);
}

void shared_output::abandon() noexcept {
  std::lock_guard lock(mutex_);
  release(true);
}

void shared_output::release(bool failing) noexcept {
  if (released_) {
    return;
  }
  released_ = true;
  // A process failing under mpirun removes the staging directory too, though rank 0's owns it:
  // rank 0's process may be ended by mpirun first.
  if ((owns_staging_ || (failing && staging_cleanup_)) && !committed_) {
    std::error_code ignored;
    std::filesystem::remove_all(staging_, ignored);
  }
  if (!owns_staging_ && !failing && directory_) {
    directory_->keep();  // rank 0's process keeps the output, or removes it when it fails
  }
  directory_.reset();  // then the directory itself, when this command created it
  // Only now: mpirun's SIGTERM may come at any point above, and the cleanup on signals then still
  // removes what is left.
  staging_cleanup_.reset();
  output_cleanup_.reset();
}

void shared_output::open(communicator& comm) {
  {
    std::lock_guard lock(mutex_);
    if (!directory_ && (comm.rank() == 0 || launched_by_mpirun())) {
      // Rank 0's process claims it below; every process only sees whether it exists.
      directory_ = std::make_unique<output_directory>(path_, overwrite_, false);
    }
  }
  // Every process has seen whether the directory existed before rank 0 creates it (each one
  // that fails then removes it again when this command created it and it is empty).
  comm.barrier();
  if (comm.rank() == 0) {
    std::lock_guard lock(mutex_);
    // Creates and locks the directory, checks what it holds and removes what killed runs left
    // (a staging directory among them). Another run's lock fails the job here, before any rank
    // touches the directory.
    directory_->claim();
    owns_staging_ = true;
    std::error_code error;
    std::filesystem::remove_all(staging_, error);
    std::filesystem::create_directories(staging_, error);
    if (error) {
      throw io_error("cannot create directory '" + staging_ + "': " + error.message());
    }
  }
  // Rank 0 holds the directory.
  comm.barrier();
  {
    std::lock_guard lock(mutex_);
    // Every process's: mpirun ends the others with SIGTERM when one fails, and the last to go
    // removes what the others wrote meanwhile, then the output directory when this command
    // created it and it is empty (a rank's writer may create both again after another rank
    // removed them).
    if (!staging_cleanup_) {
      if (directory_ && !directory_->existed()) {
        output_cleanup_ = std::make_unique<removed_on_signal>(path_, true);
      }
      staging_cleanup_ = std::make_unique<removed_on_signal>(staging_);
    }
  }
  comm.barrier();
}

std::vector<std::string> shared_output::commit(std::vector<std::string> const& written) {
  std::lock_guard lock(mutex_);
  std::vector<std::string> moved;
  if (!owns_staging_) {
    // Rank 0's process moves the files, removes the staging directory and keeps the output.
    staging_cleanup_.reset();
    output_cleanup_.reset();
    if (directory_) {
      directory_->keep();
    }
    return moved;
  }
  for (auto const& file : written) {
    auto const target = std::filesystem::path(path_) / std::filesystem::path(file).filename();
    std::error_code error;
    std::filesystem::rename(file, target, error);
    if (error) {
      throw io_error("cannot move '" + file + "' to '" + target.string() + "': " + error.message());
    }
    moved.push_back(target.string());
  }
  committed_ = true;
  std::error_code ignored;
  std::filesystem::remove_all(staging_, ignored);
  staging_cleanup_.reset();
  output_cleanup_.reset();
  if (directory_) {
    directory_->commit(moved);
  }
  return moved;
}

namespace {

/// Processes of this mpirun on this machine, which share its GPU (1 when the launcher does not
/// say).
int local_processes() noexcept {
  for (char const* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "PMIX_LOCAL_SIZE"}) {
    if (char const* value = std::getenv(name); value != nullptr && std::atoi(value) > 0) {
      return std::atoi(value);
    }
  }
  return 1;
}

}  // namespace

device_backend resolve_rank_backend(std::string const& name, int ranks, std::size_t device_memory) {
  auto const backend = resolve_device_backend(name);
  if (backend != device_backend::CUDA) {
    return backend;
  }
  // The ranks that share the GPU: in-process ranks, or this mpirun's processes on this machine.
  // Those start at once and allocate as they go, so each process checks the GPU's total memory
  // for all of them and its free memory for itself.
  bool const processes   = launched_by_mpirun();
  int const sharing      = processes ? local_processes() : std::max(ranks, 1);
  auto const wanted      = static_cast<std::size_t>(sharing) * device_memory;
  auto const gpu         = cuda_device_memory();
  std::size_t const room = processes ? gpu.total_bytes : gpu.free_bytes;
  if (wanted > room || device_memory > gpu.free_bytes) {
    throw usage_error(
      "--device-memory " + format_bytes(device_memory) + " for each of " + std::to_string(sharing) +
      " rank(s) on this GPU is " + format_bytes(wanted) + ", more than its " +
      (wanted > room ? format_bytes(room) + (processes ? " in total" : " free")
                     : format_bytes(gpu.free_bytes) + " free for one rank") +
      " (" + format_bytes(gpu.free_bytes) + " free of " + format_bytes(gpu.total_bytes) + ")");
  }
  return backend;
}

device_environment_options rank_device::options(std::size_t device_memory,
                                                std::size_t host_memory,
                                                std::string const& spill_dir,
                                                device_backend backend,
                                                event_sink* events) {
  device_environment_options result;
  result.events        = events;
  result.backend       = backend;
  result.device_memory = device_memory;
  result.host_memory   = host_memory;
  result.spill_root    = spill_dir;
  return result;
}

rank_device::rank_device(communicator const& comm,
                         std::size_t device_memory,
                         std::size_t host_memory,
                         std::string const& spill_dir,
                         device_backend backend,
                         event_sink* events)
  : environment_(options(device_memory, host_memory, spill_dir, backend, events)),
    task_(environment_, task_id{static_cast<std::uint64_t>(comm.rank()) + 1}),
    bind_(task_.context()) {}

void maybe_fail_after_writing(int rank) {
  char const* const spec = std::getenv("SPILLWAY_TEST_FAIL_AFTER_WRITING");
  if (spec != nullptr && *spec != '\0' && std::atoi(spec) == rank) {
    throw std::runtime_error("rank " + std::to_string(rank) +
                             " failed after writing its files (SPILLWAY_TEST_FAIL_AFTER_WRITING)");
  }
}

bool launched_by_mpirun() noexcept {
  for (char const* name : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK"}) {
    if (std::getenv(name) != nullptr) {
      return true;
    }
  }
  return false;
}

void run_on_ranks(int in_process_ranks,
                  shared_output& output,
                  std::function<void(communicator&)> const& body) {
  if (!launched_by_mpirun()) {
    run_in_process(in_process_ranks, [&](communicator& comm) {
      output.open(comm);
      body(comm);
    });
    return;
  }
  if (in_process_ranks != 1) {
    throw usage_error("--ranks " + std::to_string(in_process_ranks) +
                      " cannot be combined with mpirun: the ranks are mpirun's processes");
  }
  if (!mpi_backend_available()) {
    throw usage_error("started by mpirun, but this spillway was built without MPI (" +
                      mpi_unavailable_reason() + ")");
  }
  // MPI moves host memory: shards in a GPU's memory travel through this host memory. It outlives
  // the environment, whose completions of requests left pending may still hold staged copies.
  host_memory_resource staging;
  mpi_environment environment;
  mpi_communicator::options options;
  options.staging = &staging;
  mpi_communicator comm(environment, options);
  try {
    output.open(comm);
    body(comm);
  } catch (std::exception const& error) {
    fail_group_with(comm, error);
    // Before MPI's teardown, which may wait on a peer that never comes until mpirun kills this
    // process: rank 0's process held the output's lock and staging directory, and a kill left
    // them behind (the lock in 1 of 12 failed push shuffles of 3 processes).
    output.abandon();
    environment.leave_unfinalized();
    throw;
  }
}

void fail_group_with(communicator& comm, std::exception const& error) {
  if (dynamic_cast<communication_error const*>(&error) != nullptr) {
    return;  // the group failed: this error is its failure
  }
  if (auto* const mpi = dynamic_cast<mpi_communicator*>(&comm)) {
    mpi->fail("rank " + std::to_string(comm.rank()) + ": " + user_message(error.what()));
  }
}

dataset_input describe_input(std::string const& source,
                             std::string const& format_flag,
                             std::string_view csv_types_flag) {
  dataset_input input;
  input.format         = resolve_format(source, format_flag);
  auto const csv_types = parse_csv_types(csv_types_flag, input.format);
  input.files          = expand_dataset(source);
  host_memory_resource host;
  // CSV types are inferred from every value of the dataset, so that its files agree.
  input.schema = open_dataset(input.format == file_format::CSV ? source : input.files.front(),
                              input.format,
                              1U << 20U,
                              memory_resources{host},
                              default_stream(),
                              csv_types)
                   ->schema();
  for (auto const& column : input.schema) {
    input.names.push_back(column.name);
  }
  return input;
}

resource_ref io_scratch_host(device_environment& environment) {
  return environment.budgeted_host();
}

std::string input_piece::describe() const {
  if (!row_groups) {
    return file;
  }
  return file + " (row groups " + std::to_string(row_groups->first) + " to " +
         std::to_string(row_groups->second - 1) + ")";
}

std::vector<input_piece> input_of_rank(communicator& comm, dataset_input const& input) {
  auto const rank = static_cast<std::size_t>(comm.rank());
  auto const size = static_cast<std::size_t>(comm.size());
  std::vector<input_piece> mine;
  auto const schema = std::make_shared<table_schema const>(input.schema);
  if (input.format != file_format::PARQUET) {
    for (std::size_t i = rank; i < input.files.size(); i += size) {
      mine.push_back({input.files[i], std::nullopt, schema, input.files.front()});
    }
    return mine;
  }
  // This rank's files' row counts, as words: how many files it lists, then for each of its files
  // the file's index, its row groups and the rows of each.
  std::vector<std::uint64_t> words{input.files.size()};
  for (std::size_t i = rank; i < input.files.size(); i += size) {
    auto const rows = parquet_row_group_rows({input.files[i]}).front();
    words.push_back(i);
    words.push_back(rows.size());
    words.insert(words.end(), rows.begin(), rows.end());
  }
  // Every rank decodes the same words, so all of them accept the counts or all of them throw.
  std::vector<std::vector<std::uint64_t>> rows(input.files.size());
  std::vector<bool> seen(input.files.size(), false);
  auto const all = gather_words(comm, words);
  for (std::size_t from = 0; from < all.size(); ++from) {
    auto const& theirs      = all[from];
    std::size_t const count = theirs.size() / sizeof(std::uint64_t);
    auto const malformed    = [&](std::string const& what) {
      return std::runtime_error("the row counts of rank " + std::to_string(from) + ": " + what);
    };
    if (count == 0 || word_at(theirs, 0) != input.files.size()) {
      throw malformed("it lists " +
                      (count == 0 ? std::string{"no"} : std::to_string(word_at(theirs, 0))) +
                      " files of the input where rank " + std::to_string(rank) + " lists " +
                      std::to_string(input.files.size()) + "; every rank must see the same files");
    }
    for (std::size_t at = 1; at < count;) {
      if (count - at < 2) {
        throw malformed("cut short");
      }
      auto const file   = word_at(theirs, at);
      auto const groups = word_at(theirs, at + 1);
      at += 2;
      if (file >= input.files.size() || seen[file] || groups > count - at) {
        throw malformed("file " + std::to_string(file) + " out of place");
      }
      seen[file] = true;
      for (std::size_t g = 0; g < groups; ++g) {
        rows[file].push_back(word_at(theirs, at + g));
      }
      at += groups;
    }
  }
  for (std::size_t f = 0; f < input.files.size(); ++f) {
    if (!seen[f]) {
      throw std::runtime_error("no rank read the footer of " + input.files[f]);
    }
  }
  auto const shares = split_row_groups(input.files, rows, size);
  for (auto const& piece : shares[rank]) {
    mine.push_back({piece.path, std::pair{piece.first, piece.end}, schema, input.files.front()});
  }
  return mine;
}

std::unique_ptr<batch_reader> open_piece(input_piece const& piece,
                                         file_format format,
                                         std::size_t batch_bytes,
                                         memory_resources mrs,
                                         stream_view stream) {
  std::unique_ptr<batch_reader> reader;
  if (format == file_format::CSV && piece.schema) {
    csv_read_options options;
    options.target_batch_bytes = batch_bytes;
    options.schema             = *piece.schema;
    reader                     = open_csv(piece.file, options, stream, mrs);
  } else if (!piece.row_groups) {
    reader = open_dataset(piece.file, format, batch_bytes, mrs, stream);
  } else {
    parquet_read_options options;
    options.target_batch_bytes = batch_bytes;
    reader                     = open_parquet(
      std::vector<parquet_row_groups>{
                            {piece.file, piece.row_groups->first, piece.row_groups->second, 0}},
      options,
      stream,
      mrs);
  }
  if (piece.schema && reader->schema() != *piece.schema) {
    throw invalid_argument("'" + piece.file + "' has columns (" + to_string(reader->schema()) +
                           ") unlike those of '" + piece.schema_file + "' (" +
                           to_string(*piece.schema) + ")");
  }
  return reader;
}

void read_pieces(std::vector<input_piece> const& pieces,
                 file_format format,
                 std::size_t batch_bytes,
                 memory_resources mrs,
                 stream_view stream,
                 std::function<void(std::unique_ptr<table>)> const& consume) {
  for (auto const& piece : pieces) {
    auto reader = open_piece(piece, format, batch_bytes, mrs, stream);
    while (auto batch = reader->next()) {
      consume(std::move(batch));
    }
  }
}

std::vector<std::uint64_t> sum_over_ranks(communicator& comm, std::vector<std::uint64_t> values) {
  auto const all = gather_words(comm, values);
  std::fill(values.begin(), values.end(), 0);
  for (auto const& theirs : all) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] += word_at(theirs, i);
    }
  }
  return values;
}

std::vector<std::uint64_t> max_over_ranks(communicator& comm, std::vector<std::uint64_t> values) {
  auto const all = gather_words(comm, values);
  for (auto const& theirs : all) {
    for (std::size_t i = 0; i < values.size(); ++i) {
      values[i] = std::max(values[i], word_at(theirs, i));
    }
  }
  return values;
}

std::vector<std::string> gather_names(communicator& comm, std::vector<std::string> const& names) {
  std::vector<std::byte> mine;
  for (auto const& name : names) {
    auto const* bytes = reinterpret_cast<std::byte const*>(name.data());
    mine.insert(mine.end(), bytes, bytes + name.size());
    mine.push_back(std::byte{0});
  }
  std::vector<std::string> all;
  for (auto const& theirs : comm.allgather(mine)) {
    std::string current;
    for (auto const b : theirs) {
      if (b == std::byte{0}) {
        all.push_back(std::move(current));
        current.clear();
      } else {
        current.push_back(static_cast<char>(b));
      }
    }
  }
  return all;
}

}  // namespace spillway::cli
