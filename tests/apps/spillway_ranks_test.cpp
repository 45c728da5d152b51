/**
 * End-to-end tests of the multi-rank commands: `spillway shuffle` (pull and push, in-process
 * ranks and mpirun) checked by `spillway verify --partitions`, and `spillway sort` across ranks
 * (`--ranks`, mpirun) checked by `spillway verify --against`: every row kept, in its partition or
 * in global order, within each rank's device budget, spilling, leaving no spill files.
 */
#include "cli_fixture.hpp"
#include "output_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace {

using spillway::cli_testing::entries_in;
using spillway::cli_testing::held_lock;
using spillway::cli_testing::spillway_exe;
using spillway::cli_testing::SpillwayCli;
using spillway::cli_testing::write_text;

/// Per-rank budgets small enough that 200k timeseries rows (about 9 MiB) spill on every rank.
constexpr char const* RANK_BUDGETS = " --device-memory 2MiB --host-memory 2MiB --spill-dir spill";

/// The resume tests' budgets: the Parquet reader holds a whole row group (40k rows, 1.8 MB here)
/// on the device while it hands out batches, which leaves too little of 2 MiB for a map task that
/// runs beside a burst of checkpointed shards read back.
constexpr char const* RESUME_BUDGETS = " --device-memory 4MiB --host-memory 2MiB --spill-dir spill";

/**
 * @return the command prefix that starts `ranks` processes with mpirun, or "" when unavailable.
 * LeakSanitizer is off for them: OpenMPI leaves its own allocations behind at exit (the mpi test
 * binaries do the same; every other test finds our leaks).
 */
std::string mpirun(int ranks) {
#ifdef SPILLWAY_MPIRUN
  return std::string{"ASAN_OPTIONS=detect_leaks=0 '" SPILLWAY_MPIRUN "' -np "} +
         std::to_string(ranks) + " ";
#else
  static_cast<void>(ranks);
  return "";
#endif
}

class SpillwayRanks : public SpillwayCli {
 protected:
  void SetUp() override {
    SpillwayCli::SetUp();
    run_ok("gen timeseries --rows 200000 --files 5 --seed 3 -o in");
  }
};

TEST_F(SpillwayRanks, ShuffleInProcessPullAndPush) {
  for (std::string const mode : {"pull", "push"}) {
    auto const result =
      run_ok("shuffle in -o out-" + mode + " --by id --partitions 37 --ranks 3 --mode " + mode +
             RANK_BUDGETS + " --json");
    auto const summary = nlohmann::json::parse(result.out);
    EXPECT_EQ(summary.at("rows").get<std::size_t>(), 200000U);
    EXPECT_EQ(summary.at("ranks").get<int>(), 3);
    EXPECT_LE(summary.at("device_peak_max").get<std::size_t>(), std::size_t{2} << 20U);
    EXPECT_GT(summary.at("spilled_device_to_host_bytes").get<std::size_t>(), 0U);
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
    run_ok("verify out-" + mode + " --by id --partitions 37 --against in");
    // The same rows checked against the wrong partition count fail.
    EXPECT_EQ(run("verify out-" + mode + " --by id --partitions 36").exit_code, 1);
  }
}

TEST_F(SpillwayRanks, ShuffleOnOneRankEqualsThreeRanks) {
  run_ok("shuffle in -o one --by id,name --partitions 8" + std::string{RANK_BUDGETS});
  run_ok("shuffle in -o three --by id,name --partitions 8 --ranks 3" + std::string{RANK_BUDGETS});
  run_ok("verify one --by id,name --partitions 8 --against three");
}

TEST_F(SpillwayRanks, RanksShareTheRowGroupsOfOneFileEvenly) {
  // One file of 12 row groups: each of 4 ranks reads 3 of them (rather than one rank all).
  run_ok("gen timeseries --rows 120000 --files 1 --row-group-rows 10000 --seed 5 -o one");
  for (std::string const mode : {"pull", "push"}) {
    auto const shuffled = nlohmann::json::parse(run_ok("shuffle one -o out-" + mode +
                                                       " --by id --partitions 8 --ranks 4 --mode " +
                                                       mode + RANK_BUDGETS + " --json")
                                                  .out);
    EXPECT_EQ(shuffled.at("rows_read").get<std::size_t>(), 120000U);
    EXPECT_EQ(shuffled.at("rows_read_max_rank").get<std::size_t>(), 30000U);
    run_ok("verify out-" + mode + " --by id --partitions 8 --against one");
  }
  auto const sorted = nlohmann::json::parse(
    run_ok("sort one -o sorted --by id,timestamp --ranks 4" + std::string{RANK_BUDGETS} + " --json")
      .out);
  EXPECT_EQ(sorted.at("rows_read_max_rank").get<std::size_t>(), 30000U);
  run_ok("verify sorted --by id,timestamp --against one");
}

