/**
 * @file cuda_shuffle_test.cpp
 * @brief The shuffles with every rank's device on the GPU: partitions equal the one-rank
 * reference, and shards spill and are recomputed on the GPU.
 */
#include "shuffle/shuffle_harness.hpp"
#include "testing/cuda_testing.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/rank_groups.hpp"

#include <gtest/gtest.h>

namespace spillway {
namespace {

using shuffle_testing::case_name;
using shuffle_testing::run_and_check;
using shuffle_testing::run_settings;
using shuffle_testing::shuffle_case;

/// The same shuffles with every rank's device on the GPU (in-process ranks: the MPI
/// communicator sends host memory).
class ConcurrentCudaShuffle : public ::testing::TestWithParam<shuffle_case> {};

TEST_P(ConcurrentCudaShuffle, PartitionsEqualTheOneRankReference) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  if (testing::ranks_are_processes()) {
    GTEST_SKIP() << "the MPI communicator moves host memory; device shards cross it on the CPU "
                    "backend only";
  }
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows = 600;
    settings.cuda = true;
    (void)run_and_check(comm, GetParam(), settings);
  });
}

TEST_P(ConcurrentCudaShuffle, SpillsAndLostShardsOnTheGpu) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  if (testing::ranks_are_processes()) {
    GTEST_SKIP() << "the MPI communicator moves host memory";
  }
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows             = 400;
    settings.cuda             = true;
    settings.device           = 256_KiB;  // shards spill to the host tier and disk
    settings.host_budget      = 256_KiB;
    settings.loss_probability = 0.2;
    (void)run_and_check(comm, GetParam(), settings);
  });
}

INSTANTIATE_TEST_SUITE_P(
  Cases,
  ConcurrentCudaShuffle,
  ::testing::Values(shuffle_case{shuffle_mode::PULL, 7, partition_method::HASH},
                    shuffle_case{shuffle_mode::PUSH, 7, partition_method::HASH},
                    shuffle_case{shuffle_mode::PULL, 16, partition_method::RANGE},
                    shuffle_case{shuffle_mode::PUSH, 16, partition_method::RANGE}),
  [](auto const& param_info) { return case_name(param_info.param); });

}  // namespace
}  // namespace spillway
