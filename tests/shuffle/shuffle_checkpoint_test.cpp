/**
 * Map outputs persisted with `shuffle_options::checkpoint_directory`, on every rank group: a rerun
 * reads them back instead of running the map tasks (their inputs are not even called), gives the
 * same partitions, and reruns exactly the maps whose checkpoint is missing or damaged, or all of
 * them when the partitioning changed.
 */
#include "testing/expect_tables_equal.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/rank_groups.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/pull_shuffler.hpp>
#include <spillway/shuffle/push_shuffler.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

namespace fs = std::filesystem;

constexpr std::size_t MAPS_PER_RANK = 4;
constexpr std::size_t PARTITIONS    = 6;

/// A directory every rank of the group agrees on (rank 0 picks it), removed at the end.
class shared_directory {
 public:
  explicit shared_directory(communicator& comm) : comm_(comm) {
    std::uint64_t token = std::random_device{}();
    auto const all      = comm.allgather(std::as_bytes(std::span<std::uint64_t const>(&token, 1)));
    std::memcpy(&token, all.front().data(), sizeof(token));
    path_ = fs::path(::testing::TempDir()) / ("shuffle_checkpoint_" + std::to_string(token));
  }
  ~shared_directory() {
    comm_.barrier();
    if (comm_.rank() == 0) {
      fs::remove_all(path_);
    }
  }
  shared_directory(shared_directory const&)            = delete;
  shared_directory& operator=(shared_directory const&) = delete;
  shared_directory(shared_directory&&)                 = delete;
  shared_directory& operator=(shared_directory&&)      = delete;
  [[nodiscard]] std::string string() const { return path_.string(); }

 private:
  communicator& comm_;
  fs::path path_;
};

struct run_outcome {
  std::size_t inputs_called = 0;
  shuffle_statistics stats;
  std::map<std::size_t, std::unique_ptr<table>> partitions;  ///< the ones this rank owns
};

/// One shuffle of this rank's maps ("rank r map k"), each input counted when it is called.
run_outcome run(communicator& comm,
                shuffle_mode mode,
                std::string const& checkpoint,
                std::uint64_t seed,
                host_memory_resource& host) {
  device_environment_options env_options;
  env_options.device_memory = 8_MiB;
  env_options.host_memory   = 8_MiB;
  env_options.spill_root    = ::testing::TempDir();
  device_environment env(env_options);
  shuffle_options options(env.host());
  options.partitions.method         = partition_method::HASH;
  options.partitions.key_columns    = {0};
  options.partitions.num_partitions = PARTITIONS;
  options.partitions.seed           = seed;
  options.checkpoint_directory      = checkpoint;
  memory_resources const mrs{env.device()};
  std::unique_ptr<shuffler> shuffle =
    mode == shuffle_mode::PULL
      ? std::unique_ptr<shuffler>(
          std::make_unique<pull_shuffler>(comm, env.store(), options, default_stream(), mrs))
      : std::make_unique<push_shuffler>(comm, env.store(), options, default_stream(), mrs);
  std::atomic<std::size_t> called{0};
  for (std::size_t k = 0; k < MAPS_PER_RANK; ++k) {
    auto const seed_of_batch = static_cast<std::uint64_t>(comm.rank()) * 100 + k;
    shuffle->add_map(
      [&called, seed_of_batch](stream_view, memory_resources out) {
        ++called;
        return testing::random_table(
          {type_id::INT64, type_id::STRING}, 500 + seed_of_batch, seed_of_batch, 0.1, out.output());
      },
      "rank " + std::to_string(comm.rank()) + " map " + std::to_string(k));
  }
  shuffle->finish_maps();
  run_outcome outcome;
  for (auto const partition : shuffle->owned_partitions()) {
    outcome.partitions[partition] =
      copy(shuffle->read_partition(partition)->view(), default_stream(), memory_resources{host});
  }
  shuffle->close();
  outcome.inputs_called = called.load();
  outcome.stats         = shuffle->statistics();
  return outcome;
}

