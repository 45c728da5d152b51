#include "lease/watchdog.hpp"
#include "spill/fault_injection_file_system.hpp"
#include "spill/spill_test_fixture.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/spill/spill_file.hpp>
#include <spillway/spill/spill_store.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <fstream>
#include <ostream>
#include <testing/expect_tables_equal.hpp>
#include <thread>

namespace spillway::testing {
namespace {

class SpillStoreTest : public spill_fixture {};

struct codec_pair {
  codec host;
  codec disk;
};

/// Prints e.g. "host lz4, disk zstd" (the case in test listings and failures).
void PrintTo(codec_pair const& codecs, std::ostream* os) {
  *os << "host " << to_string(codecs.host) << ", disk " << to_string(codecs.disk);
}

class SpillStoreCodecTest : public spill_fixture,
                            public ::testing::WithParamInterface<codec_pair> {};

TEST_P(SpillStoreCodecTest, EveryTypeIsBitExactAfterDeviceHostDiskDevice) {
  auto store_options       = options();
  store_options.host_codec = GetParam().host;
  store_options.disk_codec = GetParam().disk;
  spill_store store(store_options);
  auto [device_table, expected]   = make_table(300, 11);
  std::size_t const device_before = device_.used_bytes();
  auto handle                     = store.make_spillable(std::move(device_table), 0);

  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(handle.tier(), spill_tier::HOST);
  EXPECT_LT(device_.used_bytes(), device_before);
  EXPECT_EQ(device_.used_bytes(), 0U);

  EXPECT_GT(store.spill(1, spill_tier::HOST), 0U);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  EXPECT_EQ(store.bytes_on(spill_tier::HOST), 0U);
  EXPECT_EQ(spill_files(store).size(), 1U);

  {
    auto const pinned = handle.acquire();
    EXPECT_EQ(handle.tier(), spill_tier::DEVICE);
    EXPECT_GT(device_.used_bytes(), 0U);
    for (auto const& column : pinned.view()) {
      EXPECT_EQ(column.kind(), memory_kind::DEVICE);
    }
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  }
  auto const stats = store.statistics();
  EXPECT_EQ(stats.between(spill_tier::DEVICE, spill_tier::HOST).count, 1U);
  EXPECT_EQ(stats.between(spill_tier::HOST, spill_tier::DISK).count, 1U);
  EXPECT_EQ(stats.between(spill_tier::DISK, spill_tier::HOST).count, 1U);
  EXPECT_EQ(stats.between(spill_tier::HOST, spill_tier::DEVICE).count, 1U);
  EXPECT_EQ(stats.write_errors + stats.read_errors, 0U);
  // The disk file went with its only block.
  EXPECT_TRUE(spill_files(store).empty());
}

TEST_P(SpillStoreCodecTest, DeviceStraightToDiskPastTheHostBudget) {
  // The smallest budget; the table is larger than the host may hold, so it streams to disk.
  auto store_options       = options(64_KiB);
  store_options.host_codec = GetParam().host;
  store_options.disk_codec = GetParam().disk;
  spill_store store(store_options);
  auto [device_table, expected] = make_table(3000, 12);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(device_.used_bytes(), 0U);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  EXPECT_EQ(store.statistics().between(spill_tier::DEVICE, spill_tier::DISK).count, 1U);
  auto const pinned = handle.acquire();
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
}

INSTANTIATE_TEST_SUITE_P(Codecs,
                         SpillStoreCodecTest,
                         ::testing::Values(codec_pair{codec::NONE, codec::NONE},
                                           codec_pair{codec::NONE, codec::LZ4},
                                           codec_pair{codec::LZ4, codec::LZ4},
                                           codec_pair{codec::ZSTD, codec::LZ4},
                                           codec_pair{codec::LZ4, codec::ZSTD},
                                           codec_pair{codec::ZSTD, codec::ZSTD}),
                         [](auto const& param_info) {
                           return std::string(to_string(param_info.param.host)) + "_" +
                                  std::string(to_string(param_info.param.disk));
                         });

TEST_F(SpillStoreTest, BuffersRoundTripThroughEveryTier) {
  spill_store store(options());
  std::vector<std::uint8_t> bytes(100000);
  for (std::size_t index = 0; index < bytes.size(); ++index) {
    bytes[index] = static_cast<std::uint8_t>(index % 251);
  }
  auto handle = store.make_spillable(
    buffer(bytes.data(), memory_kind::HOST, bytes.size(), default_stream(), device_), 0);
  EXPECT_EQ(store.spill(bytes.size(), spill_tier::DEVICE), bytes.size());
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  auto const pinned = handle.acquire();
  ASSERT_EQ(pinned.size(), bytes.size());
  EXPECT_EQ(std::memcmp(pinned.data(), bytes.data(), bytes.size()), 0);
}

TEST_F(SpillStoreTest, BuffersOfManyPiecesRoundTripThroughTheStagingWindows) {
  // Ten pieces of 4 KiB, the last one short: each move copies a piece while the one before it is
  // compressed, written, read or decoded, through two staging windows.
  std::vector<std::uint8_t> bytes(37_KiB + 5);
  std::uint64_t state = 11;
  for (std::size_t index = 0; index < bytes.size(); ++index) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    bytes[index] = (index / 4_KiB) % 2 == 0 ? static_cast<std::uint8_t>(index / 512)
                                            : static_cast<std::uint8_t>(state);
  }
  for (codec const host_codec : {codec::NONE, codec::LZ4, codec::ZSTD}) {
    SCOPED_TRACE(to_string(host_codec));
    auto store_options         = options();
    store_options.staging_size = 4_KiB;
    store_options.host_codec   = host_codec;
    spill_store store(store_options);
    auto handle = store.make_spillable(
      buffer(bytes.data(), memory_kind::HOST, bytes.size(), default_stream(), device_), 0);
    auto const expect_back = [&](spill_tier from) {
      EXPECT_EQ(handle.tier(), from);
      auto const pinned = handle.acquire();
      ASSERT_EQ(pinned.size(), bytes.size());
      EXPECT_EQ(std::memcmp(pinned.data(), bytes.data(), bytes.size()), 0);
    };
    EXPECT_EQ(store.spill(bytes.size(), spill_tier::DEVICE), bytes.size());
    expect_back(spill_tier::HOST);
    EXPECT_EQ(store.spill(bytes.size(), spill_tier::DEVICE), bytes.size());
    (void)store.spill(1, spill_tier::HOST);
    store.wait_for_io();
    expect_back(spill_tier::DISK);
    EXPECT_EQ(store.statistics().write_errors + store.statistics().read_errors, 0U);
  }
}

TEST_F(SpillStoreTest, VictimsByPriorityThenLeastRecentlyUsed) {
  spill_store store(options());
  auto high   = store.make_spillable(make_table(50, 1).first, 5);
  auto low_a  = store.make_spillable(make_table(50, 2).first, 1);
  auto low_b  = store.make_spillable(make_table(50, 3).first, 1);
  auto middle = store.make_spillable(make_table(50, 4).first, 3);
  // low_a is used after low_b, so low_b is the least recently used of the lowest priority.
  { auto const pinned = low_a.acquire(); }
  std::vector<spillable_table*> const expected_order{&low_b, &low_a, &middle, &high};
  for (std::size_t step = 0; step < expected_order.size(); ++step) {
    EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
    for (std::size_t index = 0; index < expected_order.size(); ++index) {
      EXPECT_EQ(expected_order[index]->tier(),
                index <= step ? spill_tier::HOST : spill_tier::DEVICE)
        << "step " << step << " handle " << index;
    }
  }
  EXPECT_EQ(store.spill(1, spill_tier::DEVICE), 0U);  // nothing left
}

TEST_F(SpillStoreTest, PinnedDataIsNeverSpilled) {
  spill_store store(options());
  auto [device_table, expected] = make_table(100, 5);
  auto pinned_handle            = store.make_spillable(std::move(device_table), 0);
  auto other                    = store.make_spillable(make_table(100, 6).first, 9);
  auto const pinned             = pinned_handle.acquire();
  std::size_t const freed       = store.spill(1_GiB, spill_tier::DEVICE);
  EXPECT_GT(freed, 0U);
  EXPECT_EQ(pinned_handle.tier(), spill_tier::DEVICE);
  EXPECT_EQ(other.tier(), spill_tier::HOST);
  EXPECT_EQ(store.spill(1_GiB, spill_tier::DEVICE), 0U);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
}

TEST_F(SpillStoreTest, SpillTaskTouchesOnlyThatTasksBuffers) {
  spill_store store(options());
  auto mine   = store.make_spillable(make_table(50, 1).first, 9, task_id{1});
  auto theirs = store.make_spillable(make_table(50, 2).first, 0, task_id{2});
  auto hook   = store.make_spill_hook(task_id{1});
  EXPECT_GT(hook(1_GiB), 0U);
  EXPECT_EQ(mine.tier(), spill_tier::HOST);
  EXPECT_EQ(theirs.tier(), spill_tier::DEVICE);
  EXPECT_EQ(store.spill_task(task_id{1}, 1_GiB), 0U);
  EXPECT_EQ(store.spill_task(task_id{3}, 1_GiB), 0U);
  EXPECT_EQ(theirs.tier(), spill_tier::DEVICE);
}

TEST_F(SpillStoreTest, ConcurrentArbiterLendsAWaitingTasksBytesAfterItsBuffersSpill) {
  // Wired as in a job: the arbiter's spill hook of task 2 is the store's; while task 2 waits
  // (inside a blocking scope), task 1's request that does not fit borrows task 2's lease, and
  // the bytes are real: task 2's table has left the device.
  spillway::test::run_with_watchdog([&] {
    spill_store store(options());
    lease_arbiter arbiter{1_MiB};
    task_context borrower{arbiter, task_id{1}};
    task_context lender{arbiter, task_id{2}};
    lender.set_spill_hook(store.make_spill_hook(lender.id()));
    auto [device_table, expected]         = make_table(10000, 3);
    std::size_t const device_bytes_before = device_.used_bytes();
    auto handle               = store.make_spillable(std::move(device_table), 0, lender.id());
    memory_lease lender_lease = lender.request_lease(768_KiB);

    std::atomic<bool> waiting{false};
    std::atomic<bool> done{false};
    std::thread waiter([&] {
      task_context::blocking_scope const scope{lender};
      waiting = true;
      while (!done.load()) {
        std::this_thread::yield();
      }
    });
    while (!waiting.load()) {
      std::this_thread::yield();
    }
    {
      memory_lease const lease = borrower.request_lease(512_KiB);
      EXPECT_EQ(lease.bytes(), 512_KiB);
      EXPECT_GE(arbiter.lent_bytes(lender.id()), 256_KiB);
      EXPECT_EQ(handle.tier(), spill_tier::HOST);
      EXPECT_LT(device_.used_bytes(), device_bytes_before);
      EXPECT_LE(arbiter.used_bytes(), arbiter.capacity());
    }
    done = true;
    waiter.join();
    // Leaving the scope took the lent bytes back.
    EXPECT_EQ(arbiter.lent_bytes(lender.id()), 0U);
    EXPECT_EQ(arbiter.used_bytes(), 768_KiB);
    auto const pinned = handle.acquire();
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  });
}

TEST_F(SpillStoreTest, ReleaseFreesEveryTierAndRemovesTheFile) {
  spill_store store(options());
  auto on_device = store.make_spillable(make_table(100, 1).first, 2);
  auto on_host   = store.make_spillable(make_table(100, 2).first, 1);
  auto on_disk   = store.make_spillable(make_table(100, 3).first, 0);
  (void)store.spill(1, spill_tier::DEVICE);  // on_disk
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  (void)store.spill(1, spill_tier::DEVICE);  // on_host
  ASSERT_EQ(on_disk.tier(), spill_tier::DISK);
  ASSERT_EQ(on_host.tier(), spill_tier::HOST);
  ASSERT_EQ(spill_files(store).size(), 1U);

  on_disk.release();
  EXPECT_TRUE(spill_files(store).empty());
  EXPECT_EQ(store.bytes_on(spill_tier::DISK), 0U);
  on_host.release();
  EXPECT_EQ(store.bytes_on(spill_tier::HOST), 0U);
  on_device.release();
  EXPECT_EQ(store.bytes_on(spill_tier::DEVICE), 0U);
  EXPECT_EQ(device_.used_bytes(), 0U);
  EXPECT_FALSE(on_device.valid());
}

TEST_F(SpillStoreTest, TakeIfResidentHandsBackTheRegisteredTableWithoutACopy) {
  spill_store store(options());
  auto [device_table, expected] = make_table(100, 7);
  table const* const registered = device_table.get();
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  auto other                    = store.make_spillable(make_table(100, 8).first, 0);
  std::size_t const device_used = device_.used_bytes();
  std::size_t const stored      = store.bytes_on(spill_tier::DEVICE);
  auto taken                    = handle.take_if_resident();
  ASSERT_NE(taken, nullptr);
  // The same table object and memory: ownership moved, nothing copied or freed.
  EXPECT_EQ(taken.get(), registered);
  EXPECT_FALSE(handle.valid());
  EXPECT_EQ(device_.used_bytes(), device_used);
  EXPECT_EQ(store.bytes_on(spill_tier::DEVICE), stored - taken->allocated_bytes());
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), taken->view());
  // No longer the store's: spilling everything leaves it where it is.
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  EXPECT_EQ(other.tier(), spill_tier::HOST);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), taken->view());
  taken.reset();
  EXPECT_EQ(device_.used_bytes(), 0U);  // `other` is on the host
  EXPECT_THROW((void)handle.take_if_resident(), logic_error);
}

