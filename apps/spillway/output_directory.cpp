#include "command_line.hpp"
#include "output_directory.hpp"

#include <algorithm>
#include <filesystem>
#include <system_error>

namespace spillway::cli {

namespace fs = std::filesystem;

output_directory::output_directory(std::string path, bool overwrite) : path_(std::move(path)) {
  std::error_code error;
  auto const status = fs::status(path_, error);
  existed_          = fs::exists(status);
  if (!existed_) {
    return;
  }
  if (!fs::is_directory(status)) {
    throw usage_error("output '" + path_ + "' exists and is not a directory");
  }
  for (auto const& entry : fs::directory_iterator(path_, error)) {
    auto const name = entry.path().filename().string();
    if (!name.starts_with('.') && !name.starts_with('_') && entry.is_regular_file(error)) {
      previous_files_.push_back(entry.path().string());
    }
  }
  if (!previous_files_.empty() && !overwrite) {
    throw usage_error("output directory '" + path_ + "' already holds " +
                      std::to_string(previous_files_.size()) +
                      " file(s); pass --overwrite to replace them");
  }
}

output_directory::~output_directory() {
  if (!committed_ && !existed_) {
    std::error_code ignored;
    fs::remove(path_, ignored);  // only removes it when empty: never someone else's files
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