TEST_F(SpillwayRanks, SortAcrossInProcessRanks) {
  auto const result =
    run_ok("sort in -o out --by name:desc,timestamp --ranks 4 --shuffle-mode pull" +
           std::string{RANK_BUDGETS} + " --json");
  auto const summary = nlohmann::json::parse(result.out);
  EXPECT_EQ(summary.at("rows").get<std::size_t>(), 200000U);
  EXPECT_EQ(summary.at("output_files").get<std::size_t>(), 4U);
  EXPECT_LE(summary.at("device_peak_max").get<std::size_t>(), std::size_t{2} << 20U);
  EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  run_ok("verify out --by name:desc,timestamp --against in");
}

TEST_F(SpillwayRanks, ShuffleResumesFromCheckpointsAfterTheProcessWasKilled) {
  std::string const shuffle =
    "shuffle in -o out --by id --partitions 8 --ranks 2 --batch-size 256KiB --checkpoint-dir ck "
    "--json" +
    std::string{RESUME_BUDGETS};
  // The process dies (SIGKILL, like a lost machine) once rank 1 has added its 4th map task.
  auto const killed = run_launched("SPILLWAY_TEST_KILL_AFTER_MAPS=1:4 '" + spillway_exe() + "' " +
                                   shuffle + " > /dev/null");
  EXPECT_NE(killed.exit_code, 0);
  // SIGKILL runs no handler: the directory's lock file stays, for the rerun to take over.
  auto left = files_in("out");
  std::erase(left, ".spillway-lock");
  EXPECT_TRUE(left.empty()) << "a killed shuffle left output files";
  auto const resumed = nlohmann::json::parse(run_ok(shuffle).out);
  EXPECT_GE(resumed.at("resumed_maps").get<std::size_t>(), 4U);
  EXPECT_EQ(resumed.at("rows").get<std::size_t>(), 200000U);
  EXPECT_FALSE(std::filesystem::exists(path("out/.spillway-lock")));
  run_ok("verify out --by id --partitions 8 --against in");
  // Every file is now marked done: a third run reads no input at all.
  auto const again = nlohmann::json::parse(run_ok(shuffle + " --overwrite").out);
  EXPECT_EQ(again.at("rows_read").get<std::size_t>(), 0U);
  EXPECT_EQ(again.at("rows").get<std::size_t>(), 200000U);
  run_ok("verify out --by id --partitions 8 --against in");
}

TEST_F(SpillwayRanks, ACheckpointReusedByAnotherRankCountResumesTheRunsCutTheSame) {
  // 5 files of 2 row groups. On 2 ranks the runs are files 0-1 and 3-4 whole and file 2 in two
  // halves; on 3 ranks files 0, 2 and 4 whole and files 1 and 3 in halves: files 0 and 4 are cut
  // the same and resume; the rest is read again, and no row is lost or doubled.
  run_ok("gen timeseries --rows 200000 --files 5 --row-group-rows 20000 --seed 7 -o groups");
  std::string const shuffle =
    "shuffle groups --by id --partitions 8 --batch-size 256KiB --checkpoint-dir ck --json" +
    std::string{RESUME_BUDGETS};
  auto const first = nlohmann::json::parse(run_ok(shuffle + " -o two --ranks 2").out);
  EXPECT_EQ(first.at("resumed_maps").get<std::size_t>(), 0U);
  auto const again = nlohmann::json::parse(run_ok(shuffle + " -o three --ranks 3").out);
  EXPECT_GT(again.at("resumed_maps").get<std::size_t>(), 0U);
  EXPECT_EQ(again.at("rows_read").get<std::size_t>(), 120000U);  // files 1, 2 and 3
  EXPECT_EQ(again.at("rows").get<std::size_t>(), 200000U);
  run_ok("verify three --by id --partitions 8 --against groups");
}