TEST_F(SpillStoreTest, TakeIfResidentLeavesPinnedSpilledAndUnspilledTablesInTheStore) {
  spill_store store(options());
  auto [device_table, expected] = make_table(100, 9);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  {
    auto const pinned = handle.acquire();
    EXPECT_EQ(handle.take_if_resident(), nullptr);  // pinned
    EXPECT_TRUE(handle.valid());
  }
  (void)handle.materialize();
  EXPECT_EQ(handle.take_if_resident(), nullptr);  // pinned by materialize()
  handle.make_spillable();
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  ASSERT_EQ(handle.tier(), spill_tier::HOST);
  EXPECT_EQ(handle.take_if_resident(), nullptr);  // on the host
  EXPECT_TRUE(handle.valid());
  {
    // Unspilled, it is packed bytes on the device, not a table it could hand back.
    auto const pinned = handle.acquire();
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  }
  ASSERT_EQ(handle.tier(), spill_tier::DEVICE);
  EXPECT_EQ(handle.take_if_resident(), nullptr);
  EXPECT_TRUE(handle.valid());
  std::size_t const stored = store.bytes_on(spill_tier::DEVICE);
  EXPECT_GT(stored, 0U);
  handle.release();
  EXPECT_EQ(store.bytes_on(spill_tier::DEVICE), 0U);
  EXPECT_EQ(device_.used_bytes(), 0U);
}

