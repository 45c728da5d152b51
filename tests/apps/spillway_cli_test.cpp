/**
 * End-to-end tests of the `spillway` tool: each runs the built executable (SPILLWAY_EXE) in a
 * fresh temporary directory and checks its exit status, its one-line messages, its JSON summary
 * and what it leaves on disk.
 */
#include "cli_fixture.hpp"
#include "output_fixture.hpp"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <ostream>
#include <random>
#include <string>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace {

namespace fs = std::filesystem;
using spillway::cli_testing::background_run;
using spillway::cli_testing::entries_in;
using spillway::cli_testing::held_lock;
using spillway::cli_testing::holds_temporaries;
using spillway::cli_testing::run_result;
using spillway::cli_testing::SpillwayCli;
using spillway::cli_testing::write_text;

/// Small enough to run fast under ASan, large enough to spill at these budgets.
constexpr char const* ROWS          = "200000";
constexpr char const* TIGHT_BUDGETS = " --device-memory 4MiB --host-memory 8MiB";

struct dataset_case {
  char const* kind;
  char const* by;
  char const* strategy;
};

/// Prints e.g. "gen skewed, --by key, --strategy sample" (the case in listings and failures).
void PrintTo(dataset_case const& c, std::ostream* os) {
  *os << "gen " << c.kind << ", --by " << c.by << ", --strategy " << c.strategy;
}

class SpillwayCliDatasets : public SpillwayCli,
                            public ::testing::WithParamInterface<dataset_case> {};

TEST_P(SpillwayCliDatasets, GenSortVerifySpills) {
  auto const& param = GetParam();
  run_ok(std::string{"gen "} + param.kind + " --rows " + ROWS + " --files 2 --seed 7 -o in");
  EXPECT_EQ(files_in("in").size(), 2U);
  auto const sorted  = run_ok(std::string{"sort in -o out --by "} + param.by + TIGHT_BUDGETS +
                             " --spill-dir spill --strategy " + param.strategy + " --json");
  auto const summary = nlohmann::json::parse(sorted.out);
  EXPECT_EQ(summary.at("rows").get<std::size_t>(), 200000U);
  EXPECT_GT(summary.at("spilled").at("device_to_host").at("bytes").get<std::size_t>(), 0U)
    << "4 MiB of device should have made the sort spill";
  EXPECT_LE(summary.at("device_peak").get<std::size_t>(), std::size_t{4} << 20U);
  EXPECT_LE(summary.at("host_peak").get<std::size_t>(), std::size_t{8} << 20U);
  EXPECT_NE(sorted.err.find("spillway sort: 200000 rows"), std::string::npos) << sorted.err;
  EXPECT_TRUE(files_in("spill").empty()) << "spill directory not removed";
  run_ok(std::string{"verify out --by "} + param.by + " --against in");
}

INSTANTIATE_TEST_SUITE_P(Kinds,
                         SpillwayCliDatasets,
                         ::testing::Values(dataset_case{"uniform", "key", "auto"},
                                           dataset_case{"skewed", "key", "sample"},
                                           dataset_case{"strings", "key:desc", "merge"},
                                           dataset_case{"timeseries", "id,timestamp", "auto"}),
                         [](auto const& test_info) {
                           return std::string{test_info.param.kind} + "_" +
                                  test_info.param.strategy;
                         });

TEST_F(SpillwayCli, MultiKeyDirectionsAndWrongOrderFailsVerify) {
  run_ok("gen timeseries --rows 50000 --time-unit ms -o in");
  run_ok("sort in -o out --by name:desc:nulls_last,id:asc,x:desc" + std::string{TIGHT_BUDGETS});
  run_ok("verify out --by name:desc,id,x:desc --against in");
  auto const wrong = run("verify out --by name");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("is not sorted by name"), std::string::npos) << wrong.err;
}

