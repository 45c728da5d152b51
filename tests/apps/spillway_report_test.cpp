/**
 * End-to-end tests of `spillway sort --report`, `spillway shuffle --report` and of the progress
 * line: runs the built tool (SPILLWAY_EXE) on a small sort that spills and checks the report files,
 * and that the progress line appears on a terminal only.
 */
#include "cli_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <unistd.h>

namespace {

namespace fs = std::filesystem;
using spillway::cli_testing::spillway_exe;

/// A sort of this many rows at these budgets spills to host and to disk.
constexpr char const* SPILLING_SORT =
  "sort in -o out --by key --device-memory 4MiB --host-memory 1MiB --spill-dir spill";

class SpillwayReport : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_            = fs::temp_directory_path() /
            ("spillway_report_" + std::to_string(::getpid()) + "_" + info->name());
    fs::remove_all(root_);
    fs::create_directories(root_ / "spill");
    ASSERT_EQ(run("gen uniform --rows 200000 -o in"), 0);
  }
  void TearDown() override { fs::remove_all(root_); }

  /** @brief Runs `spillway <arguments>` in the test's root; stderr goes to stderr.txt. */
  int run(std::string const& arguments) const {
    std::string const command = "cd '" + root_.string() + "' && '" + spillway_exe() + "' " +
                                arguments + " > stdout.txt 2> stderr.txt";
    int const status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  }

  [[nodiscard]] std::string read(std::string const& name) const {
    std::ifstream file{root_ / name};
    std::stringstream text;
    text << file.rdbuf();
    return text.str();
  }

  fs::path root_;
};

TEST_F(SpillwayReport, SortWritesHtmlAndJsonReport) {
  ASSERT_EQ(run(std::string{SPILLING_SORT} + " --report report.html"), 0) << read("stderr.txt");
  ASSERT_TRUE(fs::exists(root_ / "report.html"));
  ASSERT_TRUE(fs::exists(root_ / "report.json"));

  auto const json    = nlohmann::json::parse(read("report.json"));
  auto const& series = json.at("series");
  for (auto const* name :
       {"seconds", "device", "host", "disk", "spilled", "unspilled", "retries"}) {
    ASSERT_TRUE(series.contains(name)) << name;
    EXPECT_GE(series.at(name).size(), 2U) << name << ": at least the start and end samples";
  }
  EXPECT_EQ(series.at("device").size(), series.at("seconds").size());
  // Gauges are sampled every 50 ms, and a small sort in a release build can finish between two
  // samples with its tiers empty again; the event counts below are exact whatever the timing.
  EXPECT_GT(json.at("event_counts").at("unspilled").at("count").get<std::size_t>(), 0U);
  EXPECT_GT(series.at("spilled").back().get<std::size_t>(), 0U);
  EXPECT_GT(json.at("event_counts").at("spilled").at("count").get<std::size_t>(), 0U);
  EXPECT_FALSE(json.at("events").empty());

  auto const html = read("report.html");
  for (auto const* name : {"device", "host", "disk", "spilled", "unspilled", "retries"}) {
    EXPECT_NE(html.find(std::string{"data-series=\""} + name + "\""), std::string::npos) << name;
  }
  EXPECT_EQ(html.find("http://"), std::string::npos);
  EXPECT_EQ(html.find("https://"), std::string::npos);
}

TEST_F(SpillwayReport, ALaneForTheTasksOfTheSort) {
  ASSERT_EQ(run(std::string{SPILLING_SORT} + " --tasks 3 --report report.html"), 0)
    << read("stderr.txt");
  auto const json  = nlohmann::json::parse(read("report.json"));
  auto const tasks = json.at("tasks");
  // Task 1 holds the device at least to merge; the others whenever they got a batch.
  ASSERT_GE(tasks.size(), 1U);
  ASSERT_LE(tasks.size(), 3U);
  EXPECT_EQ(tasks[0].at("task"), 1);
  for (auto const& task : tasks) {
    EXPECT_GE(task.at("semaphore_acquires").get<std::size_t>(), 1U);
    EXPECT_EQ(task.at("semaphore_held").size(), task.at("semaphore_acquires").get<std::size_t>());
    EXPECT_GE(task.at("leases").get<std::size_t>(), 1U) << "the base lease of each hold";
  }
  auto const html = read("report.html");
  EXPECT_NE(html.find("data-chart=\"task-lanes\""), std::string::npos);
}

