/**
 * The pull and push shuffles on every rank group (threads in-process, or MPI's processes): rows
 * land in their partitions, each partition equals a reference computed on one rank from the same
 * batches in global map order, skew spills instead of failing, lost and corrupt shards are
 * recomputed, empty partitions keep the schema, and the shuffle's events add up. Every test runs
 * ranks as threads next to each shuffle's service, inbox and sender threads, so every suite is
 * named Concurrent* and runs under ThreadSanitizer in CI.
 */
#include "testing/cuda_testing.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/forwarding_resource.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/rank_groups.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/shuffle/pull_shuffler.hpp>
#include <spillway/shuffle/push_shuffler.hpp>
#include <spillway/spill/file_system.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace {

/// The real file system, whose reads flip every 16th byte they read while `corrupt_reads` is on.
class corrupting_file_system final : public file_system {
 public:
  void corrupt_reads(bool on) { corrupt_.store(on); }
  [[nodiscard]] std::size_t corrupted_reads() const { return corrupted_.load(); }

  std::unique_ptr<writable_file> open_writable(std::string const& path) override {
    return real_.open_writable(path);
  }
  std::unique_ptr<readable_file> open_readable(std::string const& path) override {
    return std::make_unique<file>(real_.open_readable(path), *this);
  }
  bool remove_file(std::string const& path) noexcept override { return real_.remove_file(path); }
  void create_directories(std::string const& path) override { real_.create_directories(path); }
  void remove_all(std::string const& path) noexcept override { real_.remove_all(path); }
  std::vector<std::string> list_directory(std::string const& path) override {
    return real_.list_directory(path);
  }
  std::uint64_t free_space(std::string const& path) override { return real_.free_space(path); }

 private:
  class file final : public readable_file {
   public:
    file(std::unique_ptr<readable_file> real, corrupting_file_system& owner)
      : real_(std::move(real)), owner_(owner) {}
    std::size_t read_at(std::uint64_t offset, void* data, std::size_t bytes) override {
      std::size_t const read = real_->read_at(offset, data, bytes);
      if (read > 0 && owner_.corrupt_.load()) {  // a read may cover several buffers: hit all
        auto* bytes_read = static_cast<unsigned char*>(data);
        for (std::size_t at = 0; at < read; at += 16) {
          bytes_read[at] ^= 0x5AU;
        }
        owner_.corrupted_.fetch_add(1);
      }
      return read;
    }
    [[nodiscard]] std::string const& path() const noexcept override { return real_->path(); }

   private:
    std::unique_ptr<readable_file> real_;
    corrupting_file_system& owner_;
  };

  posix_file_system real_;
  std::atomic<bool> corrupt_{false};
  std::atomic<std::size_t> corrupted_{0};
};

/// One rank's device (spilling through its store on failure), host and spill store.
class rank_environment {
 public:
  /// `cuda`: the rank's device is the GPU's memory limited to `device_capacity`.
  rank_environment(int rank,
                   std::size_t device_capacity,
                   std::size_t host_budget,
                   bool cuda = false)
    : device_(device_capacity),
      cuda_device_(cuda ? std::make_unique<cuda_async_memory_resource>() : nullptr),
      cuda_limit_(cuda ? std::make_unique<limiting_resource_adaptor>(*cuda_device_, device_capacity)
                       : nullptr),
      device_with_spill_(cuda ? resource_ref{*cuda_limit_} : resource_ref{device_},
                         [this](std::size_t bytes, std::size_t attempt) {
                           return store_ != nullptr && callback_(bytes, attempt);
                         }) {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    std::string name = info == nullptr ? "shuffle" : info->name();
    for (char& c : name) {
      c = std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
    }
    root_ = std::filesystem::path(::testing::TempDir()) /
            ("shuffle_" + name + "_" + std::to_string(::getpid()) + "_" + std::to_string(rank));
    std::filesystem::create_directories(root_);
    spill_store_options options{device_with_spill_, host_};
    options.host_budget = host_budget;
    options.spill_root  = root_.string();
    options.files       = &files_;
    store_              = std::make_unique<spill_store>(options);
    callback_           = store_->make_failure_callback();
  }
  ~rank_environment() {
    store_.reset();
    std::filesystem::remove_all(root_);
  }
  rank_environment(rank_environment const&)            = delete;
  rank_environment& operator=(rank_environment const&) = delete;
  rank_environment(rank_environment&&)                 = delete;
  rank_environment& operator=(rank_environment&&)      = delete;

