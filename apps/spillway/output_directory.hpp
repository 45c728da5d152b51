/**
 * @file output_directory.hpp
 * @brief The directory a subcommand writes a dataset into: refused when it already holds one
 * (unless overwriting), removed again when the command fails after creating it.
 */
#pragma once

#include <string>
#include <vector>

namespace spillway::cli {

/**
 * @brief Guards an output directory for the length of one command.
 *
 * The files themselves are written by a `batch_writer` under hidden temporary names and renamed
 * only when all are complete, so a failure leaves no partial file; this guard adds the directory:
 * one the command created is removed again (when empty) unless `commit()` was called.
 * @note Not thread-safe; one per command.
 */
class output_directory {
 public:
  /**
   * @param path the directory (created later by the writer when missing)
   * @param overwrite whether existing visible files may be replaced
   * @throws usage_error when `path` is a file, or a directory holding visible files while
   * `overwrite` is false
   */
  output_directory(std::string path, bool overwrite);
  ~output_directory();
  output_directory(output_directory const&)            = delete;
  output_directory& operator=(output_directory const&) = delete;
  output_directory(output_directory&&)                 = delete;
  output_directory& operator=(output_directory&&)      = delete;

  /** @return the directory */
  [[nodiscard]] std::string const& path() const noexcept { return path_; }

  /**
   * @brief The command succeeded and wrote `written`: keep the directory and remove the files of
   * an earlier dataset that the new one did not replace.
   */
  void commit(std::vector<std::string> const& written);

  /** @brief Keeps the directory as it is: another process of the command commits it. */
  void keep() noexcept { committed_ = true; }

  /** @return whether the directory existed before the command */
  [[nodiscard]] bool existed() const noexcept { return existed_; }

 private:
  std::string path_;
  bool existed_   = false;
  bool committed_ = false;
  std::vector<std::string> previous_files_;  ///< visible files there before the command
};

/**
 * @brief Refuses to write into a directory that holds the input: replacing its dataset would
 * remove the input files (with --overwrite), which a shuffle's recomputation and a resumed run
 * still read.
 * @param input_files the input's files, as `expand_dataset` lists them
 * @throws usage_error naming the first input file found directly in `output`
 */
void refuse_output_holding_input(std::string const& output,
                                 std::vector<std::string> const& input_files);

}  // namespace spillway::cli
