/**
 * @file shuffle_test.cpp
 * @brief The pull and push shuffles on every rank group (threads in-process, or MPI's
 * processes): rows land in their partitions, each partition equals a reference computed on one
 * rank from the same batches in global map order, skew spills instead of failing, lost and
 * corrupt shards are recomputed, empty partitions keep the schema, decimal columns keep their
 * types, and the shuffle's events add up. Every test runs ranks as threads next to each
 * shuffle's service, inbox and sender threads, so every suite is named Concurrent* and runs
 * under ThreadSanitizer in CI.
 */
#include "shuffle/shuffle_harness.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/rank_groups.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/shuffle/pull_shuffler.hpp>
#include <spillway/shuffle/push_shuffler.hpp>

#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

namespace spillway {
namespace {

using shuffle_testing::batch_rank;
using shuffle_testing::case_name;
using shuffle_testing::global_map_order;
using shuffle_testing::KEYS;
using shuffle_testing::rank_environment;
using shuffle_testing::reference_partition;
using shuffle_testing::run_and_check;
using shuffle_testing::run_settings;
using shuffle_testing::shuffle_case;
using shuffle_testing::sum_over_ranks;

class ConcurrentShuffle : public ::testing::TestWithParam<shuffle_case> {};

TEST_P(ConcurrentShuffle, PartitionsEqualTheOneRankReference) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows = GetParam().num_partitions >= 1000 ? 300 : 600;
    (void)run_and_check(comm, GetParam(), settings);
  });
}

TEST_P(ConcurrentShuffle, BatchesComeInGlobalMapOrder) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows            = 200;
    settings.read_as_batches = true;
    (void)run_and_check(comm, GetParam(), settings);
  });
}

TEST_P(ConcurrentShuffle, TakenBatchesOwnTheirRowsInGlobalMapOrder) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows            = 200;
    settings.read_as_batches = true;
    settings.take_batches    = true;
    auto const result        = run_and_check(comm, GetParam(), settings);
    // Nothing spilled (64 MiB of device): every shard handed over as it was stored or received.
    EXPECT_EQ(sum_over_ranks(comm, result->statistics.shards_read),
              sum_over_ranks(comm, result->statistics.shards_written));
    EXPECT_EQ(result->statistics.shards_taken_in_place, result->statistics.shards_read);
  });
}

TEST_P(ConcurrentShuffle, TakenBatchesOfLostOrCorruptShardsAreRecomputed) {
  // With 1000 partitions, fewer rows and losses only (each shard is a few rows: the corrupt
  // shards' recomputation is the same code, tested with 7 and 5 partitions and through
  // for_each_batch; under ThreadSanitizer this case alone took 90 s).
  bool const many = GetParam().num_partitions >= 1000;
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows             = many ? 100 : 300;
    settings.read_as_batches  = true;
    settings.take_batches     = true;
    settings.loss_probability = 0.2;
    auto result               = run_and_check(comm, GetParam(), settings);
    EXPECT_GT(sum_over_ranks(comm, result->statistics.recomputed_maps), 0U);
    if (many) {
      return;
    }
    // Every shard on disk and corrupt when read there: taken as copies of the recomputed rows.
    settings.loss_probability       = 0.0;
    settings.corrupt_spilled_shards = true;
    result                          = run_and_check(comm, GetParam(), settings);
    EXPECT_GT(sum_over_ranks(comm, result->spills.read_errors), 0U);
  });
}

TEST_P(ConcurrentShuffle, LostShardsAreRecomputedWithTheSameResult) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    // With 1000 partitions a third of the rows still make hundreds of shards a map task (and
    // keep the case at a few seconds under ThreadSanitizer).
    settings.rows                = GetParam().num_partitions >= 1000 ? 100 : 300;
    settings.loss_probability    = 0.2;
    auto const result            = run_and_check(comm, GetParam(), settings);
    std::size_t const recomputed = sum_over_ranks(comm, result->statistics.recomputed_maps);
    std::size_t const lost       = sum_over_ranks(comm, result->statistics.lost_shards);
    EXPECT_GT(lost, 0U);
    EXPECT_GT(recomputed, 0U) << "losses were injected but nothing was recomputed";
    EXPECT_EQ(result->events.count(event_kind::SHARD_RECOMPUTED),
              result->statistics.recomputed_maps);
  });
}

