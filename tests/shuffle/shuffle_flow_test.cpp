/**
 * @file shuffle_flow_test.cpp
 * @brief The shuffles' flow of shards on every rank group: backpressure with a tiny inbox,
 * read-ahead within its budget and asked again when a reply finds no room, a step out of memory
 * run again while spilling frees memory, and map tasks from several threads (in the order of
 * their reserved numbers). Suites are named
 * Concurrent* and run under ThreadSanitizer in CI.
 */
#include "shuffle/shuffle_harness.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/forwarding_resource.hpp"
#include "testing/rank_groups.hpp"

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/pull_shuffler.hpp>
#include <spillway/shuffle/push_shuffler.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using shuffle_testing::KEYS;
using shuffle_testing::make_batches;
using shuffle_testing::rank_environment;
using shuffle_testing::run_and_check;
using shuffle_testing::run_settings;
using shuffle_testing::shuffle_case;
using shuffle_testing::sum_over_ranks;

TEST(ConcurrentShuffleBackpressure, PushKeepsOneShardInFlightPerReceiverWithATinyInbox) {
  testing::for_each_rank_group([&](communicator& comm) {
    run_settings settings;
    settings.batches      = 4 * static_cast<std::size_t>(comm.size());
    settings.rows         = 1000;
    settings.inbox_budget = 1;  // every shard is over the limit: one in flight per receiver
    auto const result =
      run_and_check(comm, shuffle_case{shuffle_mode::PUSH, 3, partition_method::HASH}, settings);
    EXPECT_LE(result->statistics.peak_unacknowledged_bytes, result->largest_shard);
    if (comm.size() > 1 && comm.rank() + 1 < comm.size()) {  // a rank with input sends
      EXPECT_GT(result->statistics.peak_unacknowledged_bytes, 0U);
    }
  });
}

TEST(ConcurrentShuffleReadAhead, PullAsksForSeveralShardsAheadWithinTheReadAheadBudget) {
  testing::for_each_rank_group([&](communicator& comm) {
    for (std::size_t const budget : {std::size_t{0}, std::size_t{8_MiB}}) {
      run_settings settings;
      settings.batches           = 4 * static_cast<std::size_t>(comm.size());
      settings.rows              = 1000;
      settings.read_ahead_budget = budget;  // 0: only the next shard is ever asked for
      auto const result =
        run_and_check(comm, shuffle_case{shuffle_mode::PULL, 7, partition_method::HASH}, settings);
      std::size_t const peak = result->statistics.peak_fetches_ahead;
      EXPECT_LE(peak, budget == 0 ? 1U : 8U);
      // Ranks reading several remote shards of a partition: each owner of a partition, with
      // maps on at least one other rank (four each).
      std::size_t const ahead = sum_over_ranks(comm, peak > 1 ? 1U : 0U);
      std::size_t const asked = sum_over_ranks(comm, peak > 0 ? 1U : 0U);
      if (comm.size() == 1) {
        EXPECT_EQ(asked, 0U);
      } else {
        EXPECT_GT(asked, 0U);
        EXPECT_EQ(ahead, budget == 0 ? 0U : asked);
      }
    }
  });
}

/// Fails the allocations of at least `large` bytes numbered (from 1) `fail_at` to `fail_at +
/// count - 1`, as a full device would, calling `before_failing(number)` first.
class failing_resource final : public testing::forwarding_resource {
 public:
  failing_resource(resource_ref upstream,
                   std::size_t large,
                   std::size_t fail_at,
                   std::size_t count                               = 1,
                   std::function<void(std::size_t)> before_failing = {})
    : forwarding_resource(upstream),
      large_(large),
      fail_at_(fail_at),
      count_(count),
      before_failing_(std::move(before_failing)) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    if (bytes >= large_) {
      std::size_t const number = large_seen_.fetch_add(1) + 1;
      if (number >= fail_at_ && number < fail_at_ + count_) {
        if (before_failing_) {
          before_failing_(number);
        }
        throw out_of_memory("test: no room", bytes);
      }
    }
    return upstream().allocate(bytes, alignment, stream);
  }

  std::size_t large_;
  std::size_t fail_at_;
  std::size_t count_;
  std::function<void(std::size_t)> before_failing_;
  std::atomic<std::size_t> large_seen_{0};
};