TEST_F(SpillStoreTest, TakeIfResidentHandsBackABufferWithoutACopyOnlyWhenItIsOnTheDevice) {
  spill_store store(options());
  buffer bytes(4_KiB, default_stream(), device_);
  std::memset(bytes.data(), 0x3c, bytes.size());
  auto handle = store.make_spillable(std::move(bytes), 0);
  {
    auto const pinned = handle.acquire();
    EXPECT_TRUE(handle.take_if_resident().empty());  // pinned
  }
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  ASSERT_EQ(handle.tier(), spill_tier::HOST);
  EXPECT_TRUE(handle.take_if_resident().empty());  // on the host
  EXPECT_TRUE(handle.valid());
  void const* again = nullptr;
  {
    auto const pinned = handle.acquire();  // back on the device, in new memory
    again             = pinned.data();
  }
  std::size_t const used = device_.used_bytes();
  buffer taken           = handle.take_if_resident();
  ASSERT_EQ(taken.size(), 4_KiB);
  EXPECT_EQ(taken.data(), again);
  EXPECT_FALSE(handle.valid());
  EXPECT_EQ(store.bytes_on(spill_tier::DEVICE), 0U);  // no longer the store's
  EXPECT_EQ(device_.used_bytes(), used);              // nothing copied or freed
  std::vector<std::uint8_t> host(taken.size());
  copy_bytes(host.data(), memory_kind::HOST, taken.data(), taken.kind(), host.size(), {});
  EXPECT_TRUE(std::all_of(host.begin(), host.end(), [](std::uint8_t b) { return b == 0x3c; }));
  taken = buffer{};
  EXPECT_EQ(device_.used_bytes(), 0U);
  EXPECT_THROW((void)handle.take_if_resident(), logic_error);
}