TEST_P(ConcurrentShuffle, CorruptSpilledShardsAreRecomputedWithTheSameResult) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows                   = GetParam().num_partitions >= 1000 ? 100 : 300;
    settings.corrupt_spilled_shards = true;
    auto const result               = run_and_check(comm, GetParam(), settings);
    // Shards read back from disk were corrupt: the spill store said so, and for each one the
    // producer reran its map task (the rows were checked against the reference above).
    std::size_t const recomputed  = sum_over_ranks(comm, result->statistics.recomputed_maps);
    std::size_t const read_errors = sum_over_ranks(comm, result->spills.read_errors);
    std::size_t const corrupted   = sum_over_ranks(comm, result->corrupted_reads);
    EXPECT_GT(corrupted, 0U);
    EXPECT_GT(read_errors, 0U);
    EXPECT_EQ(recomputed, read_errors) << "each corrupt shard is rebuilt once, by its producer";
    EXPECT_GE(sum_over_ranks(comm, result->statistics.lost_shards), read_errors);
  });
}

TEST_P(ConcurrentShuffle, EventsCountShardsStoredSentAndReceived) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.rows     = 300;
    auto const result = run_and_check(comm, GetParam(), settings);
    auto const& stats = result->statistics;
    auto const& log   = result->events;
    EXPECT_EQ(log.count(event_kind::SHARD_STORED), stats.shards_written);
    EXPECT_EQ(log.total_bytes(event_kind::SHARD_STORED), stats.bytes_written);
    EXPECT_EQ(log.count(event_kind::SHARD_RECOMPUTED), 0U);
    // Every shard whose producer is not its owner travels once: sent by one rank, received by
    // the other; the rest are read where they were made.
    std::size_t const sent       = sum_over_ranks(comm, log.count(event_kind::SHARD_SENT));
    std::size_t const received   = sum_over_ranks(comm, log.count(event_kind::SHARD_RECEIVED));
    std::size_t const sent_bytes = sum_over_ranks(comm, log.total_bytes(event_kind::SHARD_SENT));
    std::size_t const received_bytes =
      sum_over_ranks(comm, log.total_bytes(event_kind::SHARD_RECEIVED));
    std::size_t const shards = sum_over_ranks(comm, stats.shards_written);
    std::size_t const read   = sum_over_ranks(comm, stats.shards_read);
    EXPECT_EQ(read, shards);
    EXPECT_EQ(sent, received);
    EXPECT_EQ(sent_bytes, received_bytes);
    EXPECT_LE(sent, shards);
    if (comm.size() == 1) {
      EXPECT_EQ(sent, 0U);
    } else if (GetParam().num_partitions > 1) {
      EXPECT_GT(sent, 0U);
    }
    for (auto const& e : log.events()) {
      EXPECT_LT(static_cast<std::size_t>(e.value), GetParam().num_partitions);
      EXPECT_GT(e.bytes, 0U);
    }
  });
}

INSTANTIATE_TEST_SUITE_P(
  ModesAndPartitionings,
  ConcurrentShuffle,
  ::testing::Values(shuffle_case{shuffle_mode::PULL, 1, partition_method::HASH},
                    shuffle_case{shuffle_mode::PULL, 7, partition_method::HASH},
                    shuffle_case{shuffle_mode::PULL, 1000, partition_method::HASH},
                    shuffle_case{shuffle_mode::PULL, 5, partition_method::RANGE},
                    shuffle_case{shuffle_mode::PUSH, 1, partition_method::HASH},
                    shuffle_case{shuffle_mode::PUSH, 7, partition_method::HASH},
                    shuffle_case{shuffle_mode::PUSH, 1000, partition_method::HASH},
                    shuffle_case{shuffle_mode::PUSH, 5, partition_method::RANGE}),
  [](auto const& param_info) { return case_name(param_info.param); });

