/**
 * @file spillway_tasks_test.cpp
 * @brief `spillway sort` and `spillway shuffle` as many tasks on one device: the same output
 * whatever the threads, tasks and device tasks, every task's work in the JSON summary, and many
 * tasks on a device that holds two base leases finishing without a deadlock.
 */
#include "cli_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

namespace {

namespace fs = std::filesystem;
using spillway::cli_testing::spillway_exe;
using spillway::cli_testing::SpillwayCli;

/// Enough batches (of 64 KiB) for every task to get some, on a device that spills.
constexpr char const* BUDGETS = " --device-memory 2MiB --host-memory 4MiB --batch-size 64KiB";

std::string contents(std::string const& file) {
  std::ifstream in{file, std::ios::binary};
  return {std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}};
}

/// The JSON summary: the last line of stdout that starts with '{'.
nlohmann::json last_json_line(std::string const& out) {
  auto const at = out.rfind("\n{");
  return nlohmann::json::parse(out.substr(at == std::string::npos ? 0 : at + 1));
}

class SpillwayTasks : public SpillwayCli {};

TEST_F(SpillwayTasks, TheSameOutputForEveryNumberOfThreadsTasksAndDeviceTasks) {
  // Unique keys (uniform int64s): one sorted order, so the same bytes.
  run_ok("gen uniform --rows 60000 --files 3 --seed 11 -o in");
  run_ok("sort in -o reference --by key --tasks 1 --device-tasks 1 --threads 1" +
         std::string{BUDGETS});
  auto const reference_files = files_in("reference");
  ASSERT_EQ(reference_files.size(), 1U);
  auto const reference = contents(path("reference/" + reference_files[0]));
  for (int const threads : {1, 2, 3, 8, 16}) {
    for (int const tasks : {1, 4, 16}) {
      for (int const device_tasks : {1, 2, 4}) {
        std::string const flags = " --threads " + std::to_string(threads) + " --tasks " +
                                  std::to_string(tasks) + " --device-tasks " +
                                  std::to_string(device_tasks);
        SCOPED_TRACE(flags);
        auto const result =
          run_ok("sort in -o out --overwrite --by key --json" + flags + std::string{BUDGETS});
        auto const summary = last_json_line(result.out);
        EXPECT_EQ(summary["tasks"], tasks);
        EXPECT_EQ(summary["device_tasks"], device_tasks);
        ASSERT_EQ(summary["per_task"].size(), static_cast<std::size_t>(tasks));
        std::size_t rows = 0;
        for (auto const& task : summary["per_task"]) {
          rows += task["rows"].get<std::size_t>();
        }
        EXPECT_EQ(rows, 60000U) << "every row sorted by exactly one task";
        auto const files = files_in("out");
        ASSERT_EQ(files.size(), 1U);
        EXPECT_TRUE(contents(path("out/" + files[0])) == reference) << "other bytes";
      }
    }
  }
}

TEST_F(SpillwayTasks, ManyTasksSortTiesAndStringsInOrder) {
  // Heavy ties and string keys: tasks may order equal keys among themselves as they like, so
  // `verify` checks the order and that the rows are the input's.
  run_ok("gen skewed --rows 40000 --files 2 --seed 3 -o skewed");
  run_ok("gen strings --rows 20000 --files 2 --seed 4 -o strings");
  for (std::string const input : {"skewed", "strings"}) {
    SCOPED_TRACE(input);
    run_ok("sort " + input + " -o out --overwrite --by key:desc --tasks 8 --device-tasks 2" +
           std::string{BUDGETS});
    run_ok("verify out --by key:desc --against " + input);
  }
}

TEST_F(SpillwayTasks, ConcurrentReadersOfPiecesOfManyRowGroupsSortEveryRowOnce) {
  // Three files of 16 row groups each, read by as many readers as threads (the budgets allow
  // sixteen), more threads than cores: each piece's batches in order, the pieces' interleaved.
  run_ok("gen strings --rows 48000 --files 3 --row-group-rows 1000 --seed 21 -o in");
  for (int const threads : {2, 8}) {
    SCOPED_TRACE(threads);
    auto const result = run_ok("sort in -o out --overwrite --by key --json --threads " +
                               std::to_string(threads) + std::string{BUDGETS});
    EXPECT_EQ(last_json_line(result.out)["readers"], threads);
    run_ok("verify out --by key --against in");
  }
  // One thread: one reader, one batch ahead.
  auto const one =
    run_ok("sort in -o out --overwrite --by key --json --threads 1" + std::string{BUDGETS});
  EXPECT_EQ(last_json_line(one.out)["readers"], 1);
}

