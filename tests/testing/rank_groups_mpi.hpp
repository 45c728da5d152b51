/**
 * @file rank_groups_mpi.hpp
 * @brief The MPI environment of an MPI test binary, set by its `main` (tests/main/mpi_main.cpp).
 */
#pragma once

#include <spillway/shuffle/mpi_communicator.hpp>

namespace spillway::testing {

/** @brief Makes `environment` the one `for_each_rank_group` uses (null: none). */
void set_rank_group_environment(mpi_environment* environment) noexcept;

/** @return the environment set by `main`; @throws logic_error when none is */
mpi_environment& rank_group_environment();

}  // namespace spillway::testing
