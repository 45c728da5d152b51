#include <spillway/core/error.hpp>
#include <spillway/spill/spill_directory.hpp>

#include <climits>

#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <mutex>
#include <signal.h>
#include <string_view>
#include <sys/types.h>
#include <unistd.h>

namespace spillway {
namespace {

/// The most stores whose directories a signal handler can remove.
constexpr std::size_t MAX_REGISTERED_DIRECTORIES = 64;

struct directory_slot {
  std::atomic<bool> used{false};
  bool only_when_empty = false;  ///< rmdir only: never its files
  std::array<char, PATH_MAX> path{};
};

std::array<directory_slot, MAX_REGISTERED_DIRECTORIES>& slots() noexcept {
  static std::array<directory_slot, MAX_REGISTERED_DIRECTORIES> instance;
  return instance;
}

/// Parses "spillway-<pid>" or "spillway-<pid>.<n>"; returns 0 when `name` is neither.
pid_t pid_of(std::string const& name) noexcept {
  constexpr std::string_view prefix = "spillway-";
  if (name.size() <= prefix.size() || name.compare(0, prefix.size(), prefix) != 0) {
    return 0;
  }
  long long pid     = 0;
  std::size_t index = prefix.size();
  for (; index < name.size() && name[index] >= '0' && name[index] <= '9'; ++index) {
    pid = pid * 10 + (name[index] - '0');
    if (pid > INT_MAX) {
      return 0;
    }
  }
  if (index == prefix.size()) {
    return 0;
  }
  if (index < name.size()) {
    if (name[index] != '.' || index + 1 == name.size()) {
      return 0;
    }
    for (std::size_t rest = index + 1; rest < name.size(); ++rest) {
      if (name[rest] < '0' || name[rest] > '9') {
        return 0;
      }
    }
  }
  return static_cast<pid_t>(pid);
}

/// Removes the files of a flat directory, then the directory: no allocation of our own.
void remove_flat_directory(char const* path) noexcept {
  int const directory_fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd >= 0) {
    if (DIR* directory = ::fdopendir(directory_fd); directory != nullptr) {
      while (dirent* entry = ::readdir(directory)) {
        if (std::strcmp(entry->d_name, ".") != 0 && std::strcmp(entry->d_name, "..") != 0) {
          ::unlinkat(directory_fd, entry->d_name, 0);
        }
      }
      ::closedir(directory);  // closes directory_fd
    } else {
      ::close(directory_fd);
    }
  }
  ::rmdir(path);
}

std::mutex& registration_mutex() noexcept {
  static std::mutex instance;
  return instance;
}

}  // namespace

std::string default_spill_root() {
  char const* tmpdir = std::getenv("TMPDIR");  // NOLINT(concurrency-mt-unsafe)
  return tmpdir != nullptr && *tmpdir != '\0' ? std::string(tmpdir) : std::string("/tmp");
}

std::size_t remove_stale_spill_directories(std::string const& root, file_system& files) {
  std::size_t removed = 0;
  for (auto const& name : files.list_directory(root)) {
    pid_t const pid = pid_of(name);
    if (pid <= 0 || pid == ::getpid()) {
      continue;
    }
    if (::kill(pid, 0) == -1 && errno == ESRCH) {
      files.remove_all(root + "/" + name);
      ++removed;
    }
  }
  return removed;
}

void remove_spill_directory_now() noexcept {
  // The flat directories first: a directory removed only when empty may hold one of them.
  for (bool const only_when_empty : {false, true}) {
    for (auto& slot : slots()) {
      if (slot.used.load(std::memory_order_acquire) && slot.only_when_empty == only_when_empty) {
        if (only_when_empty) {
          ::rmdir(slot.path.data());
        } else {
          remove_flat_directory(slot.path.data());
        }
      }
    }
  }
}

namespace {

extern "C" void remove_spill_directories_and_die(int signal_number) {
  remove_spill_directory_now();
  // SA_RESETHAND restored the default action; the signal is blocked until this returns, and
  // then kills the process as it would have without the handler.
  (void)::raise(signal_number);
}

}  // namespace

void install_spill_cleanup_on_signals() {
  struct sigaction action {};
  action.sa_handler = &remove_spill_directories_and_die;
  sigemptyset(&action.sa_mask);
  action.sa_flags = static_cast<int>(SA_RESETHAND);
  for (int const signal_number : {SIGINT, SIGTERM}) {
    SPILLWAY_EXPECTS(
      ::sigaction(signal_number, &action, nullptr) == 0,
      "cannot install the spill cleanup handler for signal " + std::to_string(signal_number),
      io_error);
  }
}

namespace detail {

std::size_t register_spill_directory(std::string const& path, bool only_when_empty) noexcept {
  if (path.size() >= PATH_MAX) {
    return MAX_REGISTERED_DIRECTORIES;
  }
  std::lock_guard const lock(registration_mutex());
  for (std::size_t index = 0; index < MAX_REGISTERED_DIRECTORIES; ++index) {
    auto& slot = slots()[index];
    if (!slot.used.load(std::memory_order_relaxed)) {
      std::memcpy(slot.path.data(), path.c_str(), path.size() + 1);
      slot.only_when_empty = only_when_empty;
      slot.used.store(true, std::memory_order_release);  // publishes the path to the handler
      return index;
    }
  }
  return MAX_REGISTERED_DIRECTORIES;
}

void unregister_spill_directory(std::size_t slot) noexcept {
  if (slot >= MAX_REGISTERED_DIRECTORIES) {
    return;
  }
  std::lock_guard const lock(registration_mutex());
  slots()[slot].used.store(false, std::memory_order_release);
}

}  // namespace detail
}  // namespace spillway
