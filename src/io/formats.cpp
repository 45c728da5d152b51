/**
 * @file formats.cpp
 * @brief The public Parquet and Arrow IPC entry points (thin shells over the Arrow or
 * no-Arrow implementation) and the multi-file `batch_writer`.
 */
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/size_estimate.hpp>

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <mutex>
#include <string>
#include <system_error>
#include <thread>
#include <utility>

namespace spillway {
namespace {

void check_ipc_format(file_format format, std::string const& what) {
  SPILLWAY_EXPECTS(format == file_format::ARROW_IPC_FILE || format == file_format::ARROW_IPC_STREAM,
                   what + ": the format must be ARROW_IPC_FILE or ARROW_IPC_STREAM, not " +
                     std::string{extension(format)},
                   invalid_argument);
}

}  // namespace

std::unique_ptr<batch_reader> open_parquet(std::string const& source,
                                           parquet_read_options const& options,
                                           stream_view stream,
                                           memory_resources mrs) {
  return detail::open_decoding_on_host(
    [&](memory_resources decoding) {
      std::vector<detail::parquet_piece> pieces;
      for (auto& file : expand_dataset(source)) {
        pieces.push_back({std::move(file), std::nullopt});
      }
      return detail::open_parquet_files(std::move(pieces), options, stream, decoding);
    },
    stream,
    mrs,
    "open_parquet('" + source + "')");
}

std::vector<std::vector<parquet_row_groups>> split_parquet(std::vector<std::string> const& files,
                                                           std::size_t parts) {
  SPILLWAY_EXPECTS(parts > 0, "split_parquet: at least one part", invalid_argument);
  return split_row_groups(files, parquet_row_group_rows(files), parts);
}

std::vector<std::vector<std::uint64_t>> parquet_row_group_rows(
  std::vector<std::string> const& files) {
  return detail::parquet_row_group_rows(files);
}

std::size_t parquet_decode_scratch_bytes(std::vector<std::string> const& files) {
  return detail::parquet_decode_scratch_bytes(files);
}

std::vector<std::vector<parquet_row_groups>> split_row_groups(
  std::vector<std::string> const& files,
  std::vector<std::vector<std::uint64_t>> const& rows,
  std::size_t parts) {
  SPILLWAY_EXPECTS(parts > 0, "split_row_groups: at least one part", invalid_argument);
  SPILLWAY_EXPECTS(rows.size() == files.size(),
                   "split_row_groups: row counts for " + std::to_string(rows.size()) +
                     " files, not " + std::to_string(files.size()),
                   invalid_argument);
  std::uint64_t total = 0;
  std::size_t groups  = 0;
  for (auto const& file : rows) {
    for (auto const count : file) {
      total += count;
      ++groups;
    }
  }
  std::vector<std::vector<parquet_row_groups>> shares(parts);
  std::uint64_t before = 0;
  std::size_t position = 0;  // of the row group among all of them
  for (std::size_t f = 0; f < files.size(); ++f) {
    for (std::size_t g = 0; g < rows[f].size(); ++g, ++position) {
      std::uint64_t const count = rows[f][g];
      // The share of the group's middle row (of its position when no group has rows), in exact
      // integers: every rank computes the same split, on any machine.
      __extension__ using wide = unsigned __int128;
      wide const numerator     = total > 0 ? 2 * wide{before} + count : 2 * wide{position} + 1;
      wide const denominator   = 2 * wide{total > 0 ? total : groups};
      std::size_t const share =
        std::min(parts - 1, static_cast<std::size_t>(numerator * parts / denominator));
      before += count;
      auto& pieces = shares[share];
      if (!pieces.empty() && pieces.back().path == files[f] && pieces.back().end == g) {
        pieces.back().end = g + 1;
        pieces.back().rows += count;
      } else {
        pieces.push_back({files[f], g, g + 1, count});
      }
    }
  }
  return shares;
}

std::unique_ptr<batch_reader> open_parquet(std::vector<parquet_row_groups> const& pieces,
                                           parquet_read_options const& options,
                                           stream_view stream,
                                           memory_resources mrs) {
  SPILLWAY_EXPECTS(!pieces.empty(), "open_parquet: no row groups to read", invalid_argument);
  std::vector<detail::parquet_piece> runs;
  for (auto const& piece : pieces) {
    SPILLWAY_EXPECTS(piece.first < piece.end,
                     "open_parquet: an empty run of row groups [" + std::to_string(piece.first) +
                       ", " + std::to_string(piece.end) + ") of '" + piece.path + "'",
                     invalid_argument);
    runs.push_back({piece.path, std::pair{piece.first, piece.end}});
  }
  return detail::open_decoding_on_host(
    [&](memory_resources decoding) {
      return detail::open_parquet_files(runs, options, stream, decoding);
    },
    stream,
    mrs,
    "open_parquet('" + pieces.front().path + "', row groups)");
}

std::unique_ptr<table> read_parquet(std::string const& source,
                                    parquet_read_options const& options,
                                    stream_view stream,
                                    memory_resources mrs) {
  return detail::read_whole(
    [&](memory_resources reading) { return open_parquet(source, options, stream, reading); },
    stream,
    mrs,
    "read_parquet('" + source + "')");
}

void write_parquet(table_view const& input,
                   std::vector<std::string> const& names,
                   std::string const& path,
                   parquet_write_options const& options,
                   stream_view stream,
                   memory_resources mrs) {
  std::string const what = "write_parquet('" + path + "')";
  auto const schema      = detail::schema_of(input, names, what);
  auto const on_host     = detail::host_copy_if_on_device(input, stream, mrs, what);
  detail::write_one_file(
    on_host ? on_host->view() : input, path, [&](std::string const& temporary) {
      return detail::make_parquet_writer(temporary, schema, options, stream, mrs);
    });
}

std::unique_ptr<batch_reader> open_arrow_ipc(std::string const& source,
                                             file_format format,
                                             arrow_ipc_read_options const& options,
                                             stream_view stream,
                                             memory_resources mrs) {
  check_ipc_format(format, "open_arrow_ipc('" + source + "')");
  return detail::open_decoding_on_host(
    [&](memory_resources decoding) {
      return detail::open_arrow_ipc_files(
        expand_dataset(source), format, options, stream, decoding);
    },
    stream,
    mrs,
    "open_arrow_ipc('" + source + "')");
}

std::unique_ptr<table> read_arrow_ipc(std::string const& source,
                                      file_format format,
                                      arrow_ipc_read_options const& options,
                                      stream_view stream,
                                      memory_resources mrs) {
  return detail::read_whole(
    [&](memory_resources reading) {
      return open_arrow_ipc(source, format, options, stream, reading);
    },
    stream,
    mrs,
    "read_arrow_ipc('" + source + "')");
}

void write_arrow_ipc(table_view const& input,
                     std::vector<std::string> const& names,
                     std::string const& path,
                     file_format format,
                     stream_view stream,
                     memory_resources mrs) {
  check_ipc_format(format, "write_arrow_ipc('" + path + "')");
  std::string const what = "write_arrow_ipc('" + path + "')";
  auto const schema      = detail::schema_of(input, names, what);
  auto const on_host     = detail::host_copy_if_on_device(input, stream, mrs, what);
  detail::write_one_file(
    on_host ? on_host->view() : input, path, [&](std::string const& temporary) {
      return detail::make_arrow_ipc_writer(temporary, schema, format, stream, mrs);
    });
}

/** @brief The state of a `batch_writer`. */
class batch_writer::impl {
 public:
  impl(batch_writer_options options,
       std::vector<std::string> names,
       stream_view stream,
       memory_resources mrs)
    : options_(std::move(options)), names_(std::move(names)), stream_(stream), mrs_(mrs) {
    SPILLWAY_EXPECTS(options_.target_file_bytes > 0,
                     std::string{"batch_writer: target_file_bytes must be positive"},
                     invalid_argument);
    if (options_.format != file_format::CSV) {
      SPILLWAY_EXPECTS(arrow_io_available(),
                       "batch_writer: " + std::string{extension(options_.format)} +
                         " needs Arrow C++, which this build lacks; CSV works without it",
                       not_supported);
    }
    std::error_code error;
    std::filesystem::create_directories(options_.directory, error);
    SPILLWAY_EXPECTS(
      !error,
      "batch_writer: cannot create directory '" + options_.directory + "': " + error.message(),
      io_error);
  }