TEST_F(SpillwayRanks, ACheckpointIsResumedWhenTheHostBudgetWouldCutTheBatchesOtherwise) {
  // The host budget cuts the read batch by the map tasks beside it: 2 tasks a rank on 2 ranks, 1
  // on 3 (4 threads), so the two runs would choose other batches and name their maps otherwise.
  // The second takes the first's batch from the checkpoint directory and resumes the maps of the
  // files cut the same on both rank counts (0 and 4, as above).
  run_ok("gen timeseries --rows 200000 --files 5 --row-group-rows 20000 --seed 7 -o groups");
  std::string const shuffle =
    "shuffle groups --by id --partitions 8 --batch-size 64MiB --threads 4 --checkpoint-dir ck "
    "--json --device-memory 1GiB --host-memory 96MiB --spill-dir spill";
  auto const first = nlohmann::json::parse(run_ok(shuffle + " -o two --ranks 2").out);
  auto const batch = first.at("batch_bytes").get<std::size_t>();
  EXPECT_LT(batch, std::size_t{64} << 20U);  // cut by the host budget
  auto const again = nlohmann::json::parse(run_ok(shuffle + " -o three --ranks 3").out);
  EXPECT_EQ(again.at("batch_bytes").get<std::size_t>(), batch);
  EXPECT_GT(again.at("resumed_maps").get<std::size_t>(), 0U);
  EXPECT_EQ(again.at("rows_read").get<std::size_t>(), 120000U);  // files 1, 2 and 3
  EXPECT_EQ(again.at("rows").get<std::size_t>(), 200000U);
  run_ok("verify three --by id --partitions 8 --against groups");
  // Without checkpoints, 3 ranks of 1 task each cut their batches by their own budget.
  auto const fresh = nlohmann::json::parse(
    run_ok("shuffle groups --by id --partitions 8 --batch-size 64MiB --threads 4 --json "
           "--device-memory 1GiB --host-memory 96MiB --spill-dir spill -o fresh --ranks 3")
      .out);
  EXPECT_GT(fresh.at("batch_bytes").get<std::size_t>(), batch);
}

TEST_F(SpillwayRanks, LostShardsAreRebuiltByReadingTheirBatchAgain) {
  for (std::string const mode : {"pull", "push"}) {
    // A third of the shards dropped at random points: their map tasks read their batch from the
    // input file again (the command keeps no copy of its input).
    auto const result =
      run_launched("SPILLWAY_TEST_SHARD_LOSS=0.3 '" + spillway_exe() + "' shuffle in -o out-" +
                   mode + " --by id --partitions 8 --ranks 3 --batch-size 256KiB --mode " + mode +
                   " --json" + RANK_BUDGETS);
    ASSERT_EQ(result.exit_code, 0) << result.err;
    auto const summary = nlohmann::json::parse(result.out);
    EXPECT_GT(summary.at("recomputed_maps").get<std::size_t>(), 0U);
    run_ok("verify out-" + mode + " --by id --partitions 8 --against in");
  }
}

TEST_F(SpillwayRanks, ShuffleErrors) {
  expect_failure(run("shuffle in -o out --by nope --partitions 4"), 2, "nope", "out");
  expect_failure(run("shuffle in -o out --by id --partitions 0"), 2, "--partitions", "out");
  expect_failure(
    run("shuffle in -o out --by id:desc --partitions 4"), 2, "column names only", "out");
  expect_failure(
    run("shuffle in -o out --by id --partitions 4 --mode sideways"), 2, "--mode", "out");
  expect_failure(run("shuffle missing -o out --by id --partitions 4"), 1, "missing", "out");
}

TEST_F(SpillwayRanks, AnOutputThatHoldsTheInputIsRefusedEvenWhenOverwriting) {
  // Replacing the output's dataset would remove the input files it holds.
  auto const before = files_in("in");
  ASSERT_EQ(before.size(), 5U);
  auto names = before;
  std::sort(names.begin(), names.end());
  for (std::string const& command : std::vector<std::string>{
         "shuffle in -o in --by id --partitions 4 --ranks 2 --overwrite",
         "shuffle in -o in --by id --partitions 4 --overwrite",
         "sort in -o in --by id --ranks 2 --overwrite",
         "sort in -o in --by id --overwrite",
         "sort in/" + names[0] + " -o in --by id --overwrite",
         "shuffle in/" + names[0] + " -o in/. --by id --partitions 4 --overwrite"}) {
    SCOPED_TRACE(command);
    auto const result = run(command + RANK_BUDGETS);
    EXPECT_EQ(result.exit_code, 2) << result.err;
    EXPECT_NE(result.err.find("holds the input file"), std::string::npos) << result.err;
    EXPECT_EQ(files_in("in"), before);
  }
  // Beside the input, or in a directory under it, is fine.
  run_ok("shuffle in -o in/sub --by id --partitions 4 --ranks 2" + std::string{RANK_BUDGETS});
  run_ok("verify in/sub --by id --partitions 4 --against in");
}

