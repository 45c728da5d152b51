/**
 * @file io_common.cpp
 * @brief Schemas, temporary names, `read_all` and the dataset expansion.
 */
#include "io/io_detail.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <glob.h>
#include <mutex>
#include <optional>
#include <string>
#include <system_error>
#include <thread>
#include <vector>

namespace spillway {

std::string to_string(table_schema const& schema) {
  std::string result;
  for (auto const& column : schema) {
    if (!result.empty()) {
      result += ", ";
    }
    result +=
      column.name + ": " + (column.nested ? column.nested->arrow_type : to_string(column.type));
  }
  return result;
}

namespace {

/// The reader of `read_ahead`: one batch (or the end, or a failure) waits in `ready_`; the thread
/// reads the next one as soon as it is taken. The state below is guarded by `mutex_`.
class read_ahead_reader final : public batch_reader {
 public:
  explicit read_ahead_reader(std::unique_ptr<batch_reader> source)
    : source_(std::move(source)), schema_(source_->schema()), thread_([this] { run(); }) {}
  ~read_ahead_reader() override {
    {
      std::lock_guard const lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    thread_.join();  // after the read in progress, if any
  }
  read_ahead_reader(read_ahead_reader const&)            = delete;
  read_ahead_reader& operator=(read_ahead_reader const&) = delete;
  read_ahead_reader(read_ahead_reader&&)                 = delete;
  read_ahead_reader& operator=(read_ahead_reader&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }

  [[nodiscard]] std::unique_ptr<table> next() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return has_ready_; });
    if (failure_) {
      std::rethrow_exception(failure_);
    }
    if (!ready_) {
      return nullptr;  // the end: it stays ready for every later call
    }
    auto batch = std::move(ready_);
    has_ready_ = false;
    lock.unlock();
    changed_.notify_all();
    return batch;
  }

 private:
  void run() {
    while (true) {
      {
        std::unique_lock lock(mutex_);
        changed_.wait(lock, [this] { return !has_ready_ || stopping_; });
        if (stopping_) {
          return;
        }
      }
      std::unique_ptr<table> batch;
      std::exception_ptr failure;
      try {
        batch = source_->next();
      } catch (...) {
        failure = std::current_exception();
      }
      bool const last = batch == nullptr;
      {
        std::lock_guard const lock(mutex_);
        ready_     = std::move(batch);
        failure_   = failure;
        has_ready_ = true;
      }
      changed_.notify_all();
      if (last) {
        return;  // the end or a failure: nothing more to read
      }
    }
  }

  std::unique_ptr<batch_reader> source_;
  table_schema schema_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::unique_ptr<table> ready_;  ///< the batch read ahead (null at the end)
  std::exception_ptr failure_;
  bool has_ready_ = false;
  bool stopping_  = false;
  std::thread thread_;  ///< last: starts once the state above exists
};

}  // namespace

std::unique_ptr<batch_reader> read_ahead(std::unique_ptr<batch_reader> source) {
  SPILLWAY_EXPECTS(source != nullptr, std::string{"read_ahead of no reader"}, invalid_argument);
  return std::make_unique<read_ahead_reader>(std::move(source));
}

std::unique_ptr<table> read_all(batch_reader& reader, stream_view stream, memory_resources mrs) {
  std::vector<std::unique_ptr<table>> batches;
  while (auto batch = reader.next()) {
    batches.push_back(std::move(batch));
  }
  if (batches.empty()) {
    // An empty dataset: empty columns of the schema's types.
    std::vector<std::unique_ptr<column>> columns;
    for (auto const& field : reader.schema()) {
      columns.push_back(
        is_fixed_width(field.type)
          ? make_fixed_width_column(field.type, 0, mask_state::UNALLOCATED, stream, mrs.output())
          : make_strings_column(0, 0, mask_state::UNALLOCATED, stream, mrs.output(), field.type));
    }
    return std::make_unique<table>(std::move(columns));
  }
  std::vector<table_view> views;
  views.reserve(batches.size());
  for (auto const& batch : batches) {
    views.push_back(batch->view());
  }
  return detail::concatenate(views, stream, mrs);
}

