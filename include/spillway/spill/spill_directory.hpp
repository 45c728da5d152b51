/**
 * @file spill_directory.hpp
 * @brief Where spill files live and how they are removed on every exit path: by the store's
 * destructor, by a signal handler, or by the next process that finds a dead process's directory.
 */
#pragma once

#include <spillway/spill/file_system.hpp>

#include <cstddef>
#include <string>
#include <string_view>

namespace spillway {

/**
 * @return the directory under which stores create theirs: `$TMPDIR` when set, else "/tmp"
 */
std::string default_spill_root();

/**
 * @brief Removes every `spillway-<pid>` (or `spillway-<pid>.<n>`) directory under `root` whose
 * process no longer exists (`kill(pid, 0)` fails with ESRCH). Directories of live processes,
 * including this one, are kept.
 * @return how many directories were removed
 */
std::size_t remove_stale_spill_directories(std::string const& root, file_system& files);

/**
 * @brief Removes the directories of every live spill store of this process, now.
 *
 * For the CLI's SIGINT/SIGTERM handler: it uses paths computed when the stores were built, takes
 * no lock and allocates nothing of its own (it calls opendir/readdir/unlink/rmdir, which is
 * async-signal-safe enough on Linux). The stores must not be used afterwards; the process is
 * expected to exit.
 */
void remove_spill_directory_now() noexcept;

/**
 * @brief Makes SIGINT and SIGTERM remove every live store's spill directory before the process
 * dies of the signal (the handler resets itself and re-raises, so the exit status still says
 * which signal killed the process). For the command-line tool; call once at start.
 */
void install_spill_cleanup_on_signals();

namespace detail {
std::size_t register_spill_directory(std::string const& path,
                                     bool only_when_empty = false) noexcept;
std::size_t register_matching_files(std::string const& path,
                                    std::string_view prefix,
                                    std::string_view suffix) noexcept;
void unregister_spill_directory(std::size_t slot) noexcept;
}  // namespace detail

/**
 * @brief While it lives, the flat directory `path` (its files, then itself; with
 * `only_when_empty`, itself only, when empty) goes with the spill directories when SIGINT or
 * SIGTERM ends the process (`install_spill_cleanup_on_signals`): for a command's staging directory
 * of files not yet complete, and the output directory it created. Directories removed only when
 * empty go last. Their removal on a normal exit stays their owner's. Not copyable.
 */
class removed_on_signal {
 public:
  explicit removed_on_signal(std::string const& path, bool only_when_empty = false) noexcept
    : slot_(detail::register_spill_directory(path, only_when_empty)) {}
  /**
   * @brief Only the files directly in `directory` whose names begin with `prefix` and end with
   * `suffix` (the directory and its other files stay): a writer's temporaries in a directory it
   * shares with files that are not its own. Goes with the flat directories, before those removed
   * only when empty. Each of `prefix` and `suffix` is at most 31 characters (else nothing is
   * registered).
   */
  removed_on_signal(std::string const& directory,
                    std::string_view prefix,
                    std::string_view suffix) noexcept
    : slot_(detail::register_matching_files(directory, prefix, suffix)) {}
  ~removed_on_signal() { detail::unregister_spill_directory(slot_); }
  removed_on_signal(removed_on_signal const&)            = delete;
  removed_on_signal& operator=(removed_on_signal const&) = delete;
  removed_on_signal(removed_on_signal&&)                 = delete;
  removed_on_signal& operator=(removed_on_signal&&)      = delete;

 private:
  std::size_t slot_;
};

namespace detail {

/**
 * @brief Records `path` for `remove_spill_directory_now` (with `only_when_empty`: rmdir only).
 * @return a slot for unregistering
 */
std::size_t register_spill_directory(std::string const& path, bool only_when_empty) noexcept;
/**
 * @brief Records the files of `path` named `<prefix>...<suffix>` for `remove_spill_directory_now`.
 * @return a slot for unregistering
 */
std::size_t register_matching_files(std::string const& path,
                                    std::string_view prefix,
                                    std::string_view suffix) noexcept;
/** @brief Forgets a slot from `register_spill_directory`. */
void unregister_spill_directory(std::size_t slot) noexcept;

}  // namespace detail
}  // namespace spillway
