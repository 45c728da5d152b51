/**
 * @file output_fixture.hpp
 * @brief What the tests of output directories share: a `spillway` run in the background (to
 * signal it or race it), the lock of an output directory held as another run holds it, and a
 * look at every entry of a directory, hidden ones included.
 */
#pragma once

#include "cli_fixture.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>
#include <sys/file.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway::cli_testing {

/**
 * @brief A `spillway` run in the background (its own process, stdout and stderr to files under
 * the test's root), for sending it signals and for racing it. Killed with SIGKILL and waited for
 * when destroyed while it still runs.
 */
class background_run {
 public:
  background_run(fs::path const& root, std::vector<std::string> const& arguments) : root_(root) {
    std::vector<std::string> words{spillway_exe()};
    words.insert(words.end(), arguments.begin(), arguments.end());
    std::vector<char*> argv;
    for (auto& word : words) {
      argv.push_back(word.data());
    }
    argv.push_back(nullptr);
    std::string const directory = root.string();
    std::string const out       = (root / "background.out").string();
    std::string const err       = (root / "background.err").string();
    pid_                        = ::fork();
    if (pid_ == 0) {  // only async-signal-safe calls until exec
      if (::chdir(directory.c_str()) != 0) {
        ::_exit(126);
      }
      int const out_fd = ::open(out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      int const err_fd = ::open(err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
      if (out_fd < 0 || err_fd < 0 || ::dup2(out_fd, 1) < 0 || ::dup2(err_fd, 2) < 0) {
        ::_exit(126);
      }
      ::execv(argv[0], argv.data());
      ::_exit(127);
    }
  }
  ~background_run() {
    if (pid_ > 0 && !status_) {
      ::kill(pid_, SIGKILL);
      wait();
    }
  }
  background_run(background_run const&)            = delete;
  background_run& operator=(background_run const&) = delete;
  background_run(background_run&&)                 = delete;
  background_run& operator=(background_run&&)      = delete;

  [[nodiscard]] pid_t pid() const noexcept { return pid_; }

  /** @return whether it still runs (reaps it when it ended) */
  bool running() {
    if (status_) {
      return false;
    }
    int status = 0;
    if (::waitpid(pid_, &status, WNOHANG) == pid_) {
      status_ = status;
      return false;
    }
    return true;
  }

  /** @return its wait status, once it ended */
  int wait() {
    if (!status_) {
      int status = 0;
      while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
      }
      status_ = status;
    }
    return *status_;
  }

  /** @return what it printed on stderr so far */
  [[nodiscard]] std::string err() const {
    std::ifstream in{root_ / "background.err"};
    return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
  }

  /**
   * @brief Waits until `found` is true, while the run goes on (at most a minute).
   * @return whether it became true while the run still ran
   */
  template <typename Predicate>
  bool wait_until(Predicate const& found) {
    auto const deadline = std::chrono::steady_clock::now() + std::chrono::minutes(1);
    while (std::chrono::steady_clock::now() < deadline) {
      if (found()) {
        return running();
      }
      if (!running()) {
        return false;
      }
      std::this_thread::sleep_for(std::chrono::microseconds(500));
    }
    return false;
  }

 private:
  fs::path root_;
  pid_t pid_ = -1;
  std::optional<int> status_;
};

/** @return every entry (files and directories, hidden ones too) directly in `directory` */
inline std::vector<std::string> entries_in(fs::path const& directory) {
  std::vector<std::string> names;
  std::error_code error;
  for (auto const& entry : fs::directory_iterator(directory, error)) {
    names.push_back(entry.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

/** @return whether `directory` holds a temporary file of a writer (`.<name>.tmp`) */
inline bool holds_temporaries(fs::path const& directory) {
  auto const names = entries_in(directory);
  return std::any_of(names.begin(), names.end(), [](std::string const& name) {
    return name.starts_with('.') && name.ends_with(".tmp");
  });
}

/** @brief Writes `text` to `file`. */
inline void write_text(std::string const& file, std::string const& text) {
  std::ofstream out{file, std::ios::binary | std::ios::trunc};
  out << text;
}

/** @brief Holds the lock of an output directory as another spillway run would, while it lives. */
class held_lock {
 public:
  held_lock(std::string const& directory, std::string const& holder) {
    fs::create_directories(directory);
    fd_ = ::open((directory + "/.spillway-lock").c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    EXPECT_GE(fd_, 0);
    EXPECT_EQ(::flock(fd_, LOCK_EX | LOCK_NB), 0);
    EXPECT_EQ(::write(fd_, holder.data(), holder.size()), static_cast<ssize_t>(holder.size()));
  }
  ~held_lock() { ::close(fd_); }
  held_lock(held_lock const&)            = delete;
  held_lock& operator=(held_lock const&) = delete;
  held_lock(held_lock&&)                 = delete;
  held_lock& operator=(held_lock&&)      = delete;

 private:
  int fd_ = -1;
};

}  // namespace spillway::cli_testing