TEST_F(SpillStoreTest, PrefetchBringsDiskDataToTheHost) {
  spill_store store(options());
  auto [device_table, expected] = make_table(100, 9);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  (void)store.spill(1, spill_tier::DEVICE);
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  ASSERT_EQ(handle.tier(), spill_tier::DISK);
  store.prefetch(handle);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::HOST);
  EXPECT_TRUE(spill_files(store).empty());
  auto const pinned = handle.acquire();
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  EXPECT_EQ(store.statistics().between(spill_tier::DISK, spill_tier::HOST).count, 1U);
}

TEST_F(SpillStoreTest, AcquireCancelsAQueuedWrite) {
  auto store_options       = options();
  store_options.io_threads = 1;
  spill_store store(store_options);
  auto [device_table, expected] = make_table(100, 9);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  (void)store.spill(1, spill_tier::DEVICE);
  (void)store.spill(1, spill_tier::HOST);
  {
    auto const pinned = handle.acquire();  // whether the write ran or not, the data is right
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  }
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DEVICE);
}

/// Spills a table to disk and returns the path of the file holding it.
std::string spill_to_disk(spill_store& store) {
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  auto const files = spill_fixture::spill_files(store);
  return files.size() == 1 ? files.front().string() : std::string{};
}

TEST_F(SpillStoreTest, FlippedByteInASpillFileIsDetected) {
  auto store_options       = options();
  store_options.disk_codec = codec::NONE;
  spill_store store(store_options);
  auto handle     = store.make_spillable(make_table(200, 1).first, 0);
  auto const path = spill_to_disk(store);
  ASSERT_FALSE(path.empty());
  {
    std::fstream stream(path, std::ios::in | std::ios::out | std::ios::binary);
    stream.seekp(1000);
    stream.put('\x7f');
  }
  try {
    (void)handle.acquire();
    FAIL() << "corrupt data was returned";
  } catch (corruption_error const& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("spill buffer " + std::to_string(handle.id())));
    EXPECT_THAT(error.what(), ::testing::HasSubstr(path));
  }
  EXPECT_EQ(store.statistics().read_errors, 1U);
  // The store still works for other buffers.
  auto [device_table, expected] = make_table(50, 2);
  auto other                    = store.make_spillable(std::move(device_table), 0);
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  auto const pinned = other.acquire();
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
}