TEST(ConcurrentShuffleReadAhead, AReplyAskedForAheadThatFindsNoRoomIsAskedForAgain) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    // Rank 0 reads every shard (one partition), all made by rank 1 (about 100 KB each; one rank
    // answers requests in order), and its device fails the third reply: one to a request sent
    // ahead, with three more asked for after it.
    failing_resource device(env.device(), 64_KiB, 3);
    auto const batches = make_batches(6, 3000, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 1;
    pull_shuffler shuffle(comm, env.store(), options, default_stream(), device);
    if (comm.rank() == 1) {
      for (auto const& batch : batches) {
        shuffle.add_map(batch->view());
      }
    }
    shuffle.finish_maps();
    // Shards come in map order, each a whole batch: a reply matched to another request would show
    // as the wrong batch.
    std::size_t read = 0;
    for (std::size_t const partition : shuffle.owned_partitions()) {
      shuffle.for_each_batch(partition, [&](table_view const& batch) {
        EXPECT_EQ(testing::describe_table_difference(batches[read]->view(), batch), "")
          << "shard " << read;
        ++read;
      });
    }
    auto const statistics = shuffle.statistics();
    shuffle.close();
    if (comm.rank() == 0) {
      std::size_t const shards = comm.size() > 1 ? 6 : 0;
      EXPECT_EQ(read, shards);
      EXPECT_EQ(statistics.shards_read, shards);
      EXPECT_EQ(statistics.peak_fetches_ahead, shards);
      EXPECT_EQ(statistics.lost_shards, shards > 0 ? 1U : 0U);
      EXPECT_EQ(statistics.fetch_retries, shards > 0 ? 1U : 0U);
      // The three replies after the third were received into the store (and spilled to make
      // room) before the third was asked for again.
      EXPECT_GE(env.store().statistics().between(spill_tier::DEVICE, spill_tier::HOST).count,
                shards > 0 ? 3U : 0U);
    }
  });
}

TEST(ConcurrentShuffleReadAhead, AProducerWithoutDeviceRoomToSendAShardIsAskedAgainLater) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 8_MiB, 64_MiB);
    auto const batches = make_batches(4, 3000, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 1;
    pull_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
    // Rank 1 makes every shard, spills them, then fills its device with memory its own work
    // holds (as its readers' pinned shards do) and lets go of it only a while later: rank 0's
    // requests meanwhile find no room to bring a shard back to send it.
    std::vector<buffer> filler;
    std::thread release_later;
    if (comm.rank() == 1) {
      for (auto const& batch : batches) {
        shuffle.add_map(batch->view());
      }
    }
    shuffle.finish_maps();
    if (comm.rank() == 1) {
      (void)env.store().spill(64_MiB, spill_tier::DEVICE);
      try {
        for (;;) {
          filler.emplace_back(64_KiB, default_stream(), env.device());
        }
      } catch (out_of_memory const&) {  // full
      }
      release_later = std::thread([&] {
        std::this_thread::sleep_for(std::chrono::milliseconds(300));
        filler.clear();
      });
    }
    comm.barrier();
    std::size_t read = 0;
    for (std::size_t const partition : shuffle.owned_partitions()) {
      shuffle.for_each_batch(partition, [&](table_view const& batch) {
        EXPECT_EQ(testing::describe_table_difference(batches[read]->view(), batch), "")
          << "shard " << read;
        ++read;
      });
    }
    EXPECT_EQ(read, comm.rank() == 0 && comm.size() > 1 ? 4U : 0U);
    if (release_later.joinable()) {
      release_later.join();
    }
    shuffle.close();
  });
}