  spill_store& store() { return *store_; }
  memory_resource& device() { return device_with_spill_; }
  host_memory_resource& host() { return host_; }
  corrupting_file_system& files() { return files_; }

 private:
  corrupting_file_system files_;
  emulated_device_memory_resource device_;
  std::unique_ptr<cuda_async_memory_resource> cuda_device_;
  std::unique_ptr<limiting_resource_adaptor> cuda_limit_;
  failure_callback_resource_adaptor device_with_spill_;
  host_memory_resource host_;
  std::filesystem::path root_;
  std::unique_ptr<spill_store> store_;
  allocation_failure_callback callback_;
};

/// The batches of the whole shuffle, the same on every rank; `skew` puts 90% of rows on one key.
std::vector<std::unique_ptr<table>> make_batches(std::size_t count,
                                                 std::size_t rows,
                                                 bool skew,
                                                 resource_ref resource) {
  std::vector<std::unique_ptr<table>> batches;
  for (std::size_t index = 0; index < count; ++index) {
    auto batch = testing::random_table({data_type{type_id::INT64},
                                        data_type{type_id::STRING},
                                        data_type{type_id::FLOAT64},
                                        data_type{type_id::BINARY}},
                                       rows,
                                       100 + index,
                                       0.1,
                                       resource);
    auto* keys = batch->get_column(0).mutable_data<std::int64_t>();
    for (std::size_t row = 0; row < rows; ++row) {
      keys[row] = skew && row % 10 != 0 ? 7 : keys[row] % 5000;
    }
    batches.push_back(std::move(batch));
  }
  return batches;
}

/// The rank that runs batch `index`: all but the last rank share them, so one rank has no input.
int batch_rank(std::size_t index, int size) {
  return size == 1 ? 0 : static_cast<int>(index % static_cast<std::size_t>(size - 1));
}

/// The batch indices in global map order (by rank, then in the order each rank adds them).
std::vector<std::size_t> global_map_order(std::size_t count, int size) {
  std::vector<std::size_t> order;
  for (int rank = 0; rank < size; ++rank) {
    for (std::size_t index = 0; index < count; ++index) {
      if (batch_rank(index, size) == rank) {
        order.push_back(index);
      }
    }
  }
  return order;
}

struct shuffle_case {
  shuffle_mode mode;
  std::size_t num_partitions;
  partition_method method;
};

/// Prints e.g. "push, hash into 7 partitions" (the case in test listings and failures).
void PrintTo(shuffle_case const& c, std::ostream* os) {
  PrintTo(c.mode, os);
  *os << ", ";
  PrintTo(c.method, os);
  *os << " into " << c.num_partitions << " partitions";
}

std::vector<std::size_t> const KEYS{0, 1};

/// The partitioning of a case; RANGE splitters come from a sample of every batch.
partitioning make_partitioning(shuffle_case const& c,
                               std::vector<std::unique_ptr<table>> const& batches,
                               std::unique_ptr<table>& splitters,
                               resource_ref resource) {
  partitioning how;
  how.method         = c.method;
  how.key_columns    = KEYS;
  how.num_partitions = c.num_partitions;
  how.seed           = 17;
  if (c.method == partition_method::RANGE) {
    std::vector<table_view> keys;
    for (auto const& batch : batches) {
      keys.push_back(batch->view().select(KEYS));
    }
    auto const all     = concatenate(keys, default_stream(), resource);
    auto const sampled = sample(all->view(), 500, 3, default_stream(), resource);
    auto const sorted  = sort(
      sampled->view(), sampled->view(), {}, sort_stability::UNSTABLE, default_stream(), resource);
    splitters = quantile_splitters(sorted->view(), c.num_partitions, default_stream(), resource);
    how.splitters = splitters->view();
  }
  return how;
}