TEST_F(SpillStoreTest, DeletedOrTruncatedSpillFileIsAClearError) {
  {
    spill_store store(options());
    auto deleted    = store.make_spillable(make_table(200, 1).first, 0);
    auto const path = spill_to_disk(store);
    ASSERT_FALSE(path.empty());
    std::filesystem::remove(path);
    EXPECT_THROW((void)deleted.acquire(), io_error);
    EXPECT_THROW((void)deleted.acquire(), io_error);  // stays an error, never wrong data
    EXPECT_EQ(store.statistics().read_errors, 2U);
  }
  spill_store store(options());
  auto truncated  = store.make_spillable(make_table(200, 2).first, 0);
  auto const path = spill_to_disk(store);
  ASSERT_FALSE(path.empty());
  std::filesystem::resize_file(path, 100);
  EXPECT_THROW((void)truncated.acquire(), corruption_error);
  EXPECT_EQ(store.statistics().read_errors, 1U);
}

TEST_F(SpillStoreTest, FullDiskKeepsTheDataOnTheHostAndTheStoreUsable) {
  fault_injection_file_system files;
  files.fail_writes_after(1000);
  auto store_options  = options();
  store_options.files = &files;
  spill_store store(store_options);
  auto [device_table, expected] = make_table(300, 3);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::HOST);
  auto const stats = store.statistics();
  EXPECT_EQ(stats.write_errors, 1U);
  EXPECT_THAT(stats.last_error, ::testing::HasSubstr("No space left on device"));
  EXPECT_THAT(stats.last_error,
              ::testing::HasSubstr("spill buffer " + std::to_string(handle.id())));
  EXPECT_EQ(stats.last_disk_error, stats.last_error);
  EXPECT_EQ(files.failed_writes(), 1U);
  {
    auto const pinned = handle.acquire();
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  }
  // Space comes back: the same buffer and a new one go to disk and return intact.
  files.heal();
  auto [second_table, second_expected] = make_table(100, 4);
  auto second                          = store.make_spillable(std::move(second_table), 0);
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  EXPECT_EQ(second.tier(), spill_tier::DISK);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), handle.acquire().view());
  SPILLWAY_EXPECT_TABLES_EQUAL(second_expected->view(), second.acquire().view());
}

TEST_F(SpillStoreTest, UnwritableDirectoryKeepsDataAndReportsIt) {
  fault_injection_file_system files;
  files.fail_create_directories(true);
  auto store_options  = options(64_KiB);
  store_options.files = &files;
  spill_store store(store_options);
  auto [device_table, expected] = make_table(3000, 3);  // more than the host may hold
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  // Nothing is staged past the budget: the failed move leaves the table on the device.
  EXPECT_EQ(store.spill(1_GiB, spill_tier::DEVICE), 0U);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DEVICE);
  EXPECT_EQ(store.statistics().write_errors, 1U);
  EXPECT_THAT(store.statistics().last_error, ::testing::HasSubstr("Permission denied"));
  EXPECT_EQ(store.statistics().last_disk_error, store.statistics().last_error);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), handle.acquire().view());
}

TEST_F(SpillStoreTest, FilesAreRemovedAfterAnException) {
  std::string directory;
  try {
    spill_store store(options());
    directory   = store.directory();
    auto handle = store.make_spillable(make_table(100, 1).first, 0);
    ASSERT_FALSE(spill_to_disk(store).empty());
    ASSERT_TRUE(std::filesystem::exists(directory));
    throw std::runtime_error("operator failed");
  } catch (std::runtime_error const&) {
  }
  ASSERT_FALSE(directory.empty());
  EXPECT_FALSE(std::filesystem::exists(directory));
}

TEST_F(SpillStoreTest, FilesRollOverAtTheTargetSizeAndGoWhenEmpty) {
  auto store_options             = options();
  store_options.disk_codec       = codec::NONE;
  store_options.file_target_size = 64_KiB;
  store_options.io_threads       = 1;
  spill_store store(store_options);
  std::vector<spillable_buffer> handles;
  for (int index = 0; index < 6; ++index) {
    handles.push_back(store.make_spillable(buffer(40_KiB, default_stream(), device_), 0));
  }
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(spill_files(store).size(), 6U);  // 40 KiB blocks: one per 64 KiB file
  handles.clear();
  EXPECT_TRUE(spill_files(store).empty());
}