TEST(ConcurrentShuffleRecovery, AStepOutOfMemoryAgainWhenAloneRunsAgainWhileSpillingFreesMemory) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    // The second map's copy of its input (the 2nd allocation of over 64 KiB: about 100 KB; its
    // shards are a third of that) fails beside other steps; run alone after a spill, it fails
    // again (3rd), while a buffer arrived in the store meanwhile, as a received shard does:
    // spilled in turn, the third run succeeds.
    std::vector<spillable_buffer> arrived;
    failing_resource device(env.device(), 64_KiB, 2, 2, [&](std::size_t number) {
      if (number == 3) {
        arrived.push_back(
          env.store().make_spillable(buffer{100_KiB, default_stream(), env.device()}, 0));
      }
    });
    auto const batches = make_batches(2, 3000, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 3;
    pull_shuffler shuffle(comm, env.store(), options, default_stream(), device);
    for (auto const& batch : batches) {
      shuffle.add_map(batch->view());
    }
    shuffle.finish_maps();
    std::size_t rows = 0;
    for (std::size_t const partition : shuffle.owned_partitions()) {
      shuffle.for_each_batch(partition, [&](table_view const& batch) { rows += batch.num_rows(); });
    }
    EXPECT_EQ(shuffle.statistics().oom_retries, 2U);  // two spills, each before a run alone
    shuffle.close();
    EXPECT_EQ(arrived.size(), 1U);
    EXPECT_EQ(sum_over_ranks(comm, rows), 2U * 3000U * static_cast<std::size_t>(comm.size()));
  });
}

