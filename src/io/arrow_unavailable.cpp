/**
 * @file arrow_unavailable.cpp
 * @brief Parquet and Arrow IPC in a build without Arrow C++: every entry point says why not.
 */
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/parquet.hpp>

#include <string>

namespace spillway {

bool arrow_io_available() noexcept { return false; }

void set_arrow_thread_pools(std::size_t /*threads*/) {}  // no Arrow, no pools

namespace detail {

// No threads: a Parquet writer fails before it would use them.
std::shared_ptr<parquet_encoders::state> make_parquet_encoders_state(std::size_t /*threads*/,
                                                                     std::size_t /*groups*/) {
  return nullptr;
}
namespace {

[[noreturn]] void fail_without_arrow(std::string const& what) {
  SPILLWAY_FAIL(what +
                  " needs Arrow C++, and this build of spillway has none (SPILLWAY_ENABLE_ARROW "
                  "was OFF, or neither find_package(Arrow) nor pyarrow found it; run "
                  "scripts/install-deps.sh and reconfigure); CSV works without it",
                not_supported);
}

}  // namespace

std::unique_ptr<format_writer> make_parquet_writer(std::string const& path,
                                                   table_schema const&,
                                                   parquet_write_options const&,
                                                   stream_view,
                                                   memory_resources) {
  fail_without_arrow("writing Parquet file '" + path + "'");
}

std::unique_ptr<format_writer> make_arrow_ipc_writer(
  std::string const& path, table_schema const&, file_format, stream_view, memory_resources) {
  fail_without_arrow("writing Arrow IPC file '" + path + "'");
}

std::unique_ptr<batch_reader> open_parquet_files(std::vector<parquet_piece> pieces,
                                                 parquet_read_options const&,
                                                 stream_view,
                                                 memory_resources) {
  fail_without_arrow("reading Parquet file '" + pieces.front().path + "'");
}

std::vector<std::vector<std::uint64_t>> parquet_row_group_rows(
  std::vector<std::string> const& files) {
  fail_without_arrow("reading Parquet file '" + (files.empty() ? std::string{} : files.front()) +
                     "'");
}

std::size_t parquet_decode_scratch_bytes(std::vector<std::string> const& files) {
  if (files.empty()) {
    return 0;
  }
  fail_without_arrow("reading Parquet file '" + (files.empty() ? std::string{} : files.front()) +
                     "'");
}

std::unique_ptr<batch_reader> open_arrow_ipc_files(std::vector<std::string> files,
                                                   file_format,
                                                   arrow_ipc_read_options const&,
                                                   stream_view,
                                                   memory_resources) {
  fail_without_arrow("reading Arrow IPC file '" + files.front() + "'");
}

}  // namespace detail
}  // namespace spillway