void expect_same_partitions(run_outcome const& expected, run_outcome const& actual) {
  ASSERT_EQ(expected.partitions.size(), actual.partitions.size());
  for (auto const& [partition, rows] : expected.partitions) {
    SPILLWAY_EXPECT_TABLES_EQUAL(rows->view(), actual.partitions.at(partition)->view())
      << "partition " << partition;
  }
}

class ConcurrentShuffleCheckpoint : public ::testing::TestWithParam<shuffle_mode> {};

TEST_P(ConcurrentShuffleCheckpoint, ARerunReadsMapOutputsInsteadOfRunningMaps) {
  testing::for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    shared_directory const dir(comm);
    auto const first = run(comm, GetParam(), dir.string(), 5, host);
    EXPECT_EQ(first.inputs_called, MAPS_PER_RANK);
    EXPECT_EQ(first.stats.resumed_maps, 0U);
    EXPECT_EQ(first.stats.checkpoint_errors, 0U);
    comm.barrier();  // every rank's checkpoints are written

    auto const second = run(comm, GetParam(), dir.string(), 5, host);
    EXPECT_EQ(second.inputs_called, 0U) << "a checkpointed map input was read again";
    EXPECT_EQ(second.stats.resumed_maps, MAPS_PER_RANK);
    EXPECT_EQ(second.stats.map_tasks, 0U);
    expect_same_partitions(first, second);
    comm.barrier();

    // Another partitioning (seed) must not use these files.
    auto const reseeded = run(comm, GetParam(), dir.string(), 6, host);
    EXPECT_EQ(reseeded.inputs_called, MAPS_PER_RANK);
    EXPECT_EQ(reseeded.stats.resumed_maps, 0U);
  });
}

TEST_P(ConcurrentShuffleCheckpoint, MissingAndDamagedCheckpointsRerunOnlyTheirMaps) {
  testing::for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    shared_directory const dir(comm);
    auto const first = run(comm, GetParam(), dir.string(), 9, host);
    comm.barrier();
    if (comm.rank() == 0) {
      // Every third checkpoint file removed, and one more damaged.
      std::vector<fs::path> files;
      for (auto const& entry : fs::directory_iterator(dir.string())) {
        files.push_back(entry.path());
      }
      std::sort(files.begin(), files.end());
      ASSERT_EQ(files.size(), MAPS_PER_RANK * static_cast<std::size_t>(comm.size()));
      for (std::size_t i = 0; i < files.size(); i += 3) {
        fs::remove(files[i]);
      }
      fs::resize_file(files[1], fs::file_size(files[1]) - 5);
    }
    comm.barrier();
    auto const second = run(comm, GetParam(), dir.string(), 9, host);
    expect_same_partitions(first, second);
    std::uint64_t const reran[2] = {second.inputs_called, second.stats.resumed_maps};
    std::uint64_t total_reran = 0, total_resumed = 0;
    for (auto const& theirs :
         comm.allgather(std::as_bytes(std::span<std::uint64_t const>(reran)))) {
      std::uint64_t v[2];
      std::memcpy(v, theirs.data(), sizeof(v));
      total_reran += v[0];
      total_resumed += v[1];
    }
    auto const maps    = MAPS_PER_RANK * static_cast<std::size_t>(comm.size());
    auto const removed = (maps + 2) / 3;
    EXPECT_EQ(total_reran, removed + 1) << "removed and damaged checkpoints rerun, no others";
    EXPECT_EQ(total_resumed, maps - removed - 1);
  });
}

INSTANTIATE_TEST_SUITE_P(Modes,
                         ConcurrentShuffleCheckpoint,
                         ::testing::Values(shuffle_mode::PULL, shuffle_mode::PUSH),
                         [](auto const& param_info) {
                           return param_info.param == shuffle_mode::PULL ? "Pull" : "Push";
                         });

}  // namespace
}  // namespace spillway