std::vector<std::string> expand_dataset(std::string const& source) {
  namespace fs = std::filesystem;
  std::vector<std::string> files;
  auto const is_visible = [](fs::path const& path) {
    auto const name = path.filename().string();
    return !name.empty() && name.front() != '.' && name.front() != '_';
  };
  if (source.find_first_of("*?[") != std::string::npos) {
    glob_t matches{};
    int const status = ::glob(source.c_str(), 0, nullptr, &matches);
    if (status == 0) {
      for (std::size_t i = 0; i < matches.gl_pathc; ++i) {
        std::error_code error;
        if (fs::is_regular_file(matches.gl_pathv[i], error)) {
          files.emplace_back(matches.gl_pathv[i]);
        }
      }
    }
    ::globfree(&matches);
    SPILLWAY_EXPECTS(!files.empty(), "no file matches the pattern '" + source + "'", io_error);
  } else {
    std::error_code error;
    auto const status = fs::status(source, error);
    SPILLWAY_EXPECTS(
      !error && fs::exists(status), "no such file or directory: '" + source + "'", io_error);
    if (fs::is_directory(status)) {
      for (auto const& entry : fs::directory_iterator(source, error)) {
        if (entry.is_regular_file() && is_visible(entry.path())) {
          files.push_back(entry.path().string());
        }
      }
      SPILLWAY_EXPECTS(
        !error, "cannot list directory '" + source + "': " + error.message(), io_error);
      SPILLWAY_EXPECTS(!files.empty(), "directory '" + source + "' holds no data file", io_error);
    } else {
      files.push_back(source);
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

namespace detail {
namespace {

/// Decodes with a reader into host memory and copies each batch to the (CUDA) output.
class copying_reader final : public batch_reader {
 public:
  copying_reader(std::unique_ptr<batch_reader> source, stream_view stream, resource_ref output)
    : source_(std::move(source)), stream_(stream), output_(output) {}

  [[nodiscard]] table_schema const& schema() const noexcept override { return source_->schema(); }

  [[nodiscard]] std::unique_ptr<table> next() override {
    if (pending_ == nullptr) {
      pending_ = source_->next();
    }
    if (pending_ == nullptr) {
      return nullptr;
    }
    // A copy that fails (no device memory) leaves the batch here for the next call.
    auto copied = spillway::copy(pending_->view(), stream_, output_);
    pending_.reset();
    return copied;
  }

 private:
  std::unique_ptr<batch_reader> source_;
  std::unique_ptr<table> pending_;  ///< decoded, not yet copied
  stream_view stream_;
  resource_ref output_;
};

void expect_host_temporary(memory_resources mrs, stream_view stream, std::string const& what) {
  SPILLWAY_EXPECTS(!gives_cuda_memory(mrs.temporary(), stream),
                   what +
                     ": rows are decoded and encoded in host memory, and the temporary resource "
                     "is a CUDA device's too; give memory_resources{device, host}",
                   invalid_argument);
}

}  // namespace

bool gives_cuda_memory(resource_ref resource, stream_view stream) {
  // Host memory never is; only device memory (emulated or CUDA) needs the probe.
  if (resource.kind() != memory_kind::DEVICE || cuda_device_count() == 0) {
    return false;
  }
  constexpr std::size_t PROBE_BYTES = 256;
  void* const probe                 = resource.allocate(PROBE_BYTES, stream);
  bool const device                 = is_cuda_device_pointer(probe);
  resource.deallocate(probe, PROBE_BYTES, stream);
  return device;
}

std::unique_ptr<table> host_copy_if_on_device(table_view const& input,
                                              stream_view stream,
                                              memory_resources mrs,
                                              std::string const& what) {
  if (!cuda::on_device(input)) {
    return nullptr;
  }
  expect_host_temporary(mrs, stream, what);
  return spillway::copy(input, stream, mrs.temporary());
}

namespace {

/// @return the resources to decode with in host memory when `mrs.output()` is a CUDA device's
/// (the result is then copied over), else nothing (decode straight into the output)
std::optional<memory_resources> host_decoding(memory_resources mrs,
                                              stream_view stream,
                                              std::string const& what) {
  if (!gives_cuda_memory(mrs.output(), stream)) {
    return std::nullopt;
  }
  expect_host_temporary(mrs, stream, what);
  return mrs.with_output(mrs.temporary());
}

}  // namespace

std::unique_ptr<batch_reader> open_decoding_on_host(
  std::function<std::unique_ptr<batch_reader>(memory_resources)> const& open,
  stream_view stream,
  memory_resources mrs,
  std::string const& what) {
  auto const on_host = host_decoding(mrs, stream, what);
  if (!on_host) {
    return open(mrs);
  }
  return std::make_unique<copying_reader>(open(*on_host), stream, mrs.output());
}

std::unique_ptr<table> read_whole(
  std::function<std::unique_ptr<batch_reader>(memory_resources)> const& open,
  stream_view stream,
  memory_resources mrs,
  std::string const& what) {
  auto const on_host = host_decoding(mrs, stream, what);
  auto const reading = on_host.value_or(mrs);
  auto reader        = open(reading);
  auto whole         = read_all(*reader, stream, reading);
  return on_host ? spillway::copy(whole->view(), stream, mrs.output()) : std::move(whole);
}

std::string temporary_path_for(std::string const& path) {
  std::filesystem::path const final_path{path};
  return (final_path.parent_path() / ("." + final_path.filename().string() + ".tmp")).string();
}

table_schema schema_of(table_view const& input,
                       std::vector<std::string> const& names,
                       std::string const& what) {
  SPILLWAY_EXPECTS(names.size() == input.num_columns(),
                   what + ": " + std::to_string(names.size()) + " names for " +
                     std::to_string(input.num_columns()) + " columns",
                   invalid_argument);
  table_schema schema;
  for (std::size_t i = 0; i < names.size(); ++i) {
    schema.push_back({names[i], input.column(i).type()});
  }
  return schema;
}

void check_matches(table_view const& input, table_schema const& schema, std::string const& what) {
  SPILLWAY_EXPECTS(input.num_columns() == schema.size(),
                   what + ": a table of " + std::to_string(input.num_columns()) +
                     " columns for a schema of " + std::to_string(schema.size()),
                   invalid_argument);
  for (std::size_t i = 0; i < schema.size(); ++i) {
    SPILLWAY_EXPECTS(input.column(i).type() == schema[i].type,
                     what + ": column '" + schema[i].name + "' is " + to_string(schema[i].type) +
                       " but the table's column " + std::to_string(i) + " is " +
                       to_string(input.column(i).type()),
                     invalid_argument);
  }
}

void rename_file(std::string const& from, std::string const& to) {
  std::error_code error;
  std::filesystem::rename(from, to, error);
  SPILLWAY_EXPECTS(
    !error, "cannot rename '" + from + "' to '" + to + "': " + error.message(), io_error);
}

void remove_quietly(std::string const& path) noexcept {
  std::error_code error;
  std::filesystem::remove(path, error);
}

}  // namespace detail
}  // namespace spillway