class ConcurrentShuffleSkew : public ::testing::TestWithParam<shuffle_mode> {};

TEST_P(ConcurrentShuffleSkew, NinetyPercentOnOnePartitionSpillsAndStaysRight) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.batches = 4 * static_cast<std::size_t>(comm.size());
    settings.rows    = 12000;
    settings.skew    = true;
    // 90% of the rows have the integer key 7; with the string key beside it they spread, and the
    // largest partition takes about a third of the rows. Each rank with input (all but the last)
    // runs 4 to 8 batches, keeping a packed copy of each (about 420 KB) beside shards as large:
    // more than the 2 MiB device in every group size (one rank included), so both modes must
    // spill, and never fail.
    settings.device          = 2_MiB;
    settings.host_budget     = 256_KiB;
    settings.inbox_budget    = 256_KiB;
    settings.read_as_batches = true;  // one shard pinned at a time: the partition need not fit
    auto const result =
      run_and_check(comm, shuffle_case{GetParam(), 4, partition_method::HASH}, settings);
    std::size_t moved = 0;
    for (auto const to : {spill_tier::HOST, spill_tier::DISK}) {
      moved += result->spills.between(spill_tier::DEVICE, to).count;
    }
    std::size_t const spilled = sum_over_ranks(comm, moved);
    EXPECT_GT(spilled, 0U) << "the skewed partition should not fit the device";
  });
}

INSTANTIATE_TEST_SUITE_P(Modes,
                         ConcurrentShuffleSkew,
                         ::testing::Values(shuffle_mode::PULL, shuffle_mode::PUSH),
                         [](auto const& param_info) {
                           return std::string(param_info.param == shuffle_mode::PULL ? "Pull"
                                                                                     : "Push");
                         });

TEST(ConcurrentShuffleDecimals, EveryRowInItsPartitionAndEveryPartitionKeepsTheDecimalTypes) {
  // Keyed on a DECIMAL128 and a DECIMAL32, with DECIMAL64 and DECIMAL256 payloads. The last rank
  // maps nothing and learns the schema from the others' words: its empty partitions must still
  // have each decimal's precision and scale.
  std::vector<data_type> const types{data_type{type_id::DECIMAL128, 38, 10},
                                     data_type{type_id::DECIMAL32, 9, -2},
                                     data_type{type_id::DECIMAL64, 15, 2},
                                     data_type{type_id::DECIMAL256, 76, 20}};
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    std::vector<std::unique_ptr<table>> batches;
    for (std::size_t index = 0; index < 4; ++index) {
      batches.push_back(testing::random_table(types, 300, 40 + index, 0.1, memory));
    }
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 2000;  // most partitions empty
    options.partitions.seed           = 5;
    push_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
    for (std::size_t index = 0; index < batches.size(); ++index) {
      if (batch_rank(index, comm.size()) == comm.rank()) {
        shuffle.add_map(batches[index]->view());
      }
    }
    shuffle.finish_maps();
    auto const order = global_map_order(batches.size(), comm.size());
    std::size_t rows = 0;
    for (std::size_t const partition : shuffle.owned_partitions()) {
      auto const actual = shuffle.read_partition(partition);
      ASSERT_EQ(actual->num_columns(), types.size());
      for (std::size_t c = 0; c < types.size(); ++c) {
        ASSERT_EQ(actual->view().column(c).type(), types[c]) << "partition " << partition;
      }
      rows += actual->num_rows();
      auto const expected =
        reference_partition(options.partitions, batches, order, partition, memory);
      if (expected->num_rows() > 0) {
        SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), actual->view()) << partition;
      } else {
        EXPECT_EQ(actual->num_rows(), 0U) << partition;
      }
    }
    shuffle.close();
    EXPECT_EQ(sum_over_ranks(comm, rows), 4U * 300U) << "rows lost or duplicated";
  });
}

}  // namespace
}  // namespace spillway
