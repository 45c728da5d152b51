/**
 * End-to-end tests of the sort's check of its own output: a row out of order fails the command
 * with an internal error and leaves no output, on one rank and on two.
 */
#include "cli_fixture.hpp"

#include <gtest/gtest.h>

#include <string>

namespace {

using spillway::cli_testing::SpillwayCli;

/// Budgets under which 200 000 uniform rows make several output batches.
constexpr char const* BUDGETS = " --device-memory 4MiB --host-memory 8MiB --spill-dir spill";

class SpillwayOrderCheck : public SpillwayCli, public ::testing::WithParamInterface<int> {};

TEST_P(SpillwayOrderCheck, AnOutputRowOutOfOrderFailsTheSortAndLeavesNoOutput) {
  run_ok("gen uniform --rows 200000 --seed 3 -o in");
  std::string const ranks = " --ranks " + std::to_string(GetParam());
  auto const failed =
    run_launched("SPILLWAY_TEST_REVERSE_OUTPUT_BATCH=1 '" + spillway::cli_testing::spillway_exe() +
                 "' sort in -o out --by key" + ranks + BUDGETS);
  expect_failure(failed, 1, "internal error: output row", "out");
  // Without the check the same reversed batch is written, and verify finds it.
  launched_ok("SPILLWAY_TEST_REVERSE_OUTPUT_BATCH=1 '" + spillway::cli_testing::spillway_exe() +
              "' sort in -o out --by key --no-order-check" + ranks + BUDGETS);
  auto const verified = run("verify out --by key --against in");
  EXPECT_EQ(verified.exit_code, 1) << verified.err;
  EXPECT_NE(verified.err.find("is not sorted by key"), std::string::npos) << verified.err;
  // And with the check, untouched output passes it.
  run_ok("sort in -o out --by key --overwrite" + ranks + BUDGETS);
  run_ok("verify out --by key --against in");
}

INSTANTIATE_TEST_SUITE_P(Ranks,
                         SpillwayOrderCheck,
                         ::testing::Values(1, 2),
                         [](auto const& test_info) {
                           return std::to_string(test_info.param) + "_ranks";
                         });

}  // namespace