  /** @return `input` copied to host memory when it is on a CUDA device, else null */
  [[nodiscard]] std::unique_ptr<table> host_copy_if_on_device(table_view const& input) const {
    return detail::host_copy_if_on_device(input, stream_, mrs_, "batch_writer");
  }

  ~impl() {
    // Not closed: a failure somewhere; leave nothing behind.
    current_.reset();
    for (auto const& file : files_) {
      detail::remove_quietly(detail::temporary_path_for(file));
    }
  }
  impl(impl const&)            = delete;
  impl& operator=(impl const&) = delete;
  impl(impl&&)                 = delete;
  impl& operator=(impl&&)      = delete;

  /// Takes the schema from the first table written (string and binary storage, dictionaries,
  /// TIMESTAMP zones, nullability and metadata as the reader found them); checks every later one
  /// against it.
  void learn_schema(table_view const& input) {
    if (schema_.empty()) {
      schema_          = detail::schema_of(input, names_, "batch_writer");
      schema_.metadata = options_.schema.metadata;
      for (auto& column : schema_) {
        for (auto const& known : options_.schema) {
          if (known == column) {
            column = known;  // the same name and type, with the file's storage details
          }
        }
      }
    } else {
      detail::check_matches(input, schema_, "batch_writer");
    }
  }

