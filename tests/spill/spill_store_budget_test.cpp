/**
 * @file spill_store_budget_test.cpp
 * @brief The host budget is strict: the peak bytes outstanding on the store's host resource never
 * exceed it (spills past it, reads back, buffers larger than it, many threads); and every tier
 * move and failure is recorded as an event.
 */
#include "spill/fault_injection_file_system.hpp"
#include "spill/spill_test_fixture.hpp"

#include <spillway/core/events.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/spill/host_budget_resource.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/pack.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <ostream>
#include <testing/expect_tables_equal.hpp>
#include <thread>
#include <vector>

namespace spillway::testing {
namespace {

class SpillStoreBudgetTest : public spill_fixture {
 protected:
  /** @return options whose host allocations are counted by `host_stats_` */
  spill_store_options counted_options(std::size_t host_budget) {
    auto result = options(host_budget);
    result.host = host_stats_;
    return result;
  }
  std::size_t host_peak() const { return host_stats_.statistics().peak_bytes; }

  /** @return a device buffer of `bytes` whose contents depend on `seed`, and its host copy */
  std::pair<buffer, std::vector<std::uint8_t>> make_bytes(std::size_t bytes, std::uint64_t seed) {
    std::vector<std::uint8_t> values(bytes);
    std::uint64_t state = seed * 0x9E3779B97F4A7C15ULL + 1;
    for (std::size_t index = 0; index < bytes; ++index) {
      state ^= state << 13;
      state ^= state >> 7;
      state ^= state << 17;
      // Half compressible, half noise.
      values[index] = index % 64 < 32 ? static_cast<std::uint8_t>(index / 64) : state & 0xff;
    }
    return {buffer(values.data(), memory_kind::HOST, bytes, default_stream(), device_), values};
  }

