// The main of MPI test binaries: MPI around RUN_ALL_TESTS, gtest output from rank 0 only, and an
// exit code that is non-zero on every rank when a test failed on any.
#include "testing/rank_groups_mpi.hpp"

#include <spillway/shuffle/mpi_communicator.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdio>
#include <string>
#include <vector>

namespace {

/**
 * @brief Prints a failed assertion of this (non-zero) rank on stderr. The test's name is kept
 * from OnTestStart: gtest calls OnTestPartResult holding the lock that current_test_info() takes.
 */
class failure_printer : public ::testing::EmptyTestEventListener {
 public:
  explicit failure_printer(int rank) : rank_(rank) {}
  void OnTestStart(::testing::TestInfo const& test) override {
    test_ = std::string{test.test_suite_name()} + "." + test.name();
  }
  void OnTestPartResult(::testing::TestPartResult const& result) override {
    if (!result.failed()) {
      return;
    }
    std::fprintf(stderr,
                 "rank %d: failure in %s at %s:%d: %s\n",
                 rank_,
                 test_.c_str(),
                 result.file_name() != nullptr ? result.file_name() : "?",
                 result.line_number(),
                 result.message());
  }

 private:
  int rank_;
  std::string test_ = "?";
};

}  // namespace

int main(int argc, char** argv) {
  spillway::mpi_environment environment(&argc, &argv);
  ::testing::InitGoogleTest(&argc, argv);
  if (environment.world_rank() != 0) {
    // The other ranks run silently: no printer, no XML/JSON report (rank 0 writes it); only
    // their own failures are printed, on stderr, naming the rank.
    auto& listeners = ::testing::UnitTest::GetInstance()->listeners();
    delete listeners.Release(listeners.default_result_printer());
    delete listeners.Release(listeners.default_xml_generator());
    listeners.Append(new failure_printer(environment.world_rank()));
  }
  spillway::testing::set_rank_group_environment(&environment);
  int const result = RUN_ALL_TESTS();
  bool any_failed  = false;
  {
    spillway::mpi_communicator comm(environment);
    std::vector<std::byte> const mine{std::byte{result != 0 ? std::uint8_t{1} : std::uint8_t{0}}};
    for (auto const& flag : comm.allgather(mine)) {
      any_failed = any_failed || flag.at(0) != std::byte{0};
    }
  }
  spillway::testing::set_rank_group_environment(nullptr);
  return any_failed ? 1 : 0;
}