TEST_F(SpillwayCli, JsonSummaryHasEveryField) {
  run_ok("gen uniform --rows 20000 -o in");
  auto const sorted =
    run_ok("sort in -o out --by key --threads 4 --json" + std::string{TIGHT_BUDGETS});
  auto const summary = nlohmann::json::parse(sorted.out);
  for (auto const* field : {"rows",
                            "bytes",
                            "seconds",
                            "rows_per_second",
                            "strategy",
                            "rounds",
                            "copies_per_input_byte",
                            "backend",
                            "device_peak",
                            "host_peak",
                            "spilled",
                            "retries",
                            "threads",
                            "readers",
                            "batch_bytes",
                            "output_batch_bytes"}) {
    EXPECT_TRUE(summary.contains(field)) << field << " missing from " << sorted.out;
  }
  for (auto const* pair : {"device_to_host",
                           "device_to_disk",
                           "host_to_disk",
                           "host_to_device",
                           "disk_to_device",
                           "disk_to_host"}) {
    EXPECT_TRUE(summary.at("spilled").contains(pair)) << pair;
  }
  EXPECT_EQ(summary.at("threads").get<int>(), 4);
  EXPECT_EQ(summary.at("bytes").get<std::size_t>(), 20000U * 16U);
}

TEST_F(SpillwayCli, SortWritesEachCompressionOnOneRankAndOnTwo) {
  run_ok("gen strings --rows 30000 -o in");
  std::vector<std::uintmax_t> sizes;
  for (auto const* compression : {"none", "snappy", "zstd"}) {
    for (auto const* ranks : {"1", "2"}) {
      std::string const out = std::string{"out-"} + compression + "-" + ranks;
      run_ok("sort in -o " + out + " --by key --ranks " + ranks + " --compression " + compression +
             TIGHT_BUDGETS);
      run_ok("verify " + out + " --by key --against in");
      std::uintmax_t bytes = 0;
      for (auto const& file : files_in(out)) {
        bytes += fs::file_size(fs::path(path(out)) / file);
      }
      sizes.push_back(bytes);
    }
  }
  // Uncompressed output is the largest, zstd's the smallest.
  EXPECT_GT(sizes[0], sizes[2]);
  EXPECT_GT(sizes[2], sizes[4]);
  EXPECT_GT(sizes[1], sizes[5]);
}

TEST_F(SpillwayCli, BackendCudaSortsOnTheGpuOrSaysWhyNot) {
  run_ok("gen strings --rows 200000 --seed 5 -o in");
  auto const chosen = nlohmann::json::parse(
    run_ok("sort in -o auto --by key --backend auto --json" + std::string{TIGHT_BUDGETS}).out);
  run_ok("verify auto --by key --against in");
  auto const backend = chosen.at("backend").get<std::string>();
  auto const cuda    = run("sort in -o out --by key:desc --backend cuda --json --spill-dir spill" +
                        std::string{TIGHT_BUDGETS});
  if (backend == "cpu") {
    // No GPU here (or no CUDA backend in this build): the tool says so and writes nothing.
    expect_failure(cuda, 1, "CUDA", "out");
    return;
  }
  ASSERT_EQ(backend, "cuda");
  ASSERT_EQ(cuda.exit_code, 0) << cuda.err;
  auto const summary = nlohmann::json::parse(cuda.out);
  EXPECT_EQ(summary.at("backend").get<std::string>(), "cuda");
  EXPECT_EQ(summary.at("rows").get<std::size_t>(), 200000U);
  EXPECT_LE(summary.at("device_peak").get<std::size_t>(), std::size_t{4} << 20U);
  EXPECT_GT(summary.at("spilled").at("device_to_host").at("bytes").get<std::size_t>(), 0U);
  run_ok("verify out --by key:desc --against in");
}

TEST_F(SpillwayCli, CsvInCsvOutOnOneRankAndOnTwoWithAnyBackend) {
  run_ok("gen strings --rows 30000 --files 2 --format csv -o in");
  auto const inputs = files_in("in");
  ASSERT_EQ(inputs.size(), 2U);
  EXPECT_TRUE(inputs[0].ends_with(".csv")) << inputs[0];
  std::string chosen;
  for (auto const* ranks : {"1", "2"}) {
    std::string const out = std::string{"out-"} + ranks;
    // auto: the GPU when there is one, for one rank and for two in-process ranks alike.
    auto const sorted  = run_ok("sort in -o " + out +
                               " --by key:desc --output-format csv --backend auto --json --ranks " +
                               ranks + TIGHT_BUDGETS);
    auto const backend = nlohmann::json::parse(sorted.out).at("backend").get<std::string>();
    EXPECT_TRUE(backend == "cpu" || backend == "cuda") << backend;
    EXPECT_TRUE(chosen.empty() || chosen == backend) << chosen << " then " << backend;
    chosen             = backend;
    auto const outputs = files_in(out);
    ASSERT_FALSE(outputs.empty());
    for (auto const& file : outputs) {
      EXPECT_TRUE(file.ends_with(".csv")) << file;
    }
    run_ok("verify " + out + " --by key:desc --against in");
  }
  expect_failure(run("sort in -o bad --by key --output-format json" + std::string{TIGHT_BUDGETS}),
                 2,
                 "json",
                 "bad");
}