  statistics_resource_adaptor host_stats_{host_};
};

struct budget_codecs {
  codec host;
  codec disk;
};

/// Prints e.g. "host lz4, disk zstd" (the case in test listings and failures).
void PrintTo(budget_codecs const& codecs, std::ostream* os) {
  *os << "host " << to_string(codecs.host) << ", disk " << to_string(codecs.disk);
}

class SpillStoreBudgetCodecTest : public SpillStoreBudgetTest,
                                  public ::testing::WithParamInterface<budget_codecs> {};

TEST_P(SpillStoreBudgetCodecTest, ManyDeviceSpillsPastTheHostBudgetThenReadsBack) {
  constexpr std::size_t budget = 256_KiB;
  auto store_options           = counted_options(budget);
  store_options.host_codec     = GetParam().host;
  store_options.disk_codec     = GetParam().disk;
  spill_store store(store_options);
  std::vector<spillable_table> handles;
  std::vector<std::unique_ptr<table>> expected;
  for (std::uint64_t index = 0; index < 24; ++index) {  // ~24 x 40 KiB: several budgets
    auto [device_table, copy] = make_table(600, 100 + index);
    handles.push_back(store.make_spillable(std::move(device_table), 0));
    expected.push_back(std::move(copy));
    EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  }
  store.wait_for_io();
  auto const stats = store.statistics();
  EXPECT_GT(stats.between(spill_tier::DEVICE, spill_tier::DISK).count +
              stats.between(spill_tier::HOST, spill_tier::DISK).count,
            0U);
  EXPECT_LE(host_peak(), budget);
  // Back in reverse order (the oldest are on disk), with prefetches in between.
  for (std::size_t index = handles.size(); index-- > 0;) {
    if (index > 0) {
      store.prefetch(handles[index - 1]);
    }
    {
      auto const pinned = handles[index].acquire();
      SPILLWAY_EXPECT_TABLES_EQUAL(expected[index]->view(), pinned.view());
    }
    EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  }
  store.wait_for_io();
  EXPECT_LE(host_peak(), budget);
  EXPECT_EQ(store.statistics().write_errors + store.statistics().read_errors, 0U);
  handles.clear();
  EXPECT_EQ(host_stats_.statistics().current_bytes, 0U);
}

INSTANTIATE_TEST_SUITE_P(Codecs,
                         SpillStoreBudgetCodecTest,
                         ::testing::Values(budget_codecs{codec::NONE, codec::NONE},
                                           budget_codecs{codec::NONE, codec::LZ4},
                                           budget_codecs{codec::LZ4, codec::LZ4},
                                           budget_codecs{codec::ZSTD, codec::LZ4},
                                           budget_codecs{codec::LZ4, codec::NONE}),
                         [](auto const& param_info) {
                           return std::string(to_string(param_info.param.host)) + "_" +
                                  std::string(to_string(param_info.param.disk));
                         });

TEST_F(SpillStoreBudgetTest, TheCatalogsBookkeepingCountsInTheBudgetAndIsReportedByTheMiB) {
  // 3000 tables of a few rows: their bookkeeping (each entry, its pack metadata) is several times
  // a 256 KiB budget. It is counted, past the budget where it must be, while the tables still
  // spill and read back; the callback hears of it a MiB at a time, and of its going.
  constexpr std::size_t budget = 256_KiB;
  constexpr std::size_t tables = 3000;
  std::vector<std::size_t> reported;
  auto store_options                = counted_options(budget);
  store_options.bookkeeping_changed = [&reported](std::size_t bytes) { reported.push_back(bytes); };
  spill_store store(store_options);
  std::vector<spillable_table> handles;
  std::vector<std::unique_ptr<table>> expected;
  for (std::uint64_t index = 0; index < tables; ++index) {
    auto [device_table, copy] = make_table(4, 500 + index);
    handles.push_back(store.make_spillable(std::move(device_table), 0));
    expected.push_back(std::move(copy));
  }
  std::size_t const columns = expected.front()->num_columns();
  auto statistics           = store.statistics();
  EXPECT_GE(statistics.bookkeeping_bytes, tables * packed_metadata_size(columns));
  EXPECT_LE(statistics.bookkeeping_bytes, tables * (packed_metadata_size(columns) + 1024));
  EXPECT_EQ(statistics.bookkeeping_peak, statistics.bookkeeping_bytes);
  EXPECT_GE(statistics.host_over_budget_peak, statistics.bookkeeping_bytes - budget);
  ASSERT_GE(reported.size(), 2U);
  for (std::size_t index = 1; index < reported.size(); ++index) {
    EXPECT_GE(reported[index], reported[index - 1] + 1_MiB);
  }
  EXPECT_LE(reported.back(), statistics.bookkeeping_bytes);
  EXPECT_GT(store.spill(1_GiB, spill_tier::DEVICE), 0U);
  store.wait_for_io();
  // Packed as they spilled, the tables' metadata is kept compact: each entry's share shrinks from
  // the estimate (the metadata as made) by more than half the metadata's size.
  EXPECT_LE(store.statistics().bookkeeping_bytes,
            statistics.bookkeeping_bytes - tables * packed_metadata_size(columns) / 2);
  for (std::size_t index = 0; index < tables; index += 97) {
    SPILLWAY_EXPECT_TABLES_EQUAL(expected[index]->view(), handles[index].acquire().view());
  }
  EXPECT_EQ(store.statistics().write_errors + store.statistics().read_errors, 0U)
    << store.statistics().last_error;
  EXPECT_LE(host_peak(), budget);  // the data itself stayed within it
  handles.clear();
  statistics = store.statistics();
  EXPECT_EQ(statistics.bookkeeping_bytes, 0U);
  EXPECT_LT(reported.back(), 1_MiB);
}

TEST_F(SpillStoreBudgetTest, BufferLargerThanTheHostBudgetStreamsThroughStaging) {
  constexpr std::size_t budget = 128_KiB;
  for (auto disk_codec : {codec::NONE, codec::LZ4}) {
    auto store_options       = counted_options(budget);
    store_options.disk_codec = disk_codec;
    store_options.host_codec = codec::ZSTD;
    spill_store store(store_options);
    auto [data, expected] = make_bytes(3_MiB, 7);  // 24 times the budget
    auto handle           = store.make_spillable(std::move(data), 0);
    EXPECT_EQ(store.spill(1, spill_tier::DEVICE), 3_MiB);
    EXPECT_EQ(handle.tier(), spill_tier::DISK);
    store.prefetch(handle);  // no room for 3 MiB on the host: does nothing
    store.wait_for_io();
    EXPECT_EQ(handle.tier(), spill_tier::DISK);
    {
      auto const pinned = handle.acquire();  // streamed block by block to the device
      ASSERT_EQ(pinned.size(), expected.size());
      EXPECT_EQ(std::memcmp(pinned.data(), expected.data(), expected.size()), 0);
    }
    // A table larger than the budget too.
    auto [device_table, table_copy] = make_table(20000, 8);
    auto table_handle               = store.make_spillable(std::move(device_table), 0);
    EXPECT_GT(store.spill(1_GiB, spill_tier::DEVICE), 0U);
    EXPECT_EQ(table_handle.tier(), spill_tier::DISK);
    SPILLWAY_EXPECT_TABLES_EQUAL(table_copy->view(), table_handle.acquire().view());
    EXPECT_EQ(store.statistics().write_errors + store.statistics().read_errors, 0U);
    EXPECT_LE(host_peak(), budget) << to_string(disk_codec);
  }
}

TEST_F(SpillStoreBudgetTest, CallersHostBytesShareTheBudgetHostEntriesMoveToDiskForThem) {
  // Of 16 MiB, the two I/O threads' scratch areas take about 5.3 MiB, and callers leave another
  // 5.3 MiB of the rest for the store's own staging: they may hold about 5.3 MiB.
  constexpr std::size_t budget = 16_MiB;
  spill_store store(counted_options(budget));
  std::vector<spillable_table> handles;
  std::vector<std::unique_ptr<table>> expected;
  for (std::uint64_t index = 0; index < 40; ++index) {  // ~40 KiB each, to the host
    auto [device_table, copy] = make_table(600, 300 + index);
    handles.push_back(store.make_spillable(std::move(device_table), 0));
    expected.push_back(std::move(copy));
    EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  }
  store.wait_for_io();
  std::size_t const on_host = store.bytes_on(spill_tier::HOST);
  ASSERT_GT(on_host, 1_MiB);
  // A caller's scratch that fits the general part only without most host entries: they go to
  // disk to make room, before the allocation returns.
  host_budget_resource scratch{store, host_};
  std::size_t const wanted = 4608_KiB;
  void* bytes              = scratch.allocate(wanted);
  std::memset(bytes, 7, wanted);
  EXPECT_LT(store.bytes_on(spill_tier::HOST), on_host);
  EXPECT_GT(store.bytes_on(spill_tier::DISK), 0U);
  EXPECT_LE(store.bytes_on(spill_tier::HOST) + wanted, budget);
  auto const statistics = store.statistics();
  EXPECT_EQ(statistics.caller_host_peak, wanted);
  EXPECT_EQ(statistics.host_over_budget_peak, 0U);
  // While the caller holds it, a spill too large for what is left goes past the host.
  auto [device_table, copy] = make_table(40000, 400);
  handles.push_back(store.make_spillable(std::move(device_table), 0));
  expected.push_back(std::move(copy));
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(handles.back().tier(), spill_tier::DISK);
  scratch.deallocate(bytes, wanted);
  for (std::size_t index = 0; index < handles.size(); ++index) {
    SPILLWAY_EXPECT_TABLES_EQUAL(expected[index]->view(), handles[index].acquire().view());
  }
  EXPECT_EQ(store.statistics().write_errors + store.statistics().read_errors, 0U)
    << store.statistics().last_error;
}

TEST_F(SpillStoreBudgetTest,
       ACallerAllocationNothingCanMakeRoomForIsServedAndCountedPastTheBudget) {
  constexpr std::size_t budget = 16_MiB;  // callers may hold about 5.3 MiB (see above)
  spill_store store(counted_options(budget));
  host_budget_resource scratch{store, host_};
  // Two callers of 3 MiB each: the second passes what callers may hold (the store holds nothing
  // to move), so it is served at once instead of waiting for room that cannot come; the two are
  // still within the budget, which the staging room callers leave is part of.
  void* first  = scratch.allocate(3_MiB);
  void* second = scratch.allocate(3_MiB);
  std::memset(second, 2, 3_MiB);
  EXPECT_EQ(store.statistics().caller_host_peak, 6_MiB);
  EXPECT_EQ(store.statistics().host_over_budget_peak, 0U);
  // A third of 6 MiB goes past the budget itself: served, and counted.
  void* third = scratch.allocate(6_MiB);
  std::memset(third, 3, 6_MiB);
  auto const statistics = store.statistics();
  EXPECT_EQ(statistics.caller_host_peak, 12_MiB);
  EXPECT_GT(statistics.host_over_budget_peak, 0U);
  EXPECT_LT(statistics.host_over_budget_peak, 6_MiB);
  // Meanwhile the store still spills device buffers: callers never take the room of one
  // spill's staging.
  auto [device_table, expected] = make_table(600, 11);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_NE(handle.tier(), spill_tier::DEVICE);
  auto [larger_table, larger_expected] = make_table(40000, 12);  // past the room left
  auto larger                          = store.make_spillable(std::move(larger_table), 0);
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(larger.tier(), spill_tier::DISK);
  scratch.deallocate(third, 6_MiB);
  scratch.deallocate(second, 3_MiB);
  scratch.deallocate(first, 3_MiB);
  // More than the whole budget: served, never waited for.
  void* large = scratch.allocate(2 * budget);
  std::memset(large, 1, 2 * budget);
  scratch.deallocate(large, 2 * budget);
  EXPECT_GT(store.statistics().host_over_budget_peak, budget);
  // All given back: a small reservation fits again.
  EXPECT_TRUE(store.reserve_caller_host(64_KiB));
  store.release_caller_host(64_KiB);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), handle.acquire().view());
  SPILLWAY_EXPECT_TABLES_EQUAL(larger_expected->view(), larger.acquire().view());
  EXPECT_EQ(store.statistics().write_errors, 0U);
}