TEST_F(SpillStoreTest, StatisticsReportCompressionAndBytesOnTiers) {
  spill_store store(options());
  std::vector<std::int64_t> sequence(100000);
  for (std::size_t index = 0; index < sequence.size(); ++index) {
    sequence[index] = static_cast<std::int64_t>(index / 16);
  }
  auto handle = store.make_spillable(
    buffer(sequence.data(), memory_kind::HOST, sequence.size() * 8, default_stream(), device_), 0);
  EXPECT_EQ(store.bytes_on(spill_tier::DEVICE), sequence.size() * 8);
  (void)store.spill(1, spill_tier::DEVICE);
  EXPECT_EQ(store.bytes_on(spill_tier::HOST), sequence.size() * 8);
  (void)store.spill(1, spill_tier::HOST);
  store.wait_for_io();
  auto const stats = store.statistics();
  EXPECT_GT(stats.disk_compression_ratio(), 2.0);  // lz4 on a sequence
  EXPECT_EQ(stats.buffers_on[index_of(spill_tier::DISK)], 1U);
  EXPECT_EQ(
    stats.bytes_on[index_of(spill_tier::DISK)],
    stats.between(spill_tier::HOST, spill_tier::DISK).stored_bytes + SPILL_BLOCK_HEADER_SIZE);
  EXPECT_GT(stats.between(spill_tier::HOST, spill_tier::DISK).time.count(), 0);
}

/// `bytes` bytes of xorshift output: what no codec shrinks.
std::vector<std::byte> incompressible(std::size_t bytes, std::uint64_t state) {
  std::vector<std::byte> out(bytes);
  for (auto& value : out) {
    state ^= state << 13;
    state ^= state >> 7;
    state ^= state << 17;
    value = static_cast<std::byte>(state >> 56);
  }
  return out;
}

/// Spills `data` (host bytes) to disk through `store`, checks that it reads back intact, and
/// frees it.
void spill_and_check(spill_store& store, std::vector<std::byte> const& data, resource_ref device) {
  auto handle = store.make_spillable(
    buffer(data.data(), memory_kind::HOST, data.size(), default_stream(), device), 0);
  (void)store.spill(1_GiB, spill_tier::DEVICE);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  {
    auto const pinned = handle.acquire();
    EXPECT_EQ(std::memcmp(pinned.data(), data.data(), data.size()), 0);
  }
}

TEST_F(SpillStoreTest, BlocksThatDoNotCompressAreWrittenRawAndLaterOnesUntried) {
  auto store_options         = options();
  store_options.staging_size = 4_KiB;  // one disk block per 4 KiB
  spill_store store(store_options);
  ASSERT_EQ(store_options.disk_codec, codec::LZ4);
  ASSERT_EQ(store_options.min_compression_ratio, 1.5);
  // Random bytes: every block would grow, so each is stored raw.
  auto const noise = incompressible(16_KiB, 7);
  spill_and_check(store, noise, device_);
  auto stats = store.statistics();
  EXPECT_EQ(stats.between(spill_tier::HOST, spill_tier::DISK).stored_bytes, 16_KiB);
  // Zeros right after: the first blocks are written raw untried (the noise's last block set a
  // skip), and the codec is tried again and kept once the skip runs out.
  std::vector<std::byte> const zeros(40_KiB, std::byte{0});
  spill_and_check(store, zeros, device_);
  stats       = store.statistics();
  auto stored = stats.between(spill_tier::HOST, spill_tier::DISK).stored_bytes - 16_KiB;
  EXPECT_GE(stored, 4_KiB) << "no block was skipped";
  EXPECT_LT(stored, 40_KiB / 2) << "the codec was not tried again";
}

TEST_F(SpillStoreTest, ASlowDiskKeepsCompressedBlocks) {
  // By default blocks stay compressed only while that is faster than writing them raw: on a disk
  // that writes 4 KiB in 4 ms, LZ4 (microseconds) always pays.
  testing::fault_injection_file_system slow_disk;
  slow_disk.slow_writes(std::chrono::microseconds{1});
  auto store_options                      = options();
  store_options.compress_only_when_faster = true;
  store_options.staging_size              = 4_KiB;
  store_options.files                     = &slow_disk;
  spill_store store(store_options);
  std::vector<std::int64_t> sequence(5000);
  for (std::size_t index = 0; index < sequence.size(); ++index) {
    sequence[index] = static_cast<std::int64_t>(index / 16);
  }
  std::vector<std::byte> data(sequence.size() * sizeof(std::int64_t));
  std::memcpy(data.data(), sequence.data(), data.size());
  spill_and_check(store, data, device_);
  auto const stats = store.statistics();
  EXPECT_GT(stats.disk_compression_ratio(), 2.0);
}

