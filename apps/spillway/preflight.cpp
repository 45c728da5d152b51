#include "preflight.hpp"

#include <spillway/spill/spill_directory.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <set>
#include <system_error>
#include <unistd.h>

namespace spillway::cli {

namespace fs = std::filesystem;

namespace {

/**
 * @brief Opens `file` for writing without changing it (creating it when missing), and removes it
 * again when it was created.
 * @return the error, or an empty string
 */
std::string probe_file(fs::path const& file) {
  std::error_code error;
  bool const existed = fs::exists(fs::symlink_status(file, error));
  if (existed && fs::is_directory(file, error)) {
    return "it is a directory";
  }
  int const descriptor =
    ::open(file.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (existed ? 0 : O_EXCL), 0644);
  if (descriptor < 0) {
    return std::strerror(errno);
  }
  ::close(descriptor);
  if (!existed) {
    fs::remove(file, error);
  }
  return {};
}

}  // namespace

std::size_t parse_file_size_flag(std::string_view text) {
  auto const bytes = parse_size_flag("--file-size", text);
  if (bytes < MIN_FILE_SIZE) {
    throw usage_error("--file-size " + std::string{text} + " is too small: give at least " +
                      format_bytes(MIN_FILE_SIZE) +
                      " (smaller targets write files of a few rows each)");
  }
  return bytes;
}

void refuse_repeated_keys(std::vector<key_spec> const& keys) {
  std::set<std::string> seen;
  for (auto const& key : keys) {
    if (!seen.insert(key.name).second) {
      throw usage_error("--by: column '" + key.name + "' is given more than once");
    }
  }
}

void check_spill_directory(std::string const& spill_dir) {
  fs::path const root{spill_dir.empty() ? default_spill_root() : spill_dir};
  std::string const named = spill_dir.empty()
                              ? "the spill directory '" + root.string() + "' ($TMPDIR or /tmp)"
                              : "--spill-dir '" + spill_dir + "'";
  // The first of its directories that exists: what the probe creates below it goes again.
  std::error_code error;
  fs::path existing = root;
  while (!existing.empty() && !fs::exists(existing, error)) {
    existing = existing.parent_path();
  }
  fs::create_directories(root, error);
  if (error) {
    throw usage_error(named + " cannot hold spill files: cannot create it: " + error.message());
  }
  auto const probe = root / (".spillway-probe-" + std::to_string(::getpid()));
  std::string failure;
  int const descriptor = ::open(probe.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (descriptor < 0) {
    failure = std::strerror(errno);
  } else {
    char const byte = 0;
    if (::write(descriptor, &byte, 1) != 1) {
      failure = std::strerror(errno);
    }
    ::close(descriptor);
    if (::unlink(probe.c_str()) != 0 && failure.empty()) {
      failure = std::strerror(errno);
    }
  }
  // Remove what was created for the probe, deepest first (only empty directories go).
  for (fs::path created = root; !created.empty() && created != existing;
       created          = created.parent_path()) {
    if (!fs::remove(created, error) || created == created.parent_path()) {
      break;
    }
  }
  if (!failure.empty()) {
    throw usage_error(named + " cannot hold spill files: cannot write a file there: " + failure);
  }
}

report_files check_report_files(std::string const& report, int rank, int ranks) {
  fs::path const given{report};
  if (given.extension() == ".json") {
    throw usage_error("--report '" + report + "' must not end in .json (the JSON goes beside it)");
  }
  auto const stem =
    given.stem().string() + (ranks > 1 ? ".rank-" + std::to_string(rank) : std::string{});
  report_files files;
  files.html = given.parent_path() / (stem + given.extension().string());
  files.json = given.parent_path() / (stem + ".json");
  for (fs::path const& file : {files.html, files.json}) {
    if (auto const failure = probe_file(file); !failure.empty()) {
      throw usage_error("--report '" + report + "': cannot write '" + file.string() +
                        "': " + failure);
    }
  }
  return files;
}

}  // namespace spillway::cli