/// Partition `p` computed on one rank: each batch partitioned, in global map order.
std::unique_ptr<table> reference_partition(partitioning const& how,
                                           std::vector<std::unique_ptr<table>> const& batches,
                                           std::vector<std::size_t> const& order,
                                           std::size_t partition,
                                           resource_ref resource) {
  std::vector<partitioned_table> parts;
  std::vector<table_view> views;
  for (std::size_t const index : order) {
    parts.push_back(how.method == partition_method::HASH ? hash_partition(batches[index]->view(),
                                                                          how.key_columns,
                                                                          how.num_partitions,
                                                                          how.seed,
                                                                          default_stream(),
                                                                          resource)
                                                         : range_partition(batches[index]->view(),
                                                                           how.key_columns,
                                                                           how.splitters,
                                                                           how.orders,
                                                                           default_stream(),
                                                                           resource));
    views.push_back(parts.back().partition(partition));
  }
  return concatenate(views, default_stream(), resource);
}

/// Sums `value` over the ranks.
std::size_t sum_over_ranks(communicator& comm, std::size_t value) {
  std::uint64_t mine = value;
  auto const all     = comm.allgather(std::as_bytes(std::span<std::uint64_t const>(&mine, 1)));
  std::size_t total  = 0;
  for (auto const& bytes : all) {
    std::uint64_t theirs = 0;
    std::memcpy(&theirs, bytes.data(), sizeof(theirs));
    total += theirs;
  }
  return total;
}

struct run_settings {
  std::size_t read_ahead_budget = 8_MiB;
  std::size_t batches           = 5;
  std::size_t rows              = 600;
  bool skew                     = false;
  std::size_t device            = 64_MiB;
  std::size_t host_budget       = 64_MiB;
  std::size_t inbox_budget      = 64_MiB;
  double loss_probability       = 0.0;
  bool read_as_batches          = false;
  /// With `read_as_batches`: by `take_each_batch`, every taken table kept until the partition
  /// is read (each must own its rows: the next shards' reads do not touch them).
  bool take_batches = false;
  /// Map inputs come from the test's batches (not from the store), and after `finish_maps` every
  /// shard is spilled to disk and each of its reads there is corrupted: every shard is recomputed.
  bool corrupt_spilled_shards = false;
  /// Each rank's device is the GPU: map inputs are copied there, partitions come back from it.
  bool cuda = false;
};

struct run_result {
  shuffle_statistics statistics;
  spill_statistics spills;
  std::size_t largest_shard = 0;    ///< of this rank's map tasks
  event_log events;                 ///< what the shuffle recorded
  std::size_t corrupted_reads = 0;  ///< disk reads the test corrupted on this rank
};

