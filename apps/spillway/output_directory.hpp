/**
 * @file output_directory.hpp
 * @brief The directory a subcommand writes a dataset into: one run's at a time (a lock), holding
 * only what spillway writes (anything else is refused, never removed), its earlier dataset
 * replaced only with --overwrite, its temporaries removed on a signal and by the next run, and
 * removed again when the command fails after creating it.
 */
#pragma once

#include "output_lock.hpp"

#include <spillway/spill/spill_directory.hpp>

#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::cli {

/**
 * @return whether `name` is a file of a dataset spillway writes: `part-<digits and dashes>` or
 * `partition-<digits and dashes>` with the extension of a format it writes (.parquet, .csv,
 * .arrow, .arrows)
 */
bool is_dataset_file_name(std::string_view name);

/**
 * @return whether `name` is a temporary spillway leaves behind only when killed: a writer's hidden
 * file `.part-*.tmp` or `.partition-*.tmp`, or a `.spillway-*` entry (a multi-rank command's
 * staging directory) other than the lock file
 */
bool is_leftover_name(std::string_view name);

/**
 * @brief Guards an output directory for the length of one command.
 *
 * The files themselves are written by a `batch_writer` under hidden temporary names and renamed
 * only when all are complete, so a failure leaves no partial file. This guard adds the directory:
 * - `claim()` creates it, takes its lock (`output_lock`: a second writer fails at once, naming
 *   this one), refuses a directory that holds visible entries spillway did not write (listing
 *   them; nothing is removed, --overwrite or not) or an earlier dataset without `overwrite`, and
 *   removes the temporaries a killed run left there;
 * - SIGINT and SIGTERM (`install_spill_cleanup_on_signals`) remove the run's temporaries and lock
 *   file, and the directory when the command created it and it is then empty;
 * - `commit()` removes the files of the earlier dataset that the new one did not replace; without
 *   it, a directory the command created is removed again (when empty).
 *
 * Entries whose names begin with '.' or '_', which no reader of a dataset sees, are neither
 * refused nor removed (except spillway's own temporaries).
 * @note Not thread-safe; one per command.
 */
class output_directory {
 public:
  /**
   * @param path the directory
   * @param overwrite whether an earlier dataset of spillway's there may be replaced
   * @param claim_now whether to `claim()` at once: false where another process claims it (the
   * processes of an mpirun other than rank 0's, which only see whether the directory existed)
   * @throws usage_error when `path` is a file; what `claim()` throws
   */
  output_directory(std::string path, bool overwrite, bool claim_now = true);
  ~output_directory();
  output_directory(output_directory const&)            = delete;
  output_directory& operator=(output_directory const&) = delete;
  output_directory(output_directory&&)                 = delete;
  output_directory& operator=(output_directory&&)      = delete;

  /**
   * @brief Makes the directory this run's (see the class): creates and locks it, checks what it
   * holds, removes what killed runs left.
   * @throws usage_error when it cannot be created, holds entries spillway did not write, or holds
   * a dataset and `overwrite` is false; std::runtime_error naming the holder of its lock
   */
  void claim();

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
  /** @brief Lets go of the lock and the signal cleanup; removes the directory when created. */
  void release() noexcept;

  std::string path_;
  bool overwrite_;
  bool existed_   = false;
  bool committed_ = false;
  std::vector<std::string> previous_files_;  ///< the earlier dataset's files
  std::unique_ptr<output_lock> lock_;
  /// What SIGINT and SIGTERM remove while the run holds the directory.
  std::vector<std::unique_ptr<removed_on_signal>> signal_cleanup_;
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
