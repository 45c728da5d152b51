#include "spill/spill_test_fixture.hpp"

#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace spillway::testing {
namespace {

class SpillDirectoryTest : public spill_fixture {};

TEST_F(SpillDirectoryTest, DirectoriesOfDeadProcessesGoAtStart) {
  // No process has pid 2147483646 (pid_max is at most 2^22 on Linux).
  auto const dead      = root_ / "spillway-2147483646";
  auto const dead_more = root_ / "spillway-2147483646.3";
  auto const alive     = root_ / ("spillway-" + std::to_string(::getppid()));
  auto const unrelated = root_ / "spillway-notapid";
  for (auto const& path : {dead, dead_more, alive, unrelated}) {
    std::filesystem::create_directories(path);
    std::ofstream(path / "spill-0.blk") << "x";
  }
  spill_store store(options());
  EXPECT_FALSE(std::filesystem::exists(dead));
  EXPECT_FALSE(std::filesystem::exists(dead_more));
  EXPECT_TRUE(std::filesystem::exists(alive));
  EXPECT_TRUE(std::filesystem::exists(unrelated));
  EXPECT_EQ(remove_stale_spill_directories(root_.string(), default_file_system()), 0U);
}

TEST_F(SpillDirectoryTest, StoreDirectoryIsNamedAfterThePidAndRemovedWithTheStore) {
  std::string directory;
  {
    spill_store store(options());
    directory = store.directory();
    EXPECT_EQ(std::filesystem::path(directory).parent_path(), root_);
    EXPECT_EQ(std::filesystem::path(directory).filename().string().rfind(
                "spillway-" + std::to_string(::getpid()), 0),
              0U);
    auto handle = store.make_spillable(make_table(50, 1).first, 0);
    (void)store.spill(1_GiB, spill_tier::DEVICE);
    (void)store.spill(1_GiB, spill_tier::HOST);
    store.wait_for_io();
    EXPECT_EQ(handle.tier(), spill_tier::DISK);
    EXPECT_TRUE(std::filesystem::exists(directory));
  }
  EXPECT_FALSE(std::filesystem::exists(directory));
}

TEST_F(SpillDirectoryTest, SignalHandlerFunctionRemovesLiveDirectories) {
  spill_store store(options());
  auto handle = store.make_spillable(make_table(50, 1).first, 0);
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  ASSERT_TRUE(std::filesystem::exists(store.directory()));
  remove_spill_directory_now();
  EXPECT_FALSE(std::filesystem::exists(store.directory()));
  handle.release();  // the store copes with its files gone
}

TEST_F(SpillDirectoryTest, DirectoriesRemovedOnSignalOnlyWhenEmptyKeepTheirFilesAndGoLast) {
  // A command's output directory (removed only when empty) holding its staging directory (flat):
  // the staging goes first, then the output; an output holding a file stays, with the file.
  auto const output  = root_ / "out";
  auto const staging = output / ".staging";
  auto const kept    = root_ / "kept";
  std::filesystem::create_directories(staging);
  std::filesystem::create_directories(kept);
  std::ofstream(staging / "part-0.parquet") << "x";
  std::ofstream(kept / "someone-elses.txt") << "x";
  {
    removed_on_signal const output_cleanup(output.string(), true);  // registered first
    removed_on_signal const staging_cleanup(staging.string());
    removed_on_signal const kept_cleanup(kept.string(), true);
    remove_spill_directory_now();
  }
  EXPECT_FALSE(std::filesystem::exists(staging));
  EXPECT_FALSE(std::filesystem::exists(output));
  EXPECT_TRUE(std::filesystem::exists(kept / "someone-elses.txt"));
  // Unregistered when they go: nothing is removed any more.
  std::filesystem::create_directories(output);
  remove_spill_directory_now();
  EXPECT_TRUE(std::filesystem::exists(output));
}

TEST_F(SpillDirectoryTest, SigtermRemovesSpillFilesAndStillKillsTheProcess) {
  for (int const signal_number : {SIGTERM, SIGINT}) {
    int ready[2];
    ASSERT_EQ(::pipe(ready), 0);
    pid_t const child = ::fork();
    ASSERT_NE(child, -1);
    if (child == 0) {
      // The child spills to disk, reports its directory, and is killed by the signal.
      ::close(ready[0]);
      install_spill_cleanup_on_signals();
      spill_store store(options(64_KiB));
      auto handle = store.make_spillable(make_table(3000, 2).first, 0);
      (void)store.spill(1_GiB, spill_tier::DEVICE);
      (void)store.spill(1_GiB, spill_tier::HOST);
      store.wait_for_io();
      std::string const directory = store.directory() + "\n";
      if (spill_files(store).empty()) {
        ::_exit(3);
      }
      (void)::write(ready[1], directory.data(), directory.size());
      ::raise(signal_number);
      ::_exit(4);  // not reached: the signal kills the process
    }
    ::close(ready[1]);
    std::string directory;
    char c = 0;
    while (::read(ready[0], &c, 1) == 1 && c != '\n') {
      directory += c;
    }
    ::close(ready[0]);
    int status = 0;
    ASSERT_EQ(::waitpid(child, &status, 0), child);
    ASSERT_TRUE(WIFSIGNALED(status)) << "child exited with " << WEXITSTATUS(status);
    EXPECT_EQ(WTERMSIG(status), signal_number);
    ASSERT_FALSE(directory.empty());
    EXPECT_FALSE(std::filesystem::exists(directory)) << directory;
  }
}

TEST_F(SpillDirectoryTest, MatchingFilesRemovedOnSignalLeaveTheDirectoryAndItsOtherFiles) {
  // A writer's temporaries in a directory it shares with someone else's files: only they go, with
  // the flat directories, before a directory removed only when empty (which then stays).
  auto const output = root_ / "out";
  std::filesystem::create_directories(output);
  for (auto const* name : {".part-00000.parquet.tmp",
                           ".part-00001.csv.tmp",
                           ".spillway-lock",
                           "README.md",
                           ".part-00000.parquet",
                           "part-00000.parquet.tmp"}) {
    std::ofstream(output / name) << "x";
  }
  {
    removed_on_signal const output_cleanup(output.string(), true);
    removed_on_signal const temporaries(output.string(), ".part-", ".tmp");
    removed_on_signal const lock(output.string(), ".spillway-lock", "");
    removed_on_signal const too_long(output.string(), std::string(40, 'x'), "");
    remove_spill_directory_now();
  }
  std::vector<std::string> left;
  for (auto const& entry : std::filesystem::directory_iterator(output)) {
    left.push_back(entry.path().filename().string());
  }
  std::sort(left.begin(), left.end());
  EXPECT_EQ(
    left, (std::vector<std::string>{".part-00000.parquet", "README.md", "part-00000.parquet.tmp"}));
  // Once the matching files are gone, the directory removed only when empty goes last.
  std::filesystem::remove(output / ".part-00000.parquet");
  std::filesystem::remove(output / "README.md");
  std::filesystem::remove(output / "part-00000.parquet.tmp");
  std::ofstream(output / ".part-00002.parquet.tmp") << "x";
  {
    removed_on_signal const temporaries(output.string(), ".part-", ".tmp");
    removed_on_signal const output_cleanup(output.string(), true);
    remove_spill_directory_now();
  }
  EXPECT_FALSE(std::filesystem::exists(output));
}

}  // namespace
}  // namespace spillway::testing