TEST_F(SpillStoreTest, CompressionRatioOfOneKeepsEveryBlockTheCodecShrinks) {
  auto store_options                  = options();
  store_options.staging_size          = 4_KiB;
  store_options.min_compression_ratio = 1.0;
  spill_store store(store_options);
  // Half zeros, half noise in each block: LZ4 shrinks them, to well above 1/1.5 of their size.
  std::vector<std::byte> data;
  for (std::uint64_t block = 0; block < 8; ++block) {
    auto const noise = incompressible(3_KiB, block + 1);
    data.insert(data.end(), noise.begin(), noise.end());
    data.insert(data.end(), 1_KiB, std::byte{0});
  }
  spill_and_check(store, data, device_);
  auto const stored = store.statistics().between(spill_tier::HOST, spill_tier::DISK).stored_bytes;
  EXPECT_LT(stored, data.size());
  EXPECT_GT(stored, data.size() * 2 / 3);

  auto strict_options         = options();
  strict_options.staging_size = 4_KiB;
  spill_store strict(strict_options);
  spill_and_check(strict, data, device_);
  EXPECT_EQ(strict.statistics().between(spill_tier::HOST, spill_tier::DISK).stored_bytes,
            data.size());

  auto invalid                  = options();
  invalid.min_compression_ratio = 0.5;
  EXPECT_THROW(spill_store{invalid}, invalid_argument);
}

TEST_F(SpillStoreTest, DeviceFailureCallbackSpillsToMakeRoom) {
  spill_store store(options());
  failure_callback_resource_adaptor device_with_spill(device_, store.make_failure_callback());
  auto filler = store.make_spillable(buffer(24_MiB, default_stream(), device_), 0);
  // 16 MiB does not fit beside 24 MiB in 32 MiB: the callback spills the filler.
  buffer big(16_MiB, default_stream(), device_with_spill);
  EXPECT_EQ(filler.tier(), spill_tier::HOST);
  EXPECT_GE(device_with_spill.callback_calls(), 1U);
}

TEST_F(SpillStoreTest, UnspillingSpillsOthersThroughTheDevice) {
  spill_store* store_pointer = nullptr;
  failure_callback_resource_adaptor device_with_spill(device_, [&](std::size_t bytes, std::size_t) {
    return store_pointer->spill(bytes, spill_tier::DEVICE) > 0;
  });
  auto store_options   = options(128_MiB);  // both 20 MiB buffers fit below the high-water mark
  store_options.device = device_with_spill;
  spill_store store(store_options);
  store_pointer = &store;
  auto first    = store.make_spillable(buffer(20_MiB, default_stream(), device_), 0);
  (void)store.spill(1, spill_tier::DEVICE);
  auto second = store.make_spillable(buffer(20_MiB, default_stream(), device_), 0);
  ASSERT_EQ(first.tier(), spill_tier::HOST);
  // Bringing "first" back needs 20 MiB of 32 MiB while "second" holds 20: its allocation fails,
  // the callback spills "second" and the allocation is retried.
  {
    auto const pinned = first.acquire();
    EXPECT_EQ(first.tier(), spill_tier::DEVICE);
    EXPECT_EQ(second.tier(), spill_tier::HOST);
    EXPECT_GE(device_with_spill.callback_calls(), 1U);
    // With "first" pinned nothing can make room for "second": a clear out_of_memory, no loss.
    EXPECT_THROW((void)second.acquire(), out_of_memory);
    EXPECT_EQ(second.tier(), spill_tier::HOST);
  }
  EXPECT_NO_THROW((void)second.acquire());
}

/// Spills everything from the device and from the host, over and over, until stopped.
class background_spiller {
 public:
  explicit background_spiller(spill_store& store)
    : thread_([this, &store] {
        while (!stop_.load()) {
          (void)store.spill(1_GiB, spill_tier::DEVICE);
          (void)store.spill(1_GiB, spill_tier::HOST);
          std::this_thread::yield();
        }
      }) {}
  ~background_spiller() { stop(); }
  background_spiller(background_spiller const&)            = delete;
  background_spiller& operator=(background_spiller const&) = delete;

  void stop() {
    stop_ = true;
    if (thread_.joinable()) {
      thread_.join();
    }
  }