TEST_F(SpillwayCli, GenIsDeterministicAcrossFileLayouts) {
  run_ok("gen strings --rows 30000 --seed 3 -o one");
  run_ok("gen strings --rows 30000 --seed 3 --files 3 -o three");
  run_ok("gen strings --rows 30000 --seed 4 -o other");
  run_ok("sort one -o sorted --by key");
  run_ok("verify sorted --by key --against three");
  auto const different = run("verify sorted --by key --against other");
  EXPECT_EQ(different.exit_code, 1);
  EXPECT_NE(different.err.find("different contents"), std::string::npos) << different.err;
}

TEST_F(SpillwayCli, MissingInput) {
  expect_failure(
    run("sort no_such_dir -o out --by key --spill-dir spill"), 1, "no_such_dir", "out");
}

TEST_F(SpillwayCli, CorruptParquet) {
  fs::create_directories(path("in"));
  std::mt19937_64 random{1};
  std::ofstream garbage{path("in/part-00000.parquet"), std::ios::binary};
  for (int index = 0; index < 4096; ++index) {
    garbage.put(static_cast<char>(random()));
  }
  garbage.close();
  expect_failure(run("sort in -o out --by key --spill-dir spill"), 1, "part-00000.parquet", "out");
}

TEST_F(SpillwayCli, UnknownColumn) {
  run_ok("gen uniform --rows 1000 -o in");
  expect_failure(run("sort in -o out --by nope --spill-dir spill"), 2, "'nope'", "out");
}

TEST_F(SpillwayCli, BudgetTooSmallForOneBatch) {
  run_ok("gen timeseries --rows 1000 -o in");
  expect_failure(run("sort in -o out --by id --device-memory 4KiB --spill-dir spill"),
                 2,
                 "--device-memory",
                 "out");
  expect_failure(
    run("sort in -o out --by id --host-memory 1KiB --spill-dir spill"), 2, "--host-memory", "out");
}

TEST_F(SpillwayCli, UsageErrors) {
  run_ok("gen uniform --rows 1000 -o in");
  expect_failure(run("sort in -o out --by key:sideways"), 2, "sideways", "out");
  expect_failure(run("sort in -o out --by key --device-memory lots"), 2, "lots", "out");
  expect_failure(run("sort in -o out --by key --strategy fastest"), 2, "fastest", "out");
  expect_failure(run("sort in -o out --by key --compression brotli"), 2, "brotli", "out");
  expect_failure(run("sort in -o out --by key --backend gpu"), 2, "gpu", "out");
  expect_failure(run("sort in -o out --by key --no-such-flag"), 2, "no-such-flag", "out");
  expect_failure(run("sort in -o out"), 2, "--by", "out");
}

TEST_F(SpillwayCli, ExistingOutputNeedsOverwrite) {
  run_ok("gen uniform --rows 1000 -o in");
  run_ok("sort in -o out --by key");
  auto const before  = files_in("out");
  auto const refused = run("sort in -o out --by key:desc");
  EXPECT_EQ(refused.exit_code, 2) << refused.err;
  EXPECT_EQ(files_in("out"), before);
  run_ok("sort in -o out --by key:desc --overwrite");
  run_ok("verify out --by key:desc --against in");
}

/// A tmpfs of `kilobytes` mounted at `where` for the life of the object; `mounted()` is false when
/// this process may not mount (not root, or no CAP_SYS_ADMIN in this container).
class small_filesystem {
 public:
  small_filesystem(std::string where, std::size_t kilobytes) : where_(std::move(where)) {
    fs::create_directories(where_);
    std::string const command = "mount -t tmpfs -o size=" + std::to_string(kilobytes) +
                                "k spillway-test '" + where_ + "' 2>/dev/null";
    mounted_ = std::system(command.c_str()) == 0;
  }
  ~small_filesystem() {
    if (mounted_) {
      (void)std::system(("umount '" + where_ + "' 2>/dev/null").c_str());
    }
  }
  small_filesystem(small_filesystem const&)            = delete;
  small_filesystem& operator=(small_filesystem const&) = delete;
  small_filesystem(small_filesystem&&)                 = delete;
  small_filesystem& operator=(small_filesystem&&)      = delete;
  [[nodiscard]] bool mounted() const noexcept { return mounted_; }