TEST_F(SpillwayRanks, AFileThatIsNotParquetIsNamedWhicheverRankReadsItsFooter) {
  // Ranks read the footers of every third file each: rank 1 reads part 4's and fails; the others
  // wait for it in the exchange of row counts, and the error names the file.
  for (auto const& entry : std::filesystem::directory_iterator(path("in"))) {
    std::filesystem::create_directories(path("bad"));
    std::filesystem::copy_file(entry.path(), path("bad") + "/" + entry.path().filename().string());
  }
  auto names = files_in("bad");
  std::sort(names.begin(), names.end());
  ASSERT_EQ(names.size(), 5U);
  {
    std::ofstream garbage(path("bad") + "/" + names[4], std::ios::trunc);
    garbage << "not a parquet file at all";
  }
  for (std::string const command : {"shuffle bad -o out --by id --partitions 4 --ranks 3",
                                    "sort bad -o out --by id --ranks 3"}) {
    expect_failure(run(command + std::string{RANK_BUDGETS}), 1, names[4], "out");
  }
}

TEST_F(SpillwayRanks, AFileWithOtherColumnsIsNamedWhicheverRankReadsIt) {
  // The last file of the dataset has other columns: the rank that reads it names it beside the
  // first, as the one-process reader does, instead of failing later in the shuffle.
  std::filesystem::copy(path("in"), path("mixed"));
  run_ok("gen uniform --rows 1000 --files 1 -o other");
  auto const other = files_in("other");
  ASSERT_EQ(other.size(), 1U);
  std::filesystem::copy_file(path("other") + "/" + other.front(), path("mixed") + "/zz.parquet");
  auto names = files_in("mixed");
  std::sort(names.begin(), names.end());
  for (std::string const command : {"shuffle mixed -o out --by id --partitions 4 --ranks 3",
                                    "sort mixed -o out --by id --ranks 3"}) {
    SCOPED_TRACE(command);
    auto const result = run(command + std::string{RANK_BUDGETS});
    expect_failure(result, 1, "zz.parquet' has columns", "out");
    EXPECT_NE(result.err.find("unlike those of"), std::string::npos) << result.err;
    EXPECT_NE(result.err.find(names.front()), std::string::npos) << result.err;
  }
}

TEST_F(SpillwayRanks, AJobThatFailsOnOneRankLeavesNoVisibleOutput) {
  // Rank 2 fails once its files are written; ranks 0 and 1 have written theirs by then or soon
  // after. Nothing may appear in the output, and an existing dataset there must survive.
  run_ok("shuffle in -o kept --by id --partitions 6" + std::string{RANK_BUDGETS});
  auto const before = files_in("kept");
  ASSERT_FALSE(before.empty());
  for (std::string const command :
       {"shuffle in -o out --by id --partitions 6 --ranks 3",
        "sort in -o out --by id --ranks 3",
        "shuffle in -o kept --by id --partitions 6 --ranks 3 --overwrite",
        "sort in -o kept --by id --ranks 3 --overwrite"}) {
    SCOPED_TRACE(command);
    auto const result = run_launched("SPILLWAY_TEST_FAIL_AFTER_WRITING=2 '" + spillway_exe() +
                                     "' " + command + RANK_BUDGETS);
    EXPECT_EQ(result.exit_code, 1) << result.err;
    EXPECT_NE(result.err.find("rank 2 failed after writing"), std::string::npos) << result.err;
    EXPECT_FALSE(std::filesystem::exists(path("out"))) << "the failed job left its directory";
    EXPECT_EQ(files_in("kept"), before);
    EXPECT_FALSE(std::filesystem::exists(path("kept") + "/.spillway-incomplete"));
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  }
  run_ok("verify kept --by id --partitions 6 --against in");
}

