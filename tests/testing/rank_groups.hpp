/**
 * @file rank_groups.hpp
 * @brief Runs one test body on every rank of a group, in whichever environment the test binary
 * was built for: threads of this process (`rank_groups_in_process.cpp`) or the processes of an
 * `mpirun` (`rank_groups_mpi.cpp`). Shuffle tests written against it run in both.
 *
 * What a failure does, in both environments: when the body throws or records a gtest failure on
 * some rank, that rank fails the group (`in_process_group::fail` / `mpi_communicator::fail`), so
 * the pending and later communicator operations of every other rank throw `communication_error`
 * instead of waiting for it; the test then fails on every rank, naming the rank and its error.
 * A rank blocked on anything but its communicator (a bug in the body) is ended by the ctest
 * timeout.
 */
#pragma once

#include <spillway/shuffle/communicator.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace spillway::testing {

/**
 * @brief Runs `body` once per group, on every rank of it; returns when every rank has returned.
 *
 * In process: groups of {1, 2, 3, 4, 8} ranks, one thread each. Under MPI: one group, all the
 * processes of MPI_COMM_WORLD (a fresh communicator per call).
 */
void for_each_rank_group(std::function<void(communicator&)> const& body);

/** @return the group sizes `for_each_rank_group` runs, in order */
std::vector<int> rank_group_sizes();

/** @return true when ranks are processes (MPI), false when they are threads of this process */
bool ranks_are_processes() noexcept;

/** @return the failed parts (assertions) of the running test so far */
inline int failed_test_parts() {
  auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
  if (info == nullptr) {
    return 0;
  }
  auto const* result = info->result();
  int failed         = 0;
  for (int i = 0; i < result->total_part_count(); ++i) {
    failed += result->GetTestPartResult(i).failed() ? 1 : 0;
  }
  return failed;
}

/** @return the bytes of `text`, as a message carries them */
inline std::vector<std::byte> bytes_of(std::string const& text) {
  std::vector<std::byte> out(text.size());
  std::memcpy(out.data(), text.data(), text.size());
  return out;
}

/** @return a received message's bytes as text */
inline std::string text_of(buffer const& data) {
  return {static_cast<char const*>(data.data()), data.size()};
}

}  // namespace spillway::testing