 private:
  std::string where_;
  bool mounted_ = false;
};

TEST_F(SpillwayCli, FullDiskForTheOutput) {
  run_ok(std::string{"gen uniform --rows "} + ROWS + " -o in");
  small_filesystem const full{path("full"), 256};
  if (!full.mounted()) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root with CAP_SYS_ADMIN)";
  }
  // 200k rows of (int64, int64) are ~3 MiB of Parquet: the 256 KiB file system fills up.
  expect_failure(run("sort in -o full/out --by key --spill-dir spill"), 1, "full/out", "full/out");
  EXPECT_TRUE(files_in("full").empty()) << "temporary output files left on the full disk";
}

TEST_F(SpillwayCli, FullDiskForTheSpillDirectory) {
  run_ok(std::string{"gen uniform --rows "} + ROWS + " -o in");
  small_filesystem const full{path("spill"), 64};
  if (!full.mounted()) {
    GTEST_SKIP() << "cannot mount a small tmpfs here (needs root with CAP_SYS_ADMIN)";
  }
  // The budgets force spilling to disk, and the spill directory has room for almost nothing:
  // each command either finishes correctly (data that could not go to disk stayed on a higher
  // tier) or fails with an error that names the disk; it never writes wrong data or leaves files
  // behind.
  std::string const budgets = " --spill-dir spill --device-memory 2MiB --host-memory 1MiB";
  struct attempt {
    std::string command;
    std::string verify;
  };
  for (auto const& [command, verify] :
       {attempt{"sort in -o out --by key", "verify out --by key --against in"},
        attempt{"sort in -o out --by key --ranks 2", "verify out --by key --against in"},
        attempt{"shuffle in -o out --by key --partitions 4 --ranks 2",
                "verify out --partitions 4 --by key --against in"}}) {
    SCOPED_TRACE(command);
    auto const result = run(command + budgets + " --overwrite");
    if (result.exit_code == 0) {
      run_ok(verify);
    } else {
      expect_failure(result, 1, "spilling to disk failed", "out");
    }
    EXPECT_TRUE(files_in("spill").empty()) << "spill files left behind";
  }
}

TEST_F(SpillwayCli, OverwriteReplacesOnlyTheFilesSpillwayWrote) {
  run_ok("gen uniform --rows 1000 -o in");
  // A directory of someone else's files: refused, with or without --overwrite, nothing removed.
  fs::create_directories(path("proj"));
  write_text(path("proj/README.md"), "read me\n");
  write_text(path("proj/Makefile"), "all:\n");
  for (std::string const command : {"sort in -o proj --by key --overwrite",
                                    "sort in -o proj --by key",
                                    "sort in -o proj --by key --ranks 2 --overwrite",
                                    "gen uniform --rows 100 -o proj --overwrite"}) {
    SCOPED_TRACE(command);
    auto const refused = run(command);
    EXPECT_EQ(refused.exit_code, 2) << refused.err;
    EXPECT_NE(refused.err.find("README.md"), std::string::npos) << refused.err;
    EXPECT_NE(refused.err.find("Makefile"), std::string::npos) << refused.err;
    EXPECT_EQ(entries_in(path("proj")), (std::vector<std::string>{"Makefile", "README.md"}));
  }
  // An earlier dataset of spillway's (another format, more files, a temporary of a killed run) is
  // replaced whole; hidden and '_' files, which no reader of the dataset sees, stay.
  run_ok("gen uniform --rows 1000 --files 3 --format csv -o out");
  write_text(path("out/.part-00009.parquet.tmp"), "left by a killed run");
  write_text(path("out/_notes"), "kept");
  run_ok("sort in -o out --by key --overwrite");
  EXPECT_EQ(entries_in(path("out")), (std::vector<std::string>{"_notes", "part-00000.parquet"}));
  run_ok("verify out --by key --against in");
}