 private:
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

TEST_F(SpillStoreTest, ConcurrentAcquiresOfOneTableHandleWhileItSpills) {
  // A lent map input: one handle, acquired by the map's thread and by a recomputation at once.
  auto store_options = options(256_KiB);
  spill_store store(store_options);
  auto [device_table, expected] = make_table(2000, 5);
  auto const handle             = store.make_spillable(std::move(device_table), 0);
  constexpr int THREADS         = 4;
  constexpr int ROUNDS          = 30;
  std::atomic<int> failures{0};
  auto const moves = [&store] {
    auto const moved = store.statistics();
    return moved.between(spill_tier::DEVICE, spill_tier::HOST).count +
           moved.between(spill_tier::DEVICE, spill_tier::DISK).count;
  };
  background_spiller spiller(store);
  std::vector<std::thread> readers;
  auto const deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  for (int thread = 0; thread < THREADS; ++thread) {
    readers.emplace_back([&] {
      // At least ROUNDS reads, and on until the handle has been spilled twice (slow builds may
      // schedule the spiller only while the readers hold their pins), within the deadline.
      for (int round = 0;
           round < ROUNDS || (moves() < 2 && std::chrono::steady_clock::now() < deadline);
           ++round) {
        {
          auto const pinned = handle.acquire();
          auto const copied = copy(pinned.view(), default_stream(), host_);
          if (handle.tier() != spill_tier::DEVICE || copied->num_rows() != expected->num_rows()) {
            ++failures;
          }
          SPILLWAY_EXPECT_TABLES_EQUAL(copied->view(), expected->view());
        }
        std::this_thread::sleep_for(std::chrono::microseconds(200));  // unpinned: a victim
      }
    });
  }
  for (auto& reader : readers) {
    reader.join();
  }
  spiller.stop();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_GE(moves(), 2U) << "the handle never left the device twice while it was read";
}

TEST_F(SpillStoreTest, ConcurrentAcquireReleaseWhileAnotherThreadSpills) {
  auto store_options = options(256_KiB);  // small: spills reach the disk too
  spill_store store(store_options);
  constexpr int THREADS    = 8;
  constexpr int ITERATIONS = 40;
  std::atomic<int> failures{0};
  background_spiller spiller(store);
  // Odd iterations park their buffer unpinned until the end: the spiller always has victims,
  // and the parked data is checked after whatever tiers it went through.
  std::vector<std::vector<std::pair<spillable_buffer, std::vector<std::int64_t>>>> parked(THREADS);
  std::vector<std::thread> workers;
  for (int thread = 0; thread < THREADS; ++thread) {
    workers.emplace_back([&, thread] {
      for (int iteration = 0; iteration < ITERATIONS; ++iteration) {
        std::vector<std::int64_t> values(2000);
        for (std::size_t index = 0; index < values.size(); ++index) {
          values[index] = thread * 1000003 + iteration * 7919 + static_cast<std::int64_t>(index);
        }
        std::size_t const bytes = values.size() * sizeof(std::int64_t);
        auto handle             = store.make_spillable(
          buffer(values.data(), memory_kind::HOST, bytes, default_stream(), device_),
          iteration % 3,
          task_id{static_cast<std::uint64_t>(thread)});
        for (int round = 0; round < 3; ++round) {
          auto const pinned = handle.acquire();
          for (int check = 0; check < 3; ++check) {
            // Pinned: stays on the device and unchanged while the spiller runs.
            if (handle.tier() != spill_tier::DEVICE ||
                std::memcmp(pinned.data(), values.data(), bytes) != 0) {
              ++failures;
            }
            std::this_thread::yield();
          }
        }
        if (iteration % 2 == 0) {
          handle.release();
        } else {
          parked[static_cast<std::size_t>(thread)].emplace_back(std::move(handle),
                                                                std::move(values));
        }
      }
    });
  }
  for (auto& worker : workers) {
    worker.join();
  }
  // The parked buffers are unpinned device buffers: the spiller moves them sooner or later.
  while (true) {
    auto const moved = store.statistics();
    if (moved.between(spill_tier::DEVICE, spill_tier::HOST).count +
          moved.between(spill_tier::DEVICE, spill_tier::DISK).count >
        0) {
      break;
    }
    std::this_thread::yield();
  }
  spiller.stop();
  store.wait_for_io();
  for (auto& thread_parked : parked) {
    for (auto& [handle, values] : thread_parked) {
      auto const pinned = handle.acquire();
      if (std::memcmp(pinned.data(), values.data(), values.size() * sizeof(std::int64_t)) != 0) {
        ++failures;
      }
    }
  }
  EXPECT_EQ(failures.load(), 0);
  auto const stats = store.statistics();
  EXPECT_EQ(stats.write_errors + stats.read_errors, 0U) << stats.last_error;
  EXPECT_GT(stats.between(spill_tier::DEVICE, spill_tier::HOST).count +
              stats.between(spill_tier::DEVICE, spill_tier::DISK).count,
            0U);
}

}  // namespace
}  // namespace spillway::testing