TEST_F(SpillwayRanks, InProcessRanksRunOnTheGpuWhenAskedOrSayWhyNot) {
  auto const automatic = run_ok(
    "shuffle in -o auto --by id --partitions 16 --ranks 2 --backend "
    "auto --json" +
    std::string{RANK_BUDGETS});
  run_ok("verify auto --by id --partitions 16 --against in");
  auto const backend  = nlohmann::json::parse(automatic.out).at("backend").get<std::string>();
  auto const shuffled = run(
    "shuffle in -o gpu-shuffle --by id --partitions 16 --ranks 2 "
    "--backend cuda --json" +
    std::string{RANK_BUDGETS});
  auto const sorted =
    run("sort in -o gpu-sort --by x --ranks 2 --backend cuda --json" + std::string{RANK_BUDGETS});
  if (backend == "cpu") {  // no GPU here: refused, nothing written
    expect_failure(shuffled, 1, "CUDA", "gpu-shuffle");
    expect_failure(sorted, 1, "CUDA", "gpu-sort");
    return;
  }
  ASSERT_EQ(backend, "cuda");
  ASSERT_EQ(shuffled.exit_code, 0) << shuffled.err;
  ASSERT_EQ(sorted.exit_code, 0) << sorted.err;
  EXPECT_EQ(nlohmann::json::parse(shuffled.out).at("backend").get<std::string>(), "cuda");
  EXPECT_EQ(nlohmann::json::parse(sorted.out).at("backend").get<std::string>(), "cuda");
  EXPECT_LE(nlohmann::json::parse(sorted.out).at("device_peak_max").get<std::size_t>(),
            std::size_t{2} << 20U);
  run_ok("verify gpu-shuffle --by id --partitions 16 --against in");
  run_ok("verify gpu-sort --by x --against in");
}

TEST_F(SpillwayRanks, ShuffleAndSortUnderMpirun) {
  if (mpirun(2).empty()) {
    GTEST_SKIP() << "built without MPI: no mpirun to start ranks with";
  }
  for (int ranks : {2, 3}) {
    auto const out = "mpi-shuffle-" + std::to_string(ranks);
    launched_ok(mpirun(ranks) + "'" + spillway_exe() + "' shuffle in -o " + out +
                " --by id --partitions 16 --mode push --json" + RANK_BUDGETS);
    run_ok("verify " + out + " --by id --partitions 16 --against in");
    auto const sorted  = "mpi-sort-" + std::to_string(ranks);
    auto const result  = launched_ok(mpirun(ranks) + "'" + spillway_exe() + "' sort in -o " +
                                    sorted + " --by x --json" + RANK_BUDGETS);
    auto const summary = nlohmann::json::parse(result.out);
    EXPECT_EQ(summary.at("ranks").get<int>(), ranks);
    EXPECT_EQ(summary.at("transport").get<std::string>(), "mpi");
    run_ok("verify " + sorted + " --by x --against in");
  }
  // Ranks in processes on the GPU: their shards travel through host memory. Without a GPU (or
  // without the CUDA backend) the tool says why and writes nothing.
  auto const gpu = run_launched(mpirun(2) + "'" + spillway_exe() +
                                "' shuffle in -o mpi-gpu --by id --partitions 16 --backend cuda "
                                "--json" +
                                RANK_BUDGETS);
  if (gpu.exit_code == 0) {
    auto const summary = nlohmann::json::parse(gpu.out);
    EXPECT_EQ(summary.at("backend").get<std::string>(), "cuda");
    EXPECT_EQ(summary.at("transport").get<std::string>(), "mpi");
    run_ok("verify mpi-gpu --by id --partitions 16 --against in");
  } else {
    EXPECT_NE(gpu.err.find("CUDA"), std::string::npos) << gpu.err;
    EXPECT_FALSE(std::filesystem::exists(path("mpi-gpu")));
  }
  EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
}

