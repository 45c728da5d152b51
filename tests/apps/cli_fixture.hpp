/**
 * @file cli_fixture.hpp
 * @brief The fixture of the end-to-end tests of the `spillway` tool: a fresh temporary directory
 * per test, running the built executable (SPILLWAY_EXE) in it, and checks of what a failed
 * command leaves behind.
 */
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace spillway::cli_testing {

/**
 * @return the `spillway` executable: $SPILLWAY_EXE when set (binaries copied to another machine),
 * else the one this build made
 */
inline std::string spillway_exe() {
  char const* const relocated = std::getenv("SPILLWAY_EXE");
  return relocated != nullptr && *relocated != '\0' ? std::string{relocated} : SPILLWAY_EXE;
}

namespace fs = std::filesystem;

/** @brief What one run of the tool did. */
struct run_result {
  int exit_code = -1;
  std::string out;  ///< stdout
  std::string err;  ///< stderr
};

class SpillwayCli : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = std::string{info->test_suite_name()} + "_" + info->name();
    for (auto& c : name) {
      if (c == '/') {
        c = '_';
      }
    }
    root_ = fs::temp_directory_path() / ("spillway_cli_" + std::to_string(::getpid()) + "_" + name);
    fs::remove_all(root_);
    fs::create_directories(root_ / "spill");
  }
  void TearDown() override { fs::remove_all(root_); }

  [[nodiscard]] std::string path(std::string const& name) const { return (root_ / name).string(); }

  /** @brief Runs `spillway <arguments>` with the working directory at the test's root. */
  run_result run(std::string const& arguments) const {
    return run_launched("'" + spillway_exe() + "' " + arguments);
  }

  /**
   * @brief Runs a command line that starts the tool itself (e.g. through mpirun), with the
   * working directory at the test's root.
   */
  run_result run_launched(std::string const& command_line) const {
    auto const err_file = root_ / "stderr.txt";
    std::string const command =
      "cd '" + root_.string() + "' && " + command_line + " 2> '" + err_file.string() + "'";
    run_result result;
    FILE* pipe = ::popen(command.c_str(), "r");
    if (pipe == nullptr) {
      ADD_FAILURE() << "popen failed: " << command;
      return result;
    }
    std::array<char, 4096> chunk{};
    std::size_t read = 0;
    while ((read = std::fread(chunk.data(), 1, chunk.size(), pipe)) > 0) {
      result.out.append(chunk.data(), read);
    }
    int const status = ::pclose(pipe);
    result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
    std::ifstream in{err_file};
    result.err.assign(std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{});
    return result;
  }

  /** @brief Runs and expects success, printing stderr when not. */
  run_result run_ok(std::string const& arguments) const {
    return launched_ok("'" + spillway_exe() + "' " + arguments);
  }

  /** @brief `run_launched`, expecting success. */
  run_result launched_ok(std::string const& command_line) const {
    auto result = run_launched(command_line);
    EXPECT_EQ(result.exit_code, 0) << command_line << "\n" << result.err;
    return result;
  }

  /** @return the visible files under `directory` (none when it does not exist) */
  [[nodiscard]] std::vector<std::string> files_in(std::string const& directory) const {
    std::vector<std::string> files;
    std::error_code error;
    if (!fs::exists(path(directory), error)) {
      return files;
    }
    for (auto const& entry : fs::recursive_directory_iterator(path(directory))) {
      if (entry.is_regular_file()) {
        files.push_back(entry.path().filename().string());
      }
    }
    return files;
  }

  /** @brief A failed command: its status, one `spillway: error:` line naming `needle`, no output.
   */
  void expect_failure(run_result const& result,
                      int exit_code,
                      std::string const& needle,
                      std::string const& output) const {
    EXPECT_EQ(result.exit_code, exit_code) << result.err;
    EXPECT_EQ(result.err.rfind("spillway: error: ", 0), 0U) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
    EXPECT_NE(result.err.find(needle), std::string::npos) << result.err;
    EXPECT_EQ(result.err.find("spillway failure at"), std::string::npos)
      << "the message names a call site of the library: " << result.err;
    EXPECT_TRUE(files_in(output).empty()) << "partial output left in " << output;
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  }

  fs::path root_;
};

}  // namespace spillway::cli_testing
