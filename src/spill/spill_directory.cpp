#include <spillway/core/error.hpp>
#include <spillway/spill/spill_directory.hpp>

#include <climits>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <mutex>
#include <signal.h>
#include <string_view>
#include <sys/syscall.h>
#include <sys/types.h>
#include <unistd.h>

namespace spillway {
namespace {

/// The most stores whose directories a signal handler can remove.
constexpr std::size_t MAX_REGISTERED_DIRECTORIES = 64;

/// The longest prefix or suffix of the names of matching files, with its terminating zero.
constexpr std::size_t MAX_AFFIX = 32;

/// What a signal removes of a registered path.
enum class removal : std::uint8_t {
  FLAT,        ///< the directory's files, then the directory
  WHEN_EMPTY,  ///< rmdir only: never its files
  MATCHING,    ///< the directory's files named `<prefix>...<suffix>` only
};

struct directory_slot {
  std::atomic<bool> used{false};
  removal what = removal::FLAT;
  std::array<char, PATH_MAX> path{};
  std::array<char, MAX_AFFIX> prefix{};  ///< MATCHING: zero-terminated
  std::array<char, MAX_AFFIX> suffix{};  ///< MATCHING: zero-terminated
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

/**
 * @brief Calls `visit(directory_fd, name)` for every entry of the directory `path` but "." and
 * "..". For a signal handler: getdents64 into a buffer on the stack, no allocation (opendir
 * allocates, and a signal that comes while the process is in malloc would deadlock there).
 */
template <typename Visit>
void for_each_entry(char const* path, Visit&& visit) noexcept {
  int const directory_fd = ::open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (directory_fd < 0) {
    return;
  }
  alignas(8) std::array<char, 4096> buffer;  // NOLINT(cppcoreguidelines-pro-type-member-init)
  while (true) {
    auto const read = ::syscall(SYS_getdents64, directory_fd, buffer.data(), buffer.size());
    if (read <= 0) {
      break;
    }
    for (long offset = 0; offset < read;) {
      // struct linux_dirent64: d_ino (8), d_off (8), d_reclen (2), d_type (1), d_name
      unsigned short record = 0;
      std::memcpy(&record, buffer.data() + offset + 16, sizeof(record));
      char const* const name = buffer.data() + offset + 19;
      if (std::strcmp(name, ".") != 0 && std::strcmp(name, "..") != 0) {
        visit(directory_fd, name);
      }
      offset += record;
    }
  }
  ::close(directory_fd);
}

/// Removes the files of a flat directory, then the directory: no allocation of our own.
void remove_flat_directory(char const* path) noexcept {
  for_each_entry(path,
                 [](int directory_fd, char const* name) { ::unlinkat(directory_fd, name, 0); });
  ::rmdir(path);
}

std::mutex& registration_mutex() noexcept {
  static std::mutex instance;
  return instance;
}

/// Whether `name` begins with `prefix` and ends with `suffix` (not overlapping): no allocation.
bool matches(char const* name, char const* prefix, char const* suffix) noexcept {
  std::size_t const length        = std::strlen(name);
  std::size_t const prefix_length = std::strlen(prefix);
  std::size_t const suffix_length = std::strlen(suffix);
  return length >= prefix_length + suffix_length &&
         std::strncmp(name, prefix, prefix_length) == 0 &&
         std::strcmp(name + length - suffix_length, suffix) == 0;
}

/// Removes the files of a directory named `<prefix>...<suffix>`: no allocation of our own.
void remove_matching_files(char const* path, char const* prefix, char const* suffix) noexcept {
  for_each_entry(path, [&](int directory_fd, char const* name) {
    if (matches(name, prefix, suffix)) {
      ::unlinkat(directory_fd, name, 0);
    }
  });
}

std::size_t register_slot(std::string const& path,
                          removal what,
                          std::string_view prefix,
                          std::string_view suffix) noexcept {
  if (path.size() >= PATH_MAX || prefix.size() >= MAX_AFFIX || suffix.size() >= MAX_AFFIX) {
    return MAX_REGISTERED_DIRECTORIES;
  }
  std::lock_guard const lock(registration_mutex());
  for (std::size_t index = 0; index < MAX_REGISTERED_DIRECTORIES; ++index) {
    auto& slot = slots()[index];
    if (!slot.used.load(std::memory_order_relaxed)) {
      std::memcpy(slot.path.data(), path.c_str(), path.size() + 1);
      slot.prefix.fill('\0');
      slot.suffix.fill('\0');
      // (an empty view may have no data: memcpy's pointers must not be null)
      std::copy(prefix.begin(), prefix.end(), slot.prefix.begin());
      std::copy(suffix.begin(), suffix.end(), slot.suffix.begin());
      slot.what = what;
      slot.used.store(true, std::memory_order_release);  // publishes the slot to the handler
      return index;
    }
  }
  return MAX_REGISTERED_DIRECTORIES;
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
  // The flat directories and matching files first: a directory removed only when empty may hold
  // them.
  for (bool const only_when_empty : {false, true}) {
    for (auto& slot : slots()) {
      if (!slot.used.load(std::memory_order_acquire) ||
          (slot.what == removal::WHEN_EMPTY) != only_when_empty) {
        continue;
      }
      switch (slot.what) {
        case removal::WHEN_EMPTY:
          ::rmdir(slot.path.data());
          break;
        case removal::FLAT:
          remove_flat_directory(slot.path.data());
          break;
        case removal::MATCHING:
          remove_matching_files(slot.path.data(), slot.prefix.data(), slot.suffix.data());
          break;
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
  return register_slot(path, only_when_empty ? removal::WHEN_EMPTY : removal::FLAT, {}, {});
}

std::size_t register_matching_files(std::string const& path,
                                    std::string_view prefix,
                                    std::string_view suffix) noexcept {
  return register_slot(path, removal::MATCHING, prefix, suffix);
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