TEST_F(SpillwayTasks, ReadersNameAFileWithOtherColumnsBesideTheFirst) {
  // The last file of the dataset has other columns: whichever reader opens it names it beside a
  // file of the dataset's columns (the first of its piece, or of the dataset), and nothing is
  // written.
  run_ok("gen uniform --rows 8000 --files 3 --row-group-rows 500 --seed 5 -o mixed");
  run_ok("gen strings --rows 1000 --files 1 -o other");
  auto const other = files_in("other");
  ASSERT_EQ(other.size(), 1U);
  fs::copy_file(path("other") + "/" + other.front(), path("mixed") + "/zz.parquet");
  auto const result =
    run("sort mixed -o out --by key --threads 4 --spill-dir spill" + std::string{BUDGETS});
  expect_failure(result, 1, "zz.parquet' has columns (key: string", "out");
  EXPECT_NE(result.err.find("unlike those of 'mixed/part-"), std::string::npos) << result.err;
  EXPECT_NE(result.err.find("(key: int64"), std::string::npos) << result.err;
}

TEST_F(SpillwayTasks, ConcurrentSixteenTasksOnADeviceOfTwoBaseLeasesFinish) {
  // The base lease is four batches of an eighth of the device: two of them fill it. Sixteen tasks
  // queue for the two slots, lend and borrow, and the OOM protocol rolls back and splits among
  // them; under ThreadSanitizer too (a test named Concurrent*). `timeout` turns a deadlock into a
  // failure.
  run_ok("gen strings --rows 30000 --files 2 --seed 9 -o in");
  auto const result =
    launched_ok("timeout -k 5 240 '" + spillway_exe() +
                "' sort in -o out --by key --json --tasks 16 --device-tasks 2 --threads 4"
                " --device-memory 1MiB --host-memory 4MiB --batch-size 16KiB");
  auto const summary = last_json_line(result.out);
  EXPECT_EQ(summary["per_task"].size(), 16U);
  run_ok("verify out --by key --against in");
}

TEST_F(SpillwayTasks, TheSameShuffleForEveryNumberOfThreadsTasksAndDeviceTasks) {
  // String keys on a device that spills: the map numbers follow the read order, so every
  // partition's file holds the same bytes whatever runs the map tasks.
  run_ok("gen strings --rows 40000 --files 3 --seed 12 -o in");
  std::string const shuffle =
    "shuffle in --by key --partitions 4 --json --device-memory 2MiB --host-memory 8MiB "
    "--batch-size 32KiB";
  run_ok(shuffle + " -o reference --tasks 1 --device-tasks 1 --threads 1");
  auto const reference_files = files_in("reference");
  ASSERT_EQ(reference_files.size(), 4U);
  for (int const threads : {1, 2, 3, 8, 16}) {
    for (int const tasks : {1, 4, 16}) {
      for (int const device_tasks : {1, 2, 4}) {
        std::string const flags = " --threads " + std::to_string(threads) + " --tasks " +
                                  std::to_string(tasks) + " --device-tasks " +
                                  std::to_string(device_tasks);
        SCOPED_TRACE(flags);
        auto const result =
          run_ok(shuffle + " -o out --overwrite" + flags + (threads == 3 ? " --mode pull" : ""));
        auto const summary = last_json_line(result.out);
        EXPECT_EQ(summary["tasks"], tasks);
        EXPECT_EQ(summary["device_tasks"], device_tasks);
        ASSERT_EQ(summary["per_task"].size(), static_cast<std::size_t>(tasks));
        std::size_t rows = 0;
        std::size_t maps = 0;
        for (auto const& task : summary["per_task"]) {
          rows += task["rows"].get<std::size_t>();
          maps += task["maps"].get<std::size_t>();
          EXPECT_GE(task["leases"], task["maps"]) << "a base lease per map step at least";
          if (task["maps"].get<std::size_t>() > 0) {
            EXPECT_GT(task["device_seconds"].get<double>(), 0.0) << "it held the device";
          }
        }
        EXPECT_EQ(rows, 40000U) << "every row mapped by exactly one task";
        EXPECT_GT(maps, 3U);
        ASSERT_EQ(files_in("out"), reference_files);
        for (auto const& file : reference_files) {
          EXPECT_TRUE(contents(path("out/" + file)) == contents(path("reference/" + file)))
            << file << " has other bytes";
        }
      }
    }
  }
}

