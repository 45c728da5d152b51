// for_each_rank_group for the in-process binaries: every group size, ranks as threads.
#include "testing/rank_groups.hpp"

#include <spillway/shuffle/in_process_communicator.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <exception>
#include <string>

namespace spillway::testing {
std::vector<int> rank_group_sizes() { return {1, 2, 3, 4, 8}; }

bool ranks_are_processes() noexcept { return false; }

void for_each_rank_group(std::function<void(communicator&)> const& body) {
  for (int size : rank_group_sizes()) {
    SCOPED_TRACE("group of " + std::to_string(size) + " in-process ranks");
    int const failed_before = failed_test_parts();
    try {
      run_in_process(size, [&](communicator& comm) {
        body(comm);
        // A rank that stopped at a failed assertion may leave its peers waiting: fail the group.
        if (failed_test_parts() != failed_before) {
          throw std::runtime_error("rank " + std::to_string(comm.rank()) +
                                   " finished with a failed assertion");
        }
      });
    } catch (std::exception const& e) {
      ADD_FAILURE() << "group of " << size << " ranks: " << e.what();
      return;
    }
    if (failed_test_parts() != failed_before) {
      return;
    }
  }
}

}  // namespace spillway::testing