TEST_F(SpillwayRanks, ARankFailingUnderMpirunEndsEveryRankWithItsErrorAndNoCrash) {
  // The rank that reads the last file fails on its corrupt page while the other ranks' shards are
  // under way. Every rank must end with the error, the others once they hear of it, their
  // transfers abandoned without freeing memory that MPI still moves bytes in and out of (a rank
  // crashed in 3 of 8 such push runs before).
  if (mpirun(3).empty()) {
    GTEST_SKIP() << "built without MPI: no mpirun to start ranks with";
  }
  std::filesystem::copy(path("in"), path("bad"));
  auto names = files_in("bad");
  std::sort(names.begin(), names.end());
  {
    std::fstream file(path("bad") + "/" + names.back(), std::ios::in | std::ios::out);
    file.seekp(4);  // the first page header, after the magic number
    file << std::string(64, '\xff');
  }
  for (std::string const mode : {"push", "push", "push", "push", "pull"}) {
    SCOPED_TRACE(mode);
    // Under `timeout`: OpenMPI 4.1's mpirun itself now and then hangs when ranks exit with errors
    // at once, every rank gone (open-mpi/ompi#3380). What the ranks printed is checked either way.
    auto const result =
      run_launched("timeout -k 5 60 env " + mpirun(3) + "'" + spillway_exe() +
                   "' shuffle bad -o out --by id --partitions 8 --batch-size 128KiB --mode " +
                   mode + std::string{RANK_BUDGETS});
    auto const printed = result.out + result.err;
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE(printed.find("cannot read Parquet file"), std::string::npos) << printed;
    EXPECT_NE(printed.find(names.back()), std::string::npos) << printed;
    EXPECT_EQ(printed.find("Signal:"), std::string::npos) << printed;
    EXPECT_EQ(printed.find("signal"), std::string::npos) << printed;
    auto const left = files_in("out");
    EXPECT_TRUE(left.empty()) << "a failed shuffle left output files, " << left.size()
                              << " of them, the first " << (left.empty() ? "" : left.front());
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  }
}

TEST_F(SpillwayRanks, AJobThatFailsOnOneRankUnderMpirunLeavesNoOutput) {
  // Rank 1 fails once its files are in the staging directory. mpirun then ends the other
  // processes, rank 0's (which owns the directory) among them, perhaps before their destructors
  // run: whichever goes last removes the directory and what the others wrote.
  if (mpirun(3).empty()) {
    GTEST_SKIP() << "built without MPI: no mpirun to start ranks with";
  }
  for (std::string const command : {"shuffle in -o out --by id --partitions 6",
                                    "sort in -o out --by id",
                                    "shuffle in -o out --by id --partitions 6",
                                    "sort in -o out --by id"}) {
    SCOPED_TRACE(command);
    auto const result =
      run_launched("SPILLWAY_TEST_FAIL_AFTER_WRITING=1 timeout -k 5 60 env " + mpirun(3) + "'" +
                   spillway_exe() + "' " + command + RANK_BUDGETS);
    EXPECT_NE(result.exit_code, 0);
    EXPECT_NE((result.out + result.err).find("rank 1 failed after writing"), std::string::npos)
      << result.err;
    std::string left;
    std::error_code error;
    for (auto const& entry : std::filesystem::recursive_directory_iterator(path("out"), error)) {
      left += " " + entry.path().string();
    }
    EXPECT_FALSE(std::filesystem::exists(path("out")))
      << "the failed job left its directory:" << left << "\n"
      << result.err;
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  }
}

TEST_F(SpillwayRanks, ShuffleUnderMpirunResumesAfterARankIsKilled) {
  if (mpirun(2).empty()) {
    GTEST_SKIP() << "built without MPI: no mpirun to start ranks with";
  }
  std::string const shuffle = "'" + spillway_exe() +
                              "' shuffle in -o out --by id --partitions 8 --batch-size 256KiB "
                              "--checkpoint-dir ck --json" +
                              std::string{RESUME_BUDGETS};
  // Rank 1's process is killed after its 3rd map task: mpirun ends the job.
  auto const killed =
    run_launched("SPILLWAY_TEST_KILL_AFTER_MAPS=1:3 " + mpirun(2) + shuffle + " > /dev/null");
  EXPECT_NE(killed.exit_code, 0);
  EXPECT_TRUE(files_in("out").empty()) << "a killed shuffle left output files";
  auto const resumed = nlohmann::json::parse(launched_ok(mpirun(2) + shuffle).out);
  EXPECT_GE(resumed.at("resumed_maps").get<std::size_t>(), 3U);
  run_ok("verify out --by id --partitions 8 --against in");
}