TEST_F(SpillwayCli, ASecondWriterOfAnOutputDirectoryFailsAtOnceNamingTheFirst) {
  run_ok("gen uniform --rows 1000 -o in");
  {
    held_lock const lock{path("out"), "pid 4242 on build-host: spillway sort other -o out"};
    for (std::string const command : {"sort in -o out --by key",
                                      "sort in -o out --by key --overwrite",
                                      "sort in -o out --by key --ranks 2",
                                      "shuffle in -o out --by key --partitions 2",
                                      "gen uniform --rows 100 -o out --overwrite"}) {
      SCOPED_TRACE(command);
      auto const refused = run(command);
      EXPECT_EQ(refused.exit_code, 1) << refused.err;
      EXPECT_NE(refused.err.find("pid 4242 on build-host"), std::string::npos) << refused.err;
      EXPECT_EQ(entries_in(path("out")), std::vector<std::string>{".spillway-lock"});
    }
  }
  // A lock file nobody holds (its run was killed) is taken over, and goes with the run.
  run_ok("sort in -o out --by key");
  EXPECT_EQ(entries_in(path("out")), std::vector<std::string>{"part-00000.parquet"});
}

TEST_F(SpillwayCli, TwoSortsIntoOneDirectoryAtOnceTheSecondFailsNamingTheFirst) {
  run_ok("gen uniform --rows 3000000 -o big");
  run_ok("gen uniform --rows 1000 --seed 9 -o small");
  background_run first{root_, {"sort", "big", "-o", "out", "--by", "key", "--spill-dir", "spill"}};
  ASSERT_TRUE(first.wait_until([&] { return fs::exists(path("out/.spillway-lock")); }))
    << first.err();
  auto const second = run("sort small -o out --by key --overwrite");
  EXPECT_EQ(second.exit_code, 1) << second.err;
  EXPECT_NE(second.err.find("pid " + std::to_string(first.pid())), std::string::npos) << second.err;
  auto const status = first.wait();
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << first.err();
  EXPECT_NE(first.err().find("3000000 rows"), std::string::npos) << first.err();
  run_ok("verify out --by key --against big");
}

TEST_F(SpillwayCli, ASignalDuringTheWritePhaseLeavesNoTemporaryFiles) {
  run_ok("gen uniform --rows 3000000 -o in");
  fs::create_directories(path("kept"));
  for (int const signal_number : {SIGTERM, SIGINT}) {
    for (std::string const out : {"out", "kept"}) {  // a directory it creates, and one it found
      SCOPED_TRACE(std::to_string(signal_number) + " " + out);
      background_run sort{root_,
                          {"sort",
                           "in",
                           "-o",
                           out,
                           "--by",
                           "key",
                           "--file-size",
                           "1MiB",
                           "--compression",
                           "zstd",
                           "--spill-dir",
                           "spill"}};
      ASSERT_TRUE(sort.wait_until([&] { return holds_temporaries(path(out)); })) << sort.err();
      ::kill(sort.pid(), signal_number);
      auto const status = sort.wait();
      ASSERT_TRUE(WIFSIGNALED(status)) << "the sort ended before the signal came: " << sort.err();
      EXPECT_EQ(WTERMSIG(status), signal_number);
      EXPECT_FALSE(holds_temporaries(path(out))) << "temporary files left in " << out;
      EXPECT_TRUE(entries_in(path(out)).empty())
        << "left in " << out << ": " << entries_in(path(out)).size() << " entries";
      EXPECT_EQ(fs::exists(path(out)), out == "kept") << out;
      EXPECT_TRUE(entries_in(path("spill")).empty()) << "spill files left behind";
    }
  }
}

TEST_F(SpillwayCli, TheTemporariesOfAKilledRunAreRemovedByTheNextRun) {
  run_ok("gen uniform --rows 3000000 -o in");
  {
    background_run sort{
      root_,
      {"sort", "in", "-o", "out", "--by", "key", "--file-size", "1MiB", "--spill-dir", "spill"}};
    ASSERT_TRUE(sort.wait_until([&] { return holds_temporaries(path("out")); })) << sort.err();
    ::kill(sort.pid(), SIGKILL);  // no handler runs: the temporaries stay
    sort.wait();
  }
  ASSERT_TRUE(holds_temporaries(path("out")));
  write_text(path("out/.part-00000.parquet.tmp"), "not even Parquet");
  run_ok("gen uniform --rows 1000 -o small");
  run_ok("sort small -o out --by key");
  EXPECT_EQ(entries_in(path("out")), std::vector<std::string>{"part-00000.parquet"});
  run_ok("verify out --by key --against small");
  // A fake temporary alone, in a directory of an earlier dataset replaced with --overwrite.
  write_text(path("out/.part-00000.parquet.tmp"), "garbage");
  write_text(path("out/.part-00003.csv.tmp"), "garbage");
  run_ok("gen uniform --rows 10 -o out --overwrite");
  EXPECT_EQ(entries_in(path("out")), std::vector<std::string>{"part-00000.parquet"});
}