  /// One file of no rows with the columns of `columns`, unless a file was started.
  void write_no_rows(table_view const& columns) {
    learn_schema(columns);
    if (!current_ && files_.empty()) {
      open_next();
      current_->write(slice(columns, 0, 0), nullptr);
    }
  }

  /// `owner`: see `detail::format_writer::write`.
  void write(table_view const& input, std::shared_ptr<void const> const& owner) {
    learn_schema(input);
    std::size_t row = 0;
    while (row < input.num_rows()) {
      if (!current_) {
        open_next();
      }
      // Rows that fit what is left of the target, judged by their in-memory size (at least one).
      std::size_t const written = current_->bytes_written();
      std::size_t const room =
        options_.target_file_bytes > written ? options_.target_file_bytes - written : 0;
      std::size_t const remaining_rows = input.num_rows() - row;
      double const row_bytes           = std::max(
        estimate_size(input, row, input.num_rows()) / static_cast<double>(remaining_rows), 1.0);
      // File bytes per in-memory byte, learned from what this file holds so far (encoding,
      // compression and text all change it).
      double const ratio =
        estimated_in_file_ > 0 && written > 0
          ? static_cast<double>(written) / static_cast<double>(estimated_in_file_)
          : 1.0;
      auto rows = static_cast<std::size_t>(static_cast<double>(room) / (row_bytes * ratio));
      rows      = std::clamp<std::size_t>(rows, 1, remaining_rows);
      estimated_in_file_ += estimate_size(input, row, row + rows);
      current_->write(slice(input, row, row + rows), owner);
      row += rows;
      if (current_->bytes_written() >= options_.target_file_bytes) {
        finish_current();
      }
    }
  }

  std::vector<std::string> close() {
    finish_current();
    std::vector<std::string> done;
    try {
      for (auto const& file : files_) {
        detail::rename_file(detail::temporary_path_for(file), file);
        done.push_back(file);
      }
    } catch (...) {
      for (auto const& file : done) {
        detail::remove_quietly(file);
      }
      throw;
    }
    files_.clear();
    return done;
  }

 private:
  void open_next() {
    std::array<char, 32> number{};
    std::snprintf(number.data(), number.size(), "-%05zu.", files_.size());
    auto const path =
      (std::filesystem::path{options_.directory} /
       (options_.file_prefix + number.data() + std::string{extension(options_.format)}))
        .string();
    auto const temporary = detail::temporary_path_for(path);
    files_.push_back(path);
    switch (options_.format) {
      case file_format::PARQUET:
        current_ = detail::make_parquet_writer(temporary, schema_, options_.parquet, stream_, mrs_);
        break;
      case file_format::ARROW_IPC_FILE:
      case file_format::ARROW_IPC_STREAM:
        current_ =
          detail::make_arrow_ipc_writer(temporary, schema_, options_.format, stream_, mrs_);
        break;
      case file_format::CSV:
        current_ = detail::make_csv_writer(temporary, schema_, options_.csv, stream_, mrs_);
        break;
    }
  }

  void finish_current() {
    if (current_) {
      current_->close();
      current_.reset();
      estimated_in_file_ = 0;
    }
  }