TEST_F(SpillwayReport, ConcurrentRanksAndTasksOfAShuffleEachReportTheirDeviceWithALanePerTask) {
  // Each rank has a device of its own: rank r's report is report.rank-<r>.html. Each rank reads
  // one of the two files.
  ASSERT_EQ(run("gen uniform --rows 200000 --files 2 -o two"), 0);
  ASSERT_EQ(run("shuffle two -o out --by key --partitions 4 --ranks 2 --tasks 3 --device-tasks 2"
                " --device-memory 1MiB --host-memory 1MiB --batch-size 64KiB --spill-dir spill"
                " --report report.html"),
            0)
    << read("stderr.txt");
  EXPECT_FALSE(fs::exists(root_ / "report.html"));
  for (auto const* rank : {"0", "1"}) {
    SCOPED_TRACE(rank);
    auto const name = std::string{"report.rank-"} + rank;
    ASSERT_TRUE(fs::exists(root_ / (name + ".html")));
    auto const json    = nlohmann::json::parse(read(name + ".json"));
    auto const& series = json.at("series");
    EXPECT_GE(series.at("seconds").size(), 2U) << "at least the start and end samples";
    EXPECT_GT(series.at("rows").back().get<std::size_t>(), 0U) << "rows read and written";
    EXPECT_GT(json.at("event_counts").at("spilled").at("count").get<std::size_t>(), 0U)
      << "a device of 1 MiB spills the shards of 100000 rows";
    // The rank's map tasks (ids after the rank's own), each of which held the device.
    auto const tasks = json.at("tasks");
    ASSERT_GE(tasks.size(), 1U);
    ASSERT_LE(tasks.size(), 4U) << "the rank's own task and its 3 map tasks";
    std::size_t acquires = 0;
    for (auto const& task : tasks) {
      EXPECT_EQ(task.at("semaphore_held").size(), task.at("semaphore_acquires").get<std::size_t>());
      acquires += task.at("semaphore_acquires").get<std::size_t>();
    }
    EXPECT_EQ(acquires, json.at("event_counts").at("semaphore_acquired").at("count"))
      << "each map step holds the semaphore";
    auto const html = read(name + ".html");
    EXPECT_NE(html.find("data-chart=\"task-lanes\""), std::string::npos);
    EXPECT_NE(html.find(std::string{"rank "} + rank + " of 2"), std::string::npos);
  }

  ASSERT_EQ(run("shuffle in -o one --by key --partitions 4 --report one.html"), 0)
    << read("stderr.txt");
  EXPECT_TRUE(fs::exists(root_ / "one.html"));
  EXPECT_TRUE(fs::exists(root_ / "one.json"));
  EXPECT_EQ(run("shuffle in -o two --by key --partitions 4 --report one.json"), 2);
  EXPECT_NE(read("stderr.txt").find("--report"), std::string::npos) << read("stderr.txt");
}

TEST_F(SpillwayReport, NoProgressLineWhenStderrIsNotATerminal) {
  ASSERT_EQ(run(SPILLING_SORT), 0);
  auto const err = read("stderr.txt");
  EXPECT_EQ(err.find('\r'), std::string::npos) << err;
  EXPECT_EQ(err.find("ETA"), std::string::npos) << err;
  // The summary, and at this budget of 1 MiB the warning that the host budget was exceeded.
  std::istringstream lines{err};
  std::size_t summaries = 0;
  for (std::string line; std::getline(lines, line);) {
    summaries += line.starts_with("spillway sort: ") && line.find("warning") == std::string::npos;
    EXPECT_TRUE(line.starts_with("spillway sort: ")) << err;
  }
  EXPECT_EQ(summaries, 1U) << err;
  EXPECT_LE(std::count(err.begin(), err.end(), '\n'), 2) << err;
  EXPECT_FALSE(fs::exists(root_ / "report.json"));
}

TEST_F(SpillwayReport, ProgressLineOnATerminal) {
  if (std::system("command -v script > /dev/null 2>&1") != 0) {
    GTEST_SKIP() << "util-linux `script` is not on PATH: cannot run the tool on a terminal";
  }
  // A bigger sort, so that it lasts past one redraw period.
  ASSERT_EQ(run("gen uniform --rows 2000000 -o big"), 0);
  std::string const command = "cd '" + root_.string() + "' && script -qec \"'" + spillway_exe() +
                              "' sort big -o out --by key --device-memory 16MiB --host-memory "
                              "8MiB --spill-dir spill\" typescript.txt > /dev/null 2>&1";
  ASSERT_EQ(std::system(command.c_str()), 0) << read("typescript.txt");
  auto const typescript = read("typescript.txt");
  EXPECT_NE(typescript.find("\r\033[K"), std::string::npos) << typescript;
  EXPECT_NE(typescript.find(" rows/s, ETA "), std::string::npos) << typescript;
  EXPECT_NE(typescript.find("| device "), std::string::npos) << typescript;
  EXPECT_NE(typescript.find("spillway sort: 2000000 rows"), std::string::npos) << typescript;
}

TEST_F(SpillwayReport, ReportPathMustNotBeTheJson) {
  EXPECT_EQ(run(std::string{SPILLING_SORT} + " --report report.json"), 2);
  EXPECT_NE(read("stderr.txt").find("--report"), std::string::npos) << read("stderr.txt");
}

}  // namespace