/// Runs a shuffle on this rank and checks every partition it owns against the reference.
std::unique_ptr<run_result> run_and_check(communicator& comm,
                                          shuffle_case const& c,
                                          run_settings const& s) {
  auto result = std::make_unique<run_result>();
  host_memory_resource reference_memory;
  rank_environment env(comm.rank(), s.device, s.host_budget, s.cuda);
  auto const batches = make_batches(s.batches, s.rows, s.skew, reference_memory);
  std::unique_ptr<table> splitters;
  shuffle_options options(env.host());
  options.partitions        = make_partitioning(c, batches, splitters, reference_memory);
  options.inbox_budget      = s.inbox_budget;
  options.read_ahead_budget = s.read_ahead_budget;
  options.events            = &result->events;
  if (s.loss_probability > 0) {
    // At random points, and always the even partitions of every rank's first map right away,
    // so that every group size loses shards.
    options.testing_shard_loss = [random = random_shard_loss(s.loss_probability, 99)](
                                   shard_loss_point point, shard_key const& key) {
      return (point == shard_loss_point::AFTER_MAP && key.map == 0 && key.partition % 2 == 0) ||
             random(point, key);
    };
  }
  memory_resources const mrs{env.device()};
  std::unique_ptr<shuffler> shuffle =
    c.mode == shuffle_mode::PULL
      ? std::unique_ptr<shuffler>(
          std::make_unique<pull_shuffler>(comm, env.store(), options, default_stream(), mrs))
      : std::make_unique<push_shuffler>(comm, env.store(), options, default_stream(), mrs);
  for (std::size_t index = 0; index < s.batches; ++index) {
    if (batch_rank(index, comm.size()) != comm.rank()) {
      continue;
    }
    if (s.corrupt_spilled_shards || s.cuda) {
      shuffle->add_map([&batches, index](stream_view stream, memory_resources resources) {
        return copy(batches[index]->view(), stream, resources.output());
      });
    } else {
      shuffle->add_map(batches[index]->view());
    }
  }
  shuffle->finish_maps();
  if (s.corrupt_spilled_shards) {
    (void)env.store().spill(1_GiB, spill_tier::DEVICE);
    (void)env.store().spill(1_GiB, spill_tier::HOST);
    env.store().wait_for_io();
    EXPECT_EQ(env.store().bytes_on(spill_tier::DEVICE), 0U);
    EXPECT_EQ(env.store().bytes_on(spill_tier::HOST), 0U);
    comm.barrier();  // every rank's shards are on disk before any is read
    env.files().corrupt_reads(true);
  }
  EXPECT_EQ(shuffle->directory().total_maps(), s.batches);
  auto const order      = global_map_order(s.batches, comm.size());
  std::size_t rows_here = 0;
  for (std::size_t const partition : shuffle->owned_partitions()) {
    auto const expected =
      reference_partition(options.partitions, batches, order, partition, reference_memory);
    std::unique_ptr<table> actual;
    if (s.read_as_batches) {
      std::vector<std::unique_ptr<table>> copies;
      if (s.take_batches) {
        std::vector<std::unique_ptr<table>> taken;
        shuffle->take_each_batch(partition, [&](std::unique_ptr<table> batch) {
          EXPECT_GT(batch->num_rows(), 0U);
          taken.push_back(std::move(batch));
        });
        for (auto const& batch : taken) {
          copies.push_back(copy(batch->view(), default_stream(), reference_memory));
        }
      } else {
        shuffle->for_each_batch(partition, [&](table_view const& batch) {
          copies.push_back(copy(batch, default_stream(), reference_memory));
        });
      }
      std::vector<table_view> views;
      for (auto const& piece : copies) {
        views.push_back(piece->view());
      }
      actual = views.empty() ? std::make_unique<table>()
                             : concatenate(views, default_stream(), reference_memory);
    } else {
      actual = shuffle->read_partition(partition);
      if (s.cuda) {  // compared on the host
        actual = copy(actual->view(), default_stream(), reference_memory);
      }
    }
    rows_here += actual->num_rows();
    if (expected->num_rows() == 0) {
      EXPECT_EQ(actual->num_rows(), 0U) << "partition " << partition;
      if (!s.read_as_batches) {  // an empty partition still has the input's columns
        EXPECT_EQ(actual->num_columns(), batches.front()->num_columns())
          << "partition " << partition;
      }
      continue;
    }
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), actual->view()) << "partition " << partition;
    if (c.method == partition_method::HASH) {  // every row in its partition, checked directly
      auto const hashes =
        hash_rows(actual->view().select(KEYS), 17, default_stream(), reference_memory);
      for (std::size_t row = 0; row < actual->num_rows(); ++row) {
        EXPECT_EQ(hashes->view().data<std::uint64_t>()[row] % c.num_partitions, partition)
          << "row " << row;
      }
    }
  }
  shuffle->close();
  env.files().corrupt_reads(false);
  result->corrupted_reads = env.files().corrupted_reads();
  result->statistics      = shuffle->statistics();
  result->spills          = env.store().statistics();
  for (std::size_t map = 0; map < shuffle->directory().num_maps(comm.rank()); ++map) {
    for (std::size_t partition = 0; partition < c.num_partitions; ++partition) {
      result->largest_shard = std::max(
        result->largest_shard, shuffle->directory().locate({comm.rank(), map, partition}).bytes);
    }
  }
  EXPECT_EQ(sum_over_ranks(comm, rows_here), s.batches * s.rows) << "rows lost or duplicated";
  return result;
}

std::string case_name(shuffle_case const& c) {
  return std::string(c.mode == shuffle_mode::PULL ? "Pull" : "Push") +
         (c.method == partition_method::HASH ? "Hash" : "Range") + "_" +
         std::to_string(c.num_partitions) + "_partitions";
}

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
