#include "spill/spill_test_fixture.hpp"

#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <unistd.h>

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

}  // namespace
}  // namespace spillway::testing