TEST(ConcurrentShuffleRecovery, TasksOutOfMemoryAtTheDeviceGateNeverWaitForEachOther) {
  // Two tasks of one rank map on a device that something outside the store fills: the first
  // blocks in the OOM protocol inside its step; the second rolls back and waits at the gate for
  // the first to leave its step. Unless a task waiting at the gate counts as waiting, the protocol
  // sees it running and never wakes the first: both wait forever. Here both must end, out of
  // memory (nothing can spill to make room).
  testing::for_each_rank_group([&](communicator& comm) {
    if (comm.size() != 1) {
      return;  // one rank's tasks
    }
    device_environment_options env_options;
    env_options.device_memory = 1_MiB;
    env_options.host_memory   = 4_MiB;
    device_environment env(env_options);
    host_memory_resource memory;
    auto const batches = make_batches(1, 2000, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 3;
    pull_shuffler shuffle(comm, env.store(), options, env.stream(), env.device());
    buffer filler(1_MiB, env.stream(), env.device());  // held outside the store
    // Both tasks exist from the start (the first blocks while the second runs); each ends with
    // its thread, since a task that is done no longer counts as running.
    auto first     = std::make_unique<device_task>(env, task_id{1});
    auto second    = std::make_unique<device_task>(env, task_id{2});
    auto const map = [&](std::unique_ptr<device_task> task) {
      task_context::thread_binding const binding{task->context()};
      try {
        static_cast<void>(shuffle.add_map([&](stream_view stream, memory_resources mrs) {
          return copy(batches[0]->view(), stream, mrs.output());
        }));
        return std::string{"added"};
      } catch (out_of_memory const&) {
        return std::string{"out of memory"};
      }
    };
    auto one = std::async(std::launch::async, map, std::move(first));
    env.coordinator().testing_wait_for_state(task_id{1}, oom_state::BLOCKED);
    auto two         = std::async(std::launch::async, map, std::move(second));
    auto const limit = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    bool const ended = one.wait_until(limit) == std::future_status::ready &&
                       two.wait_until(limit) == std::future_status::ready;
    if (!ended) {
      filler = buffer{};  // a free wakes the blocked task, so that the test can end
    }
    EXPECT_TRUE(ended) << "the tasks waited for each other";
    EXPECT_EQ(one.get(), "out of memory");
    EXPECT_EQ(two.get(), ended ? "out of memory" : "added");
  });
}

TEST(ConcurrentShuffleThreads, MapTasksFromSeveralThreadsWhilePushing) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    auto const batches = make_batches(8, 500, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 6;
    options.inbox_budget              = 32_KiB;
    push_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
    std::vector<std::thread> threads;
    for (std::size_t worker = 0; worker < 4; ++worker) {
      threads.emplace_back([&, worker] {
        for (std::size_t index = worker; index < batches.size(); index += 4) {
          shuffle.add_map(batches[index]->view());
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    shuffle.finish_maps();
    // Every rank ran all 8 batches, in an order the threads decided: check multiset per partition.
    std::size_t rows = 0;
    for (std::size_t const partition : shuffle.owned_partitions()) {
      auto const actual = shuffle.read_partition(partition);
      rows += actual->num_rows();
      if (actual->num_rows() == 0) {
        continue;
      }
      auto const hashes = hash_rows(actual->view().select(KEYS), 0, default_stream(), memory);
      for (std::size_t row = 0; row < actual->num_rows(); ++row) {
        ASSERT_EQ(hashes->view().data<std::uint64_t>()[row] % 6, partition);
      }
    }
    shuffle.close();
    EXPECT_EQ(sum_over_ranks(comm, rows), 8U * 500U * static_cast<std::size_t>(comm.size()));
  });
}

TEST(ConcurrentShuffleThreads, ReservedMapNumbersKeepTheReadOrderWhateverThreadsRunTheMaps) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    auto const batches = make_batches(12, 300, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 5;
    // In read order on one thread: the reference.
    std::vector<std::unique_ptr<table>> expected;
    {
      pull_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
      for (auto const& batch : batches) {
        shuffle.add_map(batch->view());
      }
      shuffle.finish_maps();
      for (std::size_t const partition : shuffle.owned_partitions()) {
        expected.push_back(shuffle.read_partition(partition));
      }
      shuffle.close();
    }
    // Numbers reserved in read order, the maps run by four threads from the last batch down.
    push_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
    std::vector<std::size_t> numbers;
    for (std::size_t index = 0; index < batches.size(); ++index) {
      numbers.push_back(shuffle.reserve_map());
    }
    std::vector<std::thread> threads;
    for (std::size_t worker = 0; worker < 4; ++worker) {
      threads.emplace_back([&, worker] {
        for (std::size_t back = worker; back < batches.size(); back += 4) {
          std::size_t const index = batches.size() - 1 - back;
          auto const map          = shuffle.add_reserved_map(
            numbers[index], [&, index](stream_view stream, memory_resources mrs) {
              return copy(batches[index]->view(), stream, mrs.output());
            });
          EXPECT_EQ(map, numbers[index]);
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
    shuffle.finish_maps();
    auto const owned = shuffle.owned_partitions();
    ASSERT_EQ(owned.size(), expected.size());
    for (std::size_t at = 0; at < owned.size(); ++at) {
      auto const actual = shuffle.read_partition(owned[at]);
      SPILLWAY_EXPECT_TABLES_EQUAL(expected[at]->view(), actual->view())
        << "partition " << owned[at];
    }
    shuffle.close();
  });
}

TEST(ConcurrentShuffleThreads, AReservedNumberIsAddedOnceAndBeforeTheMapsFinish) {
  testing::for_each_rank_group([&](communicator& comm) {
    host_memory_resource memory;
    rank_environment env(comm.rank(), 64_MiB, 64_MiB);
    auto const batches = make_batches(1, 100, false, memory);
    shuffle_options options(env.host());
    options.partitions.key_columns    = KEYS;
    options.partitions.num_partitions = 3;
    pull_shuffler shuffle(comm, env.store(), options, default_stream(), env.device());
    auto const input = [&](stream_view stream, memory_resources mrs) {
      return copy(batches[0]->view(), stream, mrs.output());
    };
    EXPECT_THROW(shuffle.add_reserved_map(0, input), logic_error) << "nothing reserved yet";
    auto const first  = shuffle.reserve_map();
    auto const second = shuffle.reserve_map();
    EXPECT_EQ(second, first + 1);
    EXPECT_EQ(shuffle.add_reserved_map(second, input), second);
    EXPECT_THROW(shuffle.add_reserved_map(second, input), logic_error) << "added twice";
    // The first is still reserved: the maps cannot finish (on every rank alike, before any
    // message).
    EXPECT_THROW(shuffle.finish_maps(), logic_error);
  });
}

}  // namespace
}  // namespace spillway