  batch_writer_options options_;
  std::vector<std::string> names_;
  stream_view stream_;
  memory_resources mrs_;
  table_schema schema_;
  std::unique_ptr<detail::format_writer> current_;
  std::vector<std::string> files_;     ///< final paths of the files begun so far
  std::size_t estimated_in_file_ = 0;  ///< in-memory bytes of the rows in the current file
};

batch_writer::batch_writer(batch_writer_options options,
                           std::vector<std::string> names,
                           stream_view stream,
                           memory_resources mrs)
  : impl_(std::make_unique<impl>(std::move(options), std::move(names), stream, mrs)) {}

/**
 * The writer's thread: takes one table at a time and writes it with the writer's impl (whose
 * address stays put when the batch_writer moves). The state below is guarded by `mutex_`.
 */
class batch_writer::background {
 public:
  explicit background(impl& writer) : writer_(writer), thread_([this] { run(); }) {}
  ~background() {
    {
      std::lock_guard const lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();
  }
  background(background const&)            = delete;
  background& operator=(background const&) = delete;

  /// Waits until no table waits or is being written, then hands over `input`.
  void hand_over(std::unique_ptr<table> input) {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !pending_ && !busy_; });
    throw_failure();
    pending_ = std::move(input);
    lock.unlock();
    changed_.notify_all();
  }

  /// Waits until every table handed over is written; throws the first failure.
  void drain() {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return !pending_ && !busy_; });
    throw_failure();
  }

 private:
  void run() {
    while (true) {
      std::shared_ptr<table const> next;
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return pending_ != nullptr || stopping_; });
        if (!pending_) {
          return;
        }
        next  = std::move(pending_);
        busy_ = true;
      }
      std::exception_ptr error;
      if (!failure_) {  // after a failure, later tables are dropped: the output is void anyway
        try {
          writer_.write(next->view(), next);
        } catch (...) {
          error = std::current_exception();
        }
      }
      next.reset();
      {
        std::lock_guard const lock(mutex_);
        busy_ = false;
        if (error && !failure_) {
          failure_ = error;
        }
      }
      changed_.notify_all();
    }
  }

  void throw_failure() const {
    if (failure_) {
      std::rethrow_exception(failure_);
    }
  }

  impl& writer_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unique_ptr<table> pending_;  ///< handed over, not yet taken
  bool busy_     = false;           ///< a table is being written
  bool stopping_ = false;
  std::exception_ptr failure_;
  std::thread thread_;  ///< last: starts once the state above exists
};

batch_writer::~batch_writer() {
  background_.reset();  // the thread stops before the impl it writes with goes
}
batch_writer::batch_writer(batch_writer&&) noexcept = default;
batch_writer& batch_writer::operator=(batch_writer&& other) noexcept {
  if (this != &other) {
    background_.reset();
    impl_       = std::move(other.impl_);
    background_ = std::move(other.background_);
  }
  return *this;
}

void batch_writer::write(table_view const& input) {
  SPILLWAY_EXPECTS(impl_ != nullptr, std::string{"batch_writer: used after move"}, logic_error);
  if (background_) {
    background_->drain();
  }
  if (std::shared_ptr<table const> on_host = impl_->host_copy_if_on_device(input)) {
    impl_->write(on_host->view(), on_host);  // the copy is the writer's to keep
    return;
  }
  impl_->write(input, nullptr);
}

void batch_writer::write_no_rows(table_view const& columns) {
  SPILLWAY_EXPECTS(impl_ != nullptr, std::string{"batch_writer: used after move"}, logic_error);
  if (background_) {
    background_->drain();
  }
  impl_->write_no_rows(columns);
}

void batch_writer::write(std::unique_ptr<table> input) {
  SPILLWAY_EXPECTS(impl_ != nullptr, std::string{"batch_writer: used after move"}, logic_error);
  SPILLWAY_EXPECTS(
    input != nullptr, std::string{"batch_writer: write of no table"}, invalid_argument);
  if (auto on_host = impl_->host_copy_if_on_device(input->view())) {
    input = std::move(on_host);
  }
  if (!background_) {
    background_ = std::make_unique<background>(*impl_);
  }
  background_->hand_over(std::move(input));
}

std::vector<std::string> batch_writer::close() {
  SPILLWAY_EXPECTS(impl_ != nullptr, std::string{"batch_writer: used after move"}, logic_error);
  if (background_) {
    background_->drain();
    background_.reset();
  }
  auto files = impl_->close();
  return files;
}

}  // namespace spillway