TEST_F(SpillwayTasks, ConcurrentSixteenShuffleTasksOnADeviceOfTwoBaseLeasesFinish) {
  // Two ranks of sixteen map tasks, two at a time on a device that holds two base leases: the
  // map steps fail for memory, roll back and run again alone while the others wait; under
  // ThreadSanitizer too. `timeout` turns a deadlock into a failure.
  run_ok("gen strings --rows 30000 --files 2 --seed 9 -o in");
  auto const result = launched_ok(
    "timeout -k 5 240 '" + spillway_exe() +
    "' shuffle in -o out --by key --partitions 3 --ranks 2 --json --tasks 16 --device-tasks 2"
    " --threads 4 --device-memory 1MiB --host-memory 4MiB --batch-size 16KiB");
  auto const summary = last_json_line(result.out);
  EXPECT_EQ(summary["rows"], 30000);
  EXPECT_EQ(summary["per_task"].size(), 16U);
  // The same files as one task on a device that holds everything: the partition writers' row
  // groups follow the host budget alone, so that budget stays.
  run_ok("gen strings --rows 30000 --files 2 --seed 9 -o again");
  run_ok(
    "shuffle again -o reference --by key --partitions 3 --ranks 2 --tasks 1"
    " --device-memory 64MiB --host-memory 4MiB --batch-size 16KiB");
  ASSERT_EQ(files_in("out"), files_in("reference"));
  for (auto const& file : files_in("reference")) {
    EXPECT_TRUE(contents(path("out/" + file)) == contents(path("reference/" + file)))
      << file << " has other bytes";
  }
}

TEST_F(SpillwayTasks, EachTasksRollBacksAreCountedInItsSummary) {
  // The second device allocation of every task fails once (injected): each task that copied a
  // batch onto the device rolled back once, and its line of the summary says so.
  run_ok("gen uniform --rows 30000 --files 2 --seed 5 -o in");
  // The JSON summary of `spillway <command>` on 4 tasks with that failure injected.
  auto const injected = [&](std::string const& kind, std::string const& command) {
    return last_json_line(launched_ok("SPILLWAY_INJECT_OOM=task=*,kind=" + kind +
                                      ",skip=1,count=1 '" + spillway_exe() + "' " + command +
                                      " --overwrite --json --tasks 4 --device-tasks 2 --threads 4" +
                                      std::string{BUDGETS})
                            .out);
  };
  for (std::string const kind : {"retry", "split"}) {
    SCOPED_TRACE(kind);
    auto const summary        = injected(kind, "sort in -o sorted --by key");
    std::string const counted = kind == "retry" ? "retries" : "splits";
    std::size_t sum           = 0;
    for (auto const& task : summary["per_task"]) {
      SCOPED_TRACE(task.dump());
      if (task["batches"].get<std::size_t>() > 0) {
        EXPECT_EQ(task[counted], 1);
      }
      sum += task[counted].get<std::size_t>();
    }
    EXPECT_EQ(summary[counted], sum);
    EXPECT_EQ(summary["oom_injected"], sum);
    run_ok("verify sorted --by key --against in");

    auto const shuffle    = injected(kind, "shuffle in -o shuffled --by key --partitions 3");
    sum                   = 0;
    std::size_t with_maps = 0;
    for (auto const& task : shuffle["per_task"]) {
      SCOPED_TRACE(task.dump());
      if (task["maps"].get<std::size_t>() > 0) {
        EXPECT_EQ(task["steps_run_again_alone"], 1) << "a map step runs again alone";
        ++with_maps;
      }
      sum += task["steps_run_again_alone"].get<std::size_t>();
    }
    // (The rank's own task may have run a step again too: it is in the total, on no line.)
    EXPECT_LE(sum, shuffle["steps_run_again_alone"].get<std::size_t>());
    EXPECT_EQ(sum, with_maps);
    EXPECT_GT(with_maps, 0U);
    EXPECT_EQ(shuffle["rows"], 30000);
  }
}

}  // namespace
