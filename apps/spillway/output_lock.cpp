#include "command_line.hpp"
#include "output_lock.hpp"

#include <array>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fcntl.h>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <sys/file.h>
#include <sys/stat.h>
#include <thread>
#include <unistd.h>

namespace spillway::cli {
namespace {

/// Tries to lock a file whose name led to another file meanwhile (its holder removed it).
constexpr int LOCK_ATTEMPTS = 16;
/// The most characters of the holder's command line written into the lock file.
constexpr std::size_t MAX_COMMAND_CHARS = 1000;
/// How long a run that found the lock held waits for its holder to write its name.
constexpr std::chrono::milliseconds HOLDER_NAME_WAIT{200};

/** @return "pid <pid> on <host>: <command line>" for this process */
std::string describe_this_process() {
  std::array<char, 256> host{};
  if (::gethostname(host.data(), host.size() - 1) != 0) {
    host[0] = '\0';
  }
  std::ifstream in{"/proc/self/cmdline", std::ios::binary};
  std::string command{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  while (!command.empty() && command.back() == '\0') {
    command.pop_back();
  }
  for (auto& c : command) {
    if (c == '\0' || c == '\n') {
      c = ' ';
    }
  }
  if (command.size() > MAX_COMMAND_CHARS) {
    command.resize(MAX_COMMAND_CHARS);
    command += "...";
  }
  return "pid " + std::to_string(::getpid()) + " on " + host.data() + ": " +
         (command.empty() ? std::string{"spillway"} : command);
}

/** @return what the holder wrote into the lock file open as `descriptor` (one line) */
std::string read_holder(int descriptor) {
  auto const deadline = std::chrono::steady_clock::now() + HOLDER_NAME_WAIT;
  std::string text;
  while (true) {
    std::array<char, MAX_COMMAND_CHARS + 256> buffer{};
    auto const read = ::pread(descriptor, buffer.data(), buffer.size() - 1, 0);
    text            = read > 0 ? std::string(buffer.data(), static_cast<std::size_t>(read)) : "";
    // The holder writes its name just after it took the lock: wait a moment for it.
    if (!text.empty() || std::chrono::steady_clock::now() >= deadline) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  for (auto& c : text) {
    if (c == '\n' || c == '\0') {
      c = ' ';
    }
  }
  while (!text.empty() && text.back() == ' ') {
    text.pop_back();
  }
  return text.empty() ? std::string{"a process that has not named itself yet"} : text;
}

}  // namespace

output_lock::output_lock(std::string directory)
  : directory_(std::move(directory)), path_(directory_ + "/" + std::string{FILE_NAME}) {
  for (int attempt = 0; attempt < LOCK_ATTEMPTS; ++attempt) {
    int const descriptor = ::open(path_.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (descriptor < 0) {
      throw usage_error("output directory '" + directory_ + "' is not writable: cannot create '" +
                        path_ + "': " + std::strerror(errno));
    }
    if (::flock(descriptor, LOCK_EX | LOCK_NB) != 0) {
      int const error = errno;
      if (error == EWOULDBLOCK) {
        auto const holder = read_holder(descriptor);
        ::close(descriptor);
        throw std::runtime_error("output directory '" + directory_ +
                                 "' is in use by another spillway run (" + holder +
                                 "); wait for it to end, or write elsewhere");
      }
      ::close(descriptor);
      throw std::runtime_error("cannot lock '" + path_ + "': " + std::strerror(error));
    }
    // The name must still lead to the file locked: its holder removes it when it lets go.
    struct stat locked {};
    struct stat named {};
    if (::fstat(descriptor, &locked) == 0 && ::stat(path_.c_str(), &named) == 0 &&
        locked.st_dev == named.st_dev && locked.st_ino == named.st_ino) {
      descriptor_        = descriptor;
      auto const holder  = describe_this_process() + "\n";
      bool const written = ::ftruncate(descriptor_, 0) == 0 &&
                           ::pwrite(descriptor_, holder.data(), holder.size(), 0) ==
                             static_cast<ssize_t>(holder.size());
      static_cast<void>(written);  // the lock holds without its holder's name
      return;
    }
    ::close(descriptor);
  }
  throw std::runtime_error("cannot lock '" + path_ + "': it keeps being replaced");
}

output_lock::~output_lock() {
  // Removed while still held: a run waiting on this file then finds the name gone and retries.
  ::unlink(path_.c_str());
  ::close(descriptor_);
}

}  // namespace spillway::cli
