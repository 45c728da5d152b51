#include "command_line.hpp"
#include "output_directory.hpp"

#include <spillway/io/file_format.hpp>

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace spillway::cli {

namespace fs = std::filesystem;

namespace {

/// The prefixes of the files a command writes, without their dash.
constexpr std::string_view DATASET_PREFIXES[] = {"part", "partition"};
/// The temporaries' suffix (see `batch_writer`).
constexpr std::string_view TEMPORARY_SUFFIX = ".tmp";
/// What the names of spillway's hidden entries begin with (staging directories, the lock).
constexpr std::string_view OWN_HIDDEN_PREFIX = ".spillway-";
/// The most entries named in a refusal.
constexpr std::size_t MAX_LISTED = 10;

/** @return whether `text` is one or more digits and dashes */
bool digits_and_dashes(std::string_view text) {
  return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) {
    return c == '-' || (c >= '0' && c <= '9');
  });
}

/** @return `names`, sorted, the first MAX_LISTED of them joined by ", " */
std::string list_names(std::vector<std::string> names) {
  std::sort(names.begin(), names.end());
  std::string text;
  for (std::size_t index = 0; index < names.size() && index < MAX_LISTED; ++index) {
    text += (index == 0 ? "" : ", ") + names[index];
  }
  if (names.size() > MAX_LISTED) {
    text += " and " + std::to_string(names.size() - MAX_LISTED) + " more";
  }
  return text;
}

}  // namespace

bool is_dataset_file_name(std::string_view name) {
  for (auto const format : {file_format::PARQUET,
                            file_format::CSV,
                            file_format::ARROW_IPC_FILE,
                            file_format::ARROW_IPC_STREAM}) {
    auto const suffix = "." + std::string{extension(format)};
    if (!name.ends_with(suffix)) {
      continue;
    }
    auto const stem = name.substr(0, name.size() - suffix.size());
    for (auto const prefix : DATASET_PREFIXES) {
      if (stem.size() > prefix.size() && stem.starts_with(prefix) && stem[prefix.size()] == '-' &&
          digits_and_dashes(stem.substr(prefix.size() + 1))) {
        return true;
      }
    }
  }
  return false;
}

bool is_leftover_name(std::string_view name) {
  if (name.starts_with(OWN_HIDDEN_PREFIX)) {
    return name != output_lock::FILE_NAME;
  }
  if (!name.starts_with('.') || !name.ends_with(TEMPORARY_SUFFIX)) {
    return false;
  }
  auto const inner = name.substr(1);
  return std::any_of(std::begin(DATASET_PREFIXES), std::end(DATASET_PREFIXES), [&](auto prefix) {
    return inner.starts_with(std::string{prefix} + "-");
  });
}

output_directory::output_directory(std::string path, bool overwrite, bool claim_now)
  : path_(std::move(path)), overwrite_(overwrite) {
  std::error_code error;
  auto const status = fs::status(path_, error);
  existed_          = fs::exists(status);
  if (existed_ && !fs::is_directory(status)) {
    throw usage_error("output '" + path_ + "' exists and is not a directory");
  }
  if (claim_now) {
    claim();
  }
}

output_directory::~output_directory() { release(); }

void output_directory::release() noexcept {
  lock_.reset();  // removes the lock file
  if (!committed_ && !existed_) {
    std::error_code ignored;
    fs::remove(path_, ignored);  // only removes it when empty: never someone else's files
  }
  // Only now: a signal (mpirun ends a failed job's processes with SIGTERM) between the lock's
  // removal and the directory's would leave the new directory behind, empty.
  signal_cleanup_.clear();
}

void output_directory::claim() {
  try {
    std::error_code error;
    fs::create_directories(path_, error);
    if (error) {
      throw usage_error("cannot create output directory '" + path_ + "': " + error.message());
    }
    lock_ = std::make_unique<output_lock>(path_);
    // SIGINT and SIGTERM: the temporaries first (they may be the files of a killed writer's
    // rename, never another run's: this run holds the lock), then the directory when it is new.
    for (auto const prefix : DATASET_PREFIXES) {
      signal_cleanup_.push_back(std::make_unique<removed_on_signal>(
        path_, "." + std::string{prefix} + "-", TEMPORARY_SUFFIX));
    }
    signal_cleanup_.push_back(
      std::make_unique<removed_on_signal>(path_, output_lock::FILE_NAME, std::string_view{}));
    if (!existed_) {
      signal_cleanup_.push_back(std::make_unique<removed_on_signal>(path_, true));
    }
    std::vector<std::string> foreign;
    std::vector<fs::path> leftovers;
    previous_files_.clear();
    for (auto const& entry : fs::directory_iterator(path_)) {
      auto const name = entry.path().filename().string();
      if (name == output_lock::FILE_NAME) {
        continue;
      }
      if (is_leftover_name(name)) {
        leftovers.push_back(entry.path());
      } else if (is_dataset_file_name(name) && entry.is_regular_file(error) &&
                 !entry.is_symlink(error)) {
        previous_files_.push_back(entry.path().string());
      } else if (!name.starts_with('.') && !name.starts_with('_')) {
        foreign.push_back(name);
      }
    }
    if (!foreign.empty()) {
      throw usage_error("output directory '" + path_ + "' holds " + std::to_string(foreign.size()) +
                        " entr" + (foreign.size() == 1 ? "y" : "ies") +
                        " that spillway did not write (" + list_names(foreign) +
                        "), which it never removes, with --overwrite or without; write elsewhere "
                        "or move them");
    }
    if (!previous_files_.empty() && !overwrite_) {
      throw usage_error("output directory '" + path_ + "' already holds " +
                        std::to_string(previous_files_.size()) +
                        " file(s); pass --overwrite to replace them");
    }
    // Left by a run that was killed: no run that holds the lock writes them.
    for (auto const& leftover : leftovers) {
      std::error_code ignored;
      fs::remove_all(leftover, ignored);
    }
  } catch (...) {
    release();
    throw;
  }
}

void output_directory::commit(std::vector<std::string> const& written) {
  committed_ = true;
  std::vector<fs::path> kept;
  kept.reserve(written.size());
  for (auto const& file : written) {
    kept.push_back(fs::weakly_canonical(file));
  }
  for (auto const& file : previous_files_) {
    std::error_code ignored;
    if (std::find(kept.begin(), kept.end(), fs::weakly_canonical(file, ignored)) == kept.end()) {
      fs::remove(file, ignored);
    }
  }
}

void refuse_output_holding_input(std::string const& output,
                                 std::vector<std::string> const& input_files) {
  std::error_code error;
  if (!fs::is_directory(output, error)) {
    return;  // a missing output holds nothing; a file is refused by output_directory
  }
  auto const directory = fs::weakly_canonical(output, error);
  if (error) {
    return;  // unresolvable: output_directory reports what is wrong with it
  }
  for (auto const& file : input_files) {
    // The file's directory, not the file: a link in the output is removed though its target is
    // elsewhere.
    auto const parent = fs::path(file).parent_path();
    auto const holder = fs::weakly_canonical(parent.empty() ? fs::path(".") : parent, error);
    if (!error && holder == directory) {
      throw usage_error("output '" + output + "' holds the input file '" + file +
                        "'; write elsewhere");
    }
  }
}

}  // namespace spillway::cli
