/**
 * @file output_lock.hpp
 * @brief The lock that makes an output directory one run's: a file `.spillway-lock` in it, held
 * with flock(2) for the length of the run and naming its holder.
 */
#pragma once

#include <string>
#include <string_view>

namespace spillway::cli {

/**
 * @brief Holds the lock file of an output directory while it lives: a second run that writes into
 * the same directory fails at once with an error naming this one (its pid, host and command line).
 *
 * The lock is flock(2) on `<directory>/.spillway-lock`, which the kernel drops when the process
 * ends however it ends: a file left by a killed run is taken over. The holder removes the file
 * when it lets go; a run that locked a file already removed (it had opened it just before) finds
 * that the name no longer leads to its file and locks the new one instead, so two runs never hold
 * the directory at once.
 * @note Not thread-safe; one per command.
 */
class output_lock {
 public:
  /// The lock file's name in the directory.
  static constexpr std::string_view FILE_NAME = ".spillway-lock";

  /**
   * @brief Takes the lock of `directory`, which exists.
   * @throws std::runtime_error naming the holder when another process holds it; usage_error when
   * the lock file cannot be made (the directory is not writable)
   */
  explicit output_lock(std::string directory);
  /** @brief Removes the lock file and lets go of the lock. */
  ~output_lock();
  output_lock(output_lock const&)            = delete;
  output_lock& operator=(output_lock const&) = delete;
  output_lock(output_lock&&)                 = delete;
  output_lock& operator=(output_lock&&)      = delete;

 private:
  std::string directory_;
  std::string path_;
  int descriptor_ = -1;
};

}  // namespace spillway::cli
