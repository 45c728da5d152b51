/**
 * @file shuffle_harness.hpp
 * @brief What the shuffle test files share: each rank's device, host and spill store (with a
 * file system that can corrupt its reads), the batches of a shuffle and their one-rank reference
 * partitions, and `run_and_check`, which runs a shuffle on one rank and checks the partitions it
 * owns.
 */
#pragma once

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

namespace spillway::shuffle_testing {

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
inline std::vector<std::unique_ptr<table>> make_batches(std::size_t count,
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
inline int batch_rank(std::size_t index, int size) {
  return size == 1 ? 0 : static_cast<int>(index % static_cast<std::size_t>(size - 1));
}

/// The batch indices in global map order (by rank, then in the order each rank adds them).
inline std::vector<std::size_t> global_map_order(std::size_t count, int size) {
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
inline void PrintTo(shuffle_case const& c, std::ostream* os) {
  PrintTo(c.mode, os);
  *os << ", ";
  PrintTo(c.method, os);
  *os << " into " << c.num_partitions << " partitions";
}

inline std::vector<std::size_t> const KEYS{0, 1};

/// The partitioning of a case; RANGE splitters come from a sample of every batch.
inline partitioning make_partitioning(shuffle_case const& c,
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
inline std::unique_ptr<table> reference_partition(
  partitioning const& how,
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
inline std::size_t sum_over_ranks(communicator& comm, std::size_t value) {
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
inline std::unique_ptr<run_result> run_and_check(communicator& comm,
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

inline std::string case_name(shuffle_case const& c) {
  return std::string(c.mode == shuffle_mode::PULL ? "Pull" : "Push") +
         (c.method == partition_method::HASH ? "Hash" : "Range") + "_" +
         std::to_string(c.num_partitions) + "_partitions";
}

}  // namespace spillway::shuffle_testing