TEST_F(SpillwayRanks, ShuffleOverwriteReplacesOnlyItsOwnFiles) {
  std::filesystem::create_directories(path("proj"));
  write_text(path("proj/README.md"), "read me\n");
  for (std::string const command : {"shuffle in -o proj --by id --partitions 4 --overwrite",
                                    "shuffle in -o proj --by id --partitions 4 --ranks 2"}) {
    SCOPED_TRACE(command);
    auto const refused = run(command + std::string{RANK_BUDGETS});
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("README.md"), std::string::npos) << refused.err;
    EXPECT_EQ(entries_in(path("proj")), std::vector<std::string>{"README.md"});
  }
  // A sort's dataset there is spillway's: the shuffle replaces it whole.
  run_ok("sort in -o out --by id --ranks 2" + std::string{RANK_BUDGETS});
  write_text(path("out/.partition-00003-00000.parquet.tmp"), "left by a killed run");
  run_ok("shuffle in -o out --by id --partitions 4 --ranks 2 --overwrite" +
         std::string{RANK_BUDGETS});
  for (auto const& name : entries_in(path("out"))) {
    EXPECT_TRUE(name.starts_with("partition-")) << name;
  }
  run_ok("verify out --by id --partitions 4 --against in");
}

TEST_F(SpillwayRanks, AShuffleOfNoRowsWritesOneFileWithItsColumns) {
  write_text(path("empty.csv"), "id,name\n");
  for (std::string const ranks : {"1", "3"}) {
    SCOPED_TRACE(ranks);
    std::string const out = "out-" + ranks;
    run_ok("shuffle empty.csv -o " + out + " --by id --partitions 4 --ranks " + ranks);
    auto const files = files_in(out);
    ASSERT_EQ(files.size(), 1U);
    EXPECT_TRUE(files.front().starts_with("partition-")) << files.front();
    run_ok("verify " + out + " --by id --partitions 4 --against empty.csv");
    run_ok("shuffle " + out + " -o again-" + ranks + " --by name --partitions 2");
  }
}

TEST_F(SpillwayRanks, AResumedShuffleReportsTheRowsAndBytesItWrote) {
  std::string const shuffle =
    "shuffle in -o out --by id --partitions 8 --ranks 2 --batch-size 256KiB --checkpoint-dir ck "
    "--json" +
    std::string{RESUME_BUDGETS};
  auto const first   = run_ok(shuffle);
  auto const resumed = run_ok(shuffle + " --overwrite");
  auto const before  = nlohmann::json::parse(first.out);
  auto const after   = nlohmann::json::parse(resumed.out);
  ASSERT_EQ(after.at("rows_read").get<std::size_t>(), 0U);  // every map resumed
  EXPECT_EQ(after.at("rows").get<std::size_t>(), 200000U);
  EXPECT_GT(before.at("bytes").get<std::size_t>(), 0U);
  EXPECT_EQ(after.at("bytes"), before.at("bytes"));
  EXPECT_NE(resumed.err.find("spillway shuffle: 200000 rows ("), std::string::npos) << resumed.err;
  EXPECT_EQ(resumed.err.find("0 rows (0 B)"), std::string::npos) << resumed.err;
  run_ok("verify out --by id --partitions 8 --against in");
}

TEST_F(SpillwayRanks, UnderMpirunASecondWriterFailsNamingTheFirstAndOnlyRankZeroLocks) {
  if (mpirun(2).empty()) {
    GTEST_SKIP() << "built without MPI: no mpirun to start ranks with";
  }
  {
    held_lock const lock{path("out"), "pid 4242 on build-host: spillway shuffle in -o out"};
    for (std::string const command :
         {"shuffle in -o out --by id --partitions 4", "sort in -o out --by id"}) {
      SCOPED_TRACE(command);
      auto const result = run_launched("timeout -k 5 60 env " + mpirun(2) + "'" + spillway_exe() +
                                       "' " + command + RANK_BUDGETS);
      EXPECT_NE(result.exit_code, 0);
      EXPECT_NE((result.out + result.err).find("pid 4242 on build-host"), std::string::npos)
        << result.err;
      EXPECT_EQ(entries_in(path("out")), std::vector<std::string>{".spillway-lock"});
      EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
    }
  }
  // The lock nobody holds any more is taken by rank 0's process and goes with the job.
  launched_ok(mpirun(3) + "'" + spillway_exe() + "' sort in -o out --by id" + RANK_BUDGETS);
  for (auto const& name : entries_in(path("out"))) {
    EXPECT_TRUE(name.starts_with("part-")) << name;
  }
  run_ok("verify out --by id --against in");
}

}  // namespace