TEST_F(SpillwayCli, AnInputOfNoRowsGivesOneFileWithItsColumns) {
  write_text(path("empty.csv"), "key,payload\n");
  for (std::string const ranks : {"1", "2"}) {
    std::string const out = "out-" + ranks;
    SCOPED_TRACE(out);
    auto const sorted = run_ok("sort empty.csv -o " + out + " --by key --ranks " + ranks);
    auto const files  = files_in(out);
    ASSERT_EQ(files.size(), 1U) << sorted.err;
    EXPECT_TRUE(files.front().ends_with(".parquet")) << files.front();
    run_ok("verify " + out + " --by key --against empty.csv");
    // The file keeps the columns: it sorts again by them, and an unknown one is named.
    run_ok("sort " + out + " -o again-" + ranks + " --by payload:desc,key");
    run_ok("verify again-" + ranks + " --by payload:desc,key --against empty.csv");
    expect_failure(run("sort " + out + " -o bad --by nope"), 2, "'nope'", "bad");
  }
  run_ok("sort empty.csv -o csv --by key --output-format csv");
  ASSERT_EQ(files_in("csv").size(), 1U);
  run_ok("verify csv --by key --against empty.csv");
}

TEST_F(SpillwayCli, WhatCanBeCheckedBeforeReadingIsCheckedFirst) {
  run_ok("gen uniform --rows 200000 -o in");
  write_text(path("a-file"), "not a directory");
  struct refusal {
    std::string command;
    std::string named;
  };
  for (auto const& [command, named] : std::vector<refusal>{
         {"sort in -o out --by key --spill-dir a-file/spill" + std::string{TIGHT_BUDGETS},
          "--spill-dir"},
         {"sort in -o out --by key --ranks 2 --spill-dir a-file/spill", "--spill-dir"},
         {"shuffle in -o out --by key --partitions 2 --spill-dir a-file/spill", "--spill-dir"},
         {"sort in -o out --by key --report a-file/report.html", "--report"},
         {"sort in -o out --by key --ranks 2 --report report.html", "--report"},
         {"sort in -o a-file/out --by key", "a-file/out"},
         {"shuffle in -o a-file/out --by key --partitions 2", "a-file/out"},
         {"sort in -o out --by key --file-size 1", "--file-size"},
         {"sort in -o out --by key --ranks 2 --file-size 1000", "--file-size"},
         {"shuffle in -o out --by key --partitions 2 --file-size 1KiB", "--file-size"},
         {"gen uniform --rows 10 -o out --file-size 1", "--file-size"},
         {"sort in -o out --by key:asc,key:desc", "'key'"},
         {"sort in -o out --by key,payload,key --ranks 2", "'key'"},
         {"shuffle in -o out --by key,key --partitions 2", "'key'"}}) {
    SCOPED_TRACE(command);
    fs::remove_all(path("out"));  // each case on its own, whatever the one before left
    auto const start  = std::chrono::steady_clock::now();
    auto const result = run(command);
    expect_failure(result, 2, named, "out");
    EXPECT_FALSE(fs::exists(path("out"))) << "the refused command left its output directory";
    EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  }
}

}  // namespace

TEST_F(SpillwayCli, SortsStringColumnsWithoutCharactersIntoParquet) {
  // A string column entirely null, then entirely empty strings: no output batch has a byte of
  // characters.
  for (auto const* value : {"", "\"\""}) {
    SCOPED_TRACE(value);
    {
      std::ofstream csv{path("in.csv")};
      csv << "k,s\n";
      for (int row = 0; row < 50000; ++row) {
        csv << (row * 7919) % 50000 << ',' << value << '\n';
      }
    }
    for (auto const* ranks : {"1", "2"}) {
      run_ok(std::string{"sort in.csv -o out --overwrite --by k --ranks "} + ranks + TIGHT_BUDGETS);
      run_ok("verify out --by k --against in.csv");
    }
  }
}