TEST_F(SpillStoreBudgetTest, ATableTheHostCannotHoldAndTheFullDeviceCannotPackGoesPastTheBudget) {
  // A table larger than the host budget is packed on the device before it streams to disk;
  // with the device too full for that copy, it is packed on the host past the budget (counted)
  // instead of failing the spill and leaving the device full.
  constexpr std::size_t budget = 1_MiB;
  spill_store store(counted_options(budget));
  auto [device_table, expected] = make_table(40000, 21);  // several MiB packed
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  std::size_t const free_bytes  = device_.available_bytes();
  buffer filler{free_bytes - 64_KiB, default_stream(), device_};  // no room for a packed copy
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  auto const statistics = store.statistics();
  EXPECT_EQ(statistics.write_errors, 0U) << statistics.last_error;
  EXPECT_GT(statistics.host_over_budget_peak, 0U);
  filler = buffer{};
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), handle.acquire().view());
}

TEST_F(SpillStoreBudgetTest, SplitHalvesStayWithinTheBudget) {
  constexpr std::size_t budget = 64_KiB;
  spill_store store(counted_options(budget));
  auto [device_table, expected] = make_table(4000, 9);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  auto halves                   = handle.split_at(1000);
  EXPECT_LE(host_peak(), budget);
  auto const first  = halves.first.acquire();
  auto const second = halves.second.acquire();
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 0, 1000), first.view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 1000, 4000), second.view());
}

