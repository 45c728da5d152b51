// for_each_rank_group for the MPI binaries: one group, every process of the mpirun.
#include "testing/rank_groups.hpp"
#include "testing/rank_groups_mpi.hpp"

#include <spillway/core/error.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <exception>
#include <string>

namespace spillway::testing {
namespace {

mpi_environment* current_environment = nullptr;

}  // namespace

void set_rank_group_environment(mpi_environment* environment) noexcept {
  current_environment = environment;
}

mpi_environment& rank_group_environment() {
  SPILLWAY_EXPECTS(
    current_environment != nullptr, "the MPI test main did not set the environment", logic_error);
  return *current_environment;
}

std::vector<int> rank_group_sizes() {
  return {current_environment == nullptr ? 0 : current_environment->world_size()};
}

bool ranks_are_processes() noexcept { return true; }

void for_each_rank_group(std::function<void(communicator&)> const& body) {
  ASSERT_NE(current_environment, nullptr) << "the MPI test main did not set the environment";
  auto& environment = *current_environment;
  int const rank    = environment.world_rank();
  SCOPED_TRACE("MPI rank " + std::to_string(rank) + " of " +
               std::to_string(environment.world_size()));
  // Every process runs the same tests in the same order, so every process constructs the same
  // communicators in the same order (construction is collective).
  std::string error;  // empty while this rank is fine
  {
    // SPILLWAY_TEST_STAGE_DEVICE_MESSAGES=1 (CTest sets it for 2 and 4 processes): messages of
    // emulated device memory go through host staging, as those of a GPU's memory do.
    mpi_communicator::options options;
    char const* const stage         = std::getenv("SPILLWAY_TEST_STAGE_DEVICE_MESSAGES");
    options.stage_all_device_memory = stage != nullptr && std::string{stage} == "1";
    mpi_communicator comm(environment, options);
    int const failed_before = failed_test_parts();
    try {
      body(comm);
    } catch (std::exception const& e) {
      error = e.what();
    } catch (...) {
      error = "an exception that is not a std::exception";
    }
    if (error.empty() && failed_test_parts() != failed_before) {
      error = "a failed assertion";
    }
    if (!error.empty()) {
      // Peers waiting on this rank's messages or collectives now fail instead of hanging.
      comm.fail("rank " + std::to_string(rank) + " failed: " + error);
    }
  }
  // The verdict travels on a fresh communicator: the body's may be failed.
  mpi_communicator verdict(environment);
  std::vector<std::byte> mine(1 + error.size());
  mine[0] = std::byte{error.empty() ? std::uint8_t{0} : std::uint8_t{1}};
  std::memcpy(mine.data() + 1, error.data(), error.size());
  auto const all = verdict.allgather(mine);
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (!all[r].empty() && all[r][0] != std::byte{0}) {
      ADD_FAILURE() << "rank " << r << " of " << all.size() << " failed: "
                    << std::string(reinterpret_cast<char const*>(all[r].data() + 1),
                                   all[r].size() - 1);
    }
  }
}

}  // namespace spillway::testing