/** @return the values of column `column` of every CSV file under `directory`, in name order */
std::vector<std::string> csv_column(fs::path const& directory, std::size_t column) {
  std::vector<fs::path> files;
  std::vector<std::string> values;
  if (!fs::is_directory(directory)) {
    return values;
  }
  for (auto const& entry : fs::directory_iterator(directory)) {
    files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  for (auto const& file : files) {
    std::ifstream in{file};
    std::string line;
    std::getline(in, line);  // the header
    while (std::getline(in, line)) {
      std::size_t begin = 0;
      for (std::size_t i = 0; i < column; ++i) {
        begin = line.find(',', begin) + 1;
      }
      values.push_back(line.substr(begin, line.find(',', begin) - begin));
    }
  }
  return values;
}

TEST_F(SpillwayCli, CsvColumnTypesAreTheSameUnderEveryDeviceMemory) {
  // Column v: integers, then words far beyond the first batch at 8 MiB (1 MiB batches). Sorted
  // by v, the output is in the order of strings ("10" before "9") under either budget.
  fs::create_directories(path("in"));
  for (auto const* file : {"in/a.csv", "in/b.csv"}) {
    std::ofstream csv{path(file)};
    csv << "k,v\n";
    for (int row = 0; row < 150000; ++row) {
      csv << row << ',' << (row * 7919) % 150000 << '\n';
    }
    if (std::string{file} == "in/b.csv") {
      for (int row = 0; row < 1000; ++row) {
        csv << row << ",x" << row << '\n';
      }
    }
  }
  for (auto const* budget : {"8MiB", "2GiB"}) {
    for (auto const* ranks : {"1", "2"}) {
      SCOPED_TRACE(std::string{budget} + " on ranks " + ranks);
      run_ok(std::string{"sort in -o out --overwrite --by v --output-format csv --device-memory "} +
             budget + " --ranks " + ranks);
      auto const values = csv_column(root_ / "out", 1);
      ASSERT_EQ(values.size(), 301000U);
      EXPECT_TRUE(std::is_sorted(values.begin(), values.end()));
      EXPECT_EQ(values.back(), "x999");
      run_ok("verify out --by v --against in");
    }
  }
  // Given types: k as a string sorts as text; v as int64 fails on its first word, naming it.
  run_ok("sort in/a.csv -o by-k --by k --output-format csv --csv-types k:string");
  auto const keys = csv_column(root_ / "by-k", 0);
  EXPECT_TRUE(std::is_sorted(keys.begin(), keys.end()));
  EXPECT_EQ(keys[1], "1");
  EXPECT_EQ(keys[2], "10");
  expect_failure(run("sort in -o bad --by v --csv-types v:int64"), 1, "'x0' is not a int64", "bad");
  expect_failure(
    run("shuffle in -o bad --by v --partitions 2 --csv-types v:int64"), 1, "'x0'", "bad");
  expect_failure(run("sort in -o bad --by v --csv-types w:string"), 2, "--csv-types", "bad");
  expect_failure(run("sort in -o bad --by v --csv-types v:text"), 2, "unknown type 'text'", "bad");
  run_ok("sort in/a.csv -o a.parquet.d --by k");
  expect_failure(run("sort a.parquet.d -o bad --by k --csv-types k:string"), 2, "not CSV", "bad");
  // verify reads a CSV dataset (checked, or --against) with the same given types.
  run_ok("sort in/a.csv -o by-k.parquet.d --by k --csv-types k:string");
  auto const untyped = run("verify by-k.parquet.d --by k --against in/a.csv");
  EXPECT_EQ(untyped.exit_code, 1) << untyped.err;
  EXPECT_NE(untyped.err.find("k: string"), std::string::npos) << untyped.err;
  run_ok("verify by-k.parquet.d --by k --against in/a.csv --csv-types k:string");
  run_ok("verify by-k --by k --csv-types k:string");
  auto const by_number = run("verify by-k --by k");  // read as int64, "10" before "2" is wrong
  EXPECT_EQ(by_number.exit_code, 1) << by_number.err;
  auto const not_csv = run("verify by-k.parquet.d --by k --csv-types k:string");
  EXPECT_EQ(not_csv.exit_code, 2) << not_csv.err;
  EXPECT_NE(not_csv.err.find("not CSV"), std::string::npos) << not_csv.err;
}

/// Each file under `directory` (relative to it) with its bytes.
std::vector<std::pair<std::string, std::string>> file_bytes_under(fs::path const& directory) {
  std::vector<std::pair<std::string, std::string>> files;
  for (auto const& entry : fs::recursive_directory_iterator(directory)) {
    if (entry.is_regular_file()) {
      std::ifstream in{entry.path(), std::ios::binary};
      files.emplace_back(
        fs::relative(entry.path(), directory).string(),
        std::string{std::istreambuf_iterator<char>{in}, std::istreambuf_iterator<char>{}});
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

TEST_F(SpillwayCli, ThreadsSizeThePoolAndLeaveTheOutputAsItIs) {
  // String keys over several batches: sorted in parts, merged and gathered on 1, 3 and 16
  // threads, the files are the same bytes, and the summary reports the threads used.
  run_ok("gen strings --rows 300000 -o in --files 2");
  std::vector<std::pair<std::string, std::string>> first;
  for (auto const* threads : {"1", "3", "16"}) {
    SCOPED_TRACE(std::string{threads} + " threads");
    auto const sorted  = run_ok(std::string{"sort in -o out --overwrite --by key --json "} +
                               "--batch-size 2MiB --threads " + threads);
    auto const summary = nlohmann::json::parse(sorted.out);
    EXPECT_EQ(std::to_string(summary.at("threads").get<std::size_t>()), threads) << sorted.out;
    auto files = file_bytes_under(root_ / "out");
    ASSERT_FALSE(files.empty());
    if (first.empty()) {
      first = std::move(files);
    } else {
      EXPECT_TRUE(files == first) << "the output differs from that of one thread";
    }
  }
  // The default is the cores this process may use; shuffle takes the option too.
  auto const sorted  = run_ok("sort in -o out --overwrite --by key --json");
  auto const summary = nlohmann::json::parse(sorted.out);
  EXPECT_GE(summary.at("threads").get<std::size_t>(), 1U);
  EXPECT_LE(summary.at("threads").get<std::size_t>(), std::thread::hardware_concurrency());
  auto const shuffled =
    run_ok("shuffle in -o shuffled --by key --partitions 4 --ranks 2 --threads 3 --json");
  EXPECT_EQ(nlohmann::json::parse(shuffled.out).at("threads").get<std::size_t>(), 3U);
  expect_failure(run("sort in -o bad --by key --threads 0"), 2, "--threads", "bad");
  expect_failure(
    run("shuffle in -o bad --by key --partitions 2 --threads 2000"), 2, "--threads", "bad");
}

TEST_F(SpillwayCli, CsvDecimalsSortByValueAndWriteTheirScale) {
  write_text(path("d.csv"),
             "price,n\n-12.3,1\n7,2\n0.05,3\n,4\n-100.25,5\n12345678901234567890.5,6\n");
  // The type's comma is inside its parentheses; spaces there are allowed.
  run_ok(
    "sort d.csv -o out --by price:desc:nulls_last --output-format csv --csv-types "
    "\"price:decimal128(38, 2),n:int32\"");
  auto const prices = csv_column(root_ / "out", 0);
  EXPECT_EQ(
    prices,
    (std::vector<std::string>{"12345678901234567890.50", "7.00", "0.05", "-12.30", "-100.25", ""}));
  expect_failure(run("sort d.csv -o bad --by price --csv-types \"price:decimal64(5,2)\""),
                 1,
                 "'12345678901234567890.5' is not a decimal64(5, 2) value",
                 "bad");
  expect_failure(run("sort d.csv -o bad --by price --csv-types \"price:decimal128(39,2)\""),
                 2,
                 "precision must be 1 to 38",
                 "bad");
  expect_failure(run("sort d.csv -o bad --by price --csv-types \"price:decimal12(5,2)\""),
                 2,
                 "is not a decimal type",
                 "bad");
  expect_failure(run("sort d.csv -o bad --by price --csv-types \"price:decimal128(5)\""),
                 2,
                 "two integers",
                 "bad");
}