TEST_F(SpillStoreBudgetTest, ConcurrentAcquireReleaseWhileSpillingStaysWithinTheBudget) {
  constexpr std::size_t budget = 192_KiB;
  auto store_options           = counted_options(budget);
  store_options.host_codec     = codec::LZ4;
  spill_store store(store_options);
  constexpr int THREADS    = 8;
  constexpr int ITERATIONS = 30;
  std::atomic<bool> stop{false};
  std::atomic<int> failures{0};
  std::thread spiller([&] {
    while (!stop.load()) {
      (void)store.spill(1_GiB, spill_tier::DEVICE);
      (void)store.spill(64_KiB, spill_tier::HOST);
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int thread = 0; thread < THREADS; ++thread) {
    workers.emplace_back([&, thread] {
      std::vector<std::pair<spillable_buffer, std::vector<std::uint8_t>>> kept;
      for (int iteration = 0; iteration < ITERATIONS; ++iteration) {
        // Some buffers larger than the whole budget.
        std::size_t const bytes = iteration % 10 == 9 ? 256_KiB : 24_KiB;
        auto [data, values] =
          make_bytes(bytes, static_cast<std::uint64_t>(thread * 1000 + iteration));
        auto handle = store.make_spillable(std::move(data), iteration % 3);
        for (int round = 0; round < 2; ++round) {
          auto const pinned = handle.acquire();
          if (handle.tier() != spill_tier::DEVICE ||
              std::memcmp(pinned.data(), values.data(), bytes) != 0) {
            ++failures;
          }
          std::this_thread::yield();
        }
        if (iteration % 2 == 0) {
          kept.emplace_back(std::move(handle), std::move(values));
        }
      }
      for (auto& [handle, values] : kept) {  // back from wherever they went
        auto const pinned = handle.acquire();
        if (std::memcmp(pinned.data(), values.data(), values.size()) != 0) {
          ++failures;
        }
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
  stop = true;
  spiller.join();
  store.wait_for_io();
  EXPECT_EQ(failures.load(), 0);
  auto const stats = store.statistics();
  EXPECT_EQ(stats.write_errors + stats.read_errors, 0U) << stats.last_error;
  EXPECT_GT(stats.between(spill_tier::DEVICE, spill_tier::DISK).count +
              stats.between(spill_tier::HOST, spill_tier::DISK).count,
            0U);
  EXPECT_LE(host_peak(), budget);
}

TEST_F(SpillStoreBudgetTest, ABufferMovedBackToTheDeviceCanStillSpillAnotherThroughLessStaging) {
  // "first" takes most of the host tier's general part (about 700 KiB of a 1 MiB budget with two
  // I/O threads) and is moved back to a full device: the allocation spills "second", which goes
  // to disk through host staging while "first" still holds its host bytes and nothing is being
  // written. Two windows of a full piece do not fit in what is left; one smaller one does.
  constexpr std::size_t budget = 1_MiB;
  emulated_device_memory_resource small_device{1_MiB};
  spill_store* store_pointer = nullptr;
  failure_callback_resource_adaptor device_with_spill(small_device, [&](std::size_t bytes, auto) {
    return store_pointer->spill(bytes, spill_tier::DEVICE) > 0;
  });
  // Compressed disk blocks: the staging then holds the compression scratch too.
  for (auto disk_codec : {codec::LZ4, codec::ZSTD}) {
    SCOPED_TRACE(to_string(disk_codec));
    auto store_options       = counted_options(budget);
    store_options.device     = device_with_spill;
    store_options.disk_codec = disk_codec;
    spill_store store(store_options);
    store_pointer           = &store;
    auto const first_values = make_bytes(500_KiB, 11).second;
    auto first              = store.make_spillable(buffer(first_values.data(),
                                             memory_kind::HOST,
                                             first_values.size(),
                                             default_stream(),
                                             small_device),
                                      0);
    ASSERT_EQ(store.spill(1, spill_tier::DEVICE), 500_KiB);
    ASSERT_EQ(first.tier(), spill_tier::HOST);
    auto const second_values = make_bytes(600_KiB, 12).second;
    auto second              = store.make_spillable(buffer(second_values.data(),
                                              memory_kind::HOST,
                                              second_values.size(),
                                              default_stream(),
                                              small_device),
                                       0);
    {
      auto const pinned = first.acquire();
      ASSERT_EQ(pinned.size(), first_values.size());
      EXPECT_EQ(std::memcmp(pinned.data(), first_values.data(), first_values.size()), 0);
      EXPECT_EQ(second.tier(), spill_tier::DISK);
    }
    auto const statistics = store.statistics();
    EXPECT_EQ(statistics.write_errors, 0U) << statistics.last_error;
    EXPECT_EQ(statistics.small_staging_spills, 1U);
    {
      auto const pinned = second.acquire();
      ASSERT_EQ(pinned.size(), second_values.size());
      EXPECT_EQ(std::memcmp(pinned.data(), second_values.data(), second_values.size()), 0);
    }
    EXPECT_LE(host_peak(), budget);
  }
}

TEST_F(SpillStoreBudgetTest, TinyBudgetIsRejected) {
  EXPECT_THROW(spill_store{options(1_KiB)}, invalid_argument);
}

/** @return the value an event carries for a move from `from` to `to` */
std::int64_t tiers(spill_tier from, spill_tier to) {
  return static_cast<std::int64_t>(index_of(from) * 4 + index_of(to));
}

TEST_F(SpillStoreBudgetTest, EveryTierMoveAndFailureIsAnEvent) {
  event_log events;
  fault_injection_file_system files;
  auto store_options   = options(64_MiB);
  store_options.events = &events;
  store_options.files  = &files;
  spill_store store(store_options);
  auto [first_data, first_values] = make_bytes(10000, 1);
  auto first                      = store.make_spillable(std::move(first_data), 0, task_id{7});
  EXPECT_EQ(store.spill(1, spill_tier::DEVICE), 10000U);  // device -> host
  EXPECT_EQ(store.spill(1, spill_tier::HOST), 10000U);    // host -> disk
  store.wait_for_io();
  ASSERT_EQ(first.tier(), spill_tier::DISK);
  store.prefetch(first);  // disk -> host
  store.wait_for_io();
  { auto const pinned = first.acquire(); }  // host -> device

  auto const moves = events.events();
  ASSERT_EQ(moves.size(), 4U);
  event_kind const kinds[] = {
    event_kind::SPILLED, event_kind::SPILLED, event_kind::UNSPILLED, event_kind::UNSPILLED};
  std::int64_t const values[] = {tiers(spill_tier::DEVICE, spill_tier::HOST),
                                 tiers(spill_tier::HOST, spill_tier::DISK),
                                 tiers(spill_tier::DISK, spill_tier::HOST),
                                 tiers(spill_tier::HOST, spill_tier::DEVICE)};
  for (std::size_t index = 0; index < moves.size(); ++index) {
    EXPECT_EQ(moves[index].kind, kinds[index]) << index;
    EXPECT_EQ(moves[index].value, values[index]) << index;
    EXPECT_EQ(moves[index].bytes, 10000U) << index;
    EXPECT_EQ(moves[index].task, task_id{7}) << index;
    EXPECT_GT(moves[index].duration.count(), 0) << index;
  }

  // Straight to disk and back to the device: a 128 KiB budget cannot hold 1 MiB.
  events.clear();
  {
    auto small_budget   = options(128_KiB);
    small_budget.events = &events;
    spill_store small(small_budget);
    auto [big_data, big_values] = make_bytes(1_MiB, 2);
    auto big                    = small.make_spillable(std::move(big_data), 0);
    EXPECT_EQ(small.spill(1, spill_tier::DEVICE), 1_MiB);
    { auto const pinned = big.acquire(); }
  }
  ASSERT_EQ(events.count(event_kind::SPILLED), 1U);
  ASSERT_EQ(events.count(event_kind::UNSPILLED), 1U);
  EXPECT_EQ(events.events()[0].value, tiers(spill_tier::DEVICE, spill_tier::DISK));
  EXPECT_EQ(events.events()[1].value, tiers(spill_tier::DISK, spill_tier::DEVICE));
  EXPECT_EQ(events.total_bytes(event_kind::SPILLED), 1_MiB);

  // A failed write and a failed read.
  events.clear();
  files.fail_writes_after(100);
  EXPECT_EQ(store.spill(1, spill_tier::DEVICE), 10000U);
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(first.tier(), spill_tier::HOST);
  EXPECT_EQ(events.count(event_kind::SPILL_WRITE_FAILED), 1U);
  EXPECT_EQ(events.total_bytes(event_kind::SPILL_WRITE_FAILED), 10000U);
  files.heal();
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  ASSERT_EQ(first.tier(), spill_tier::DISK);
  for (auto const& path : spill_files(store)) {
    std::filesystem::remove(path);
  }
  EXPECT_ANY_THROW((void)first.acquire());
  EXPECT_EQ(events.count(event_kind::SPILL_READ_FAILED), 1U);
  EXPECT_EQ(events.total_bytes(event_kind::SPILL_READ_FAILED), 10000U);
}

}  // namespace
}  // namespace spillway::testing
