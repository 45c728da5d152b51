/**
 * The distributed sort on every rank group (threads in-process, or MPI's processes): every rank's
 * output is sorted, the ranks' outputs in rank order are one sorted sequence, and together they
 * hold exactly the rows of every rank's input; on small devices it spills and stays in budget.
 */
#include "testing/expect_tables_equal.hpp"
#include "testing/parameter_printers.hpp"
#include "testing/rank_groups.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/distributed_sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/pack.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <vector>

namespace spillway {
namespace {

enum class keys_kind { UNIFORM, SKEWED, EQUAL, STRINGS_DESC };

/// Rank `rank`'s input: `batches` batches of `rows` rows (key columns first, then payload).
std::vector<std::unique_ptr<table>> rank_input(
  keys_kind kind, int rank, std::size_t batches, std::size_t rows, resource_ref memory) {
  std::vector<std::unique_ptr<table>> out;
  for (std::size_t b = 0; b < batches; ++b) {
    auto const seed = static_cast<std::uint64_t>(rank) * 1000 + b;
    std::vector<std::unique_ptr<column>> columns;
    if (kind == keys_kind::STRINGS_DESC) {
      auto keys = testing::random_table({type_id::STRING, type_id::INT32}, rows, seed, 0.1, memory);
      columns   = keys->release();
    } else {
      std::vector<std::int64_t> keys(rows);
      for (std::size_t i = 0; i < rows; ++i) {
        auto const x = (seed * 7919 + i) * 6364136223846793005ULL;
        keys[i]      = static_cast<std::int64_t>(x >> 20U);
        if (kind == keys_kind::EQUAL || (kind == keys_kind::SKEWED && i % 10 != 0)) {
          keys[i] = 42;
        }
      }
      columns.push_back(testing::make_fixed_column(type_id::INT64, keys, {}, memory));
    }
    std::vector<std::int64_t> payload(rows);
    std::iota(payload.begin(), payload.end(), static_cast<std::int64_t>(seed << 32U));
    columns.push_back(testing::make_fixed_column(type_id::INT64, payload, {}, memory));
    out.push_back(std::make_unique<table>(std::move(columns)));
  }
  return out;
}

/// Every rank's `mine`, in rank order, as tables in `memory` (packed and exchanged by allgather).
std::vector<std::unique_ptr<table>> gather_tables(communicator& comm,
                                                  table_view const& mine,
                                                  resource_ref memory) {
  auto const packed = pack(mine, default_stream(), memory_resources{memory});
  std::vector<std::byte> bytes(sizeof(std::uint64_t) + packed.metadata.size() + packed.data.size());
  std::uint64_t const metadata_bytes = packed.metadata.size();
  std::memcpy(bytes.data(), &metadata_bytes, sizeof(metadata_bytes));
  std::memcpy(bytes.data() + sizeof(metadata_bytes), packed.metadata.data(), metadata_bytes);
  if (!packed.data.empty()) {
    std::memcpy(bytes.data() + sizeof(metadata_bytes) + metadata_bytes,
                packed.data.data(),
                packed.data.size());
  }
  std::vector<std::unique_ptr<table>> out;
  for (auto const& theirs : comm.allgather(bytes)) {
    std::uint64_t size = 0;
    std::memcpy(&size, theirs.data(), sizeof(size));
    std::span<std::uint8_t const> metadata{
      reinterpret_cast<std::uint8_t const*>(theirs.data() + sizeof(size)), size};
    auto const* data = theirs.data() + sizeof(size) + size;
    auto const view =
      unpack(metadata, data, theirs.size() - sizeof(size) - size, memory_kind::HOST);
    out.push_back(copy(view, default_stream(), memory_resources{memory}));
  }
  return out;
}

std::unique_ptr<table> concatenate_all(std::vector<std::unique_ptr<table>> const& parts,
                                       resource_ref memory) {
  std::vector<table_view> views;
  for (auto const& part : parts) {
    if (part->num_rows() > 0) {
      views.push_back(part->view());
    }
  }
  if (views.empty()) {
    return nullptr;
  }
  return concatenate(views, default_stream(), memory_resources{memory});
}

/// `t` sorted by every column (a canonical order for comparing multisets of rows).
std::unique_ptr<table> canonical(table_view const& t, resource_ref memory) {
  return sort(t, t, {}, sort_stability::STABLE, default_stream(), memory_resources{memory});
}

struct sort_case {
  keys_kind kind;
  shuffle_mode mode;
};

/// Prints e.g. "skewed keys, push" (the case in test listings and failures).
void PrintTo(sort_case const& c, std::ostream* os) {
  static char const* const kinds[] = {"uniform", "skewed", "equal", "descending strings"};
  *os << kinds[static_cast<int>(c.kind)] << " keys, ";
  PrintTo(c.mode, os);
}

struct sort_settings {
  std::size_t batches = 4;
  std::size_t rows    = 3000;
  std::size_t device  = 4_MiB;
  std::size_t host    = 2_MiB;
  bool empty_rank_one = false;  ///< rank 1 has no input
  /// The input is lent (`lent_batches`): held spillable in the rank's store, each batch pinned
  /// while it is read; otherwise a `batch_source` that copies each batch onto the device.
  bool lent        = false;
  bool lose_shards = false;  ///< shards of every rank's first map and others at random are lost
};

/// Runs the distributed sort on this rank and checks the global result on every rank.
struct run_result {
  distributed_sort_statistics stats;
  std::size_t spilled_bytes = 0;  ///< device bytes this rank's store moved to host or disk
  std::size_t extra_lends   = 0;  ///< lent batches asked for again (recomputations)
};

run_result run_and_check(communicator& comm, sort_case const& c, sort_settings const& s) {
  host_memory_resource host;
  bool const no_input = s.empty_rank_one && comm.rank() == 1;
  bool const strings  = c.kind == keys_kind::STRINGS_DESC;
  // String keys sort far slower in debug and sanitizer builds: a quarter of the rows, on twice
  // the device (the shuffle threads and the sort share it, each with its own OOM handling).
  auto const rows = strings ? s.rows / 4 : s.rows;
  auto batches    = rank_input(c.kind, comm.rank(), no_input ? 0 : s.batches, rows, host);
  std::size_t const num_keys = strings ? 2 : 1;

  device_environment_options env_options;
  env_options.device_memory = strings ? 2 * s.device : s.device;
  env_options.host_memory   = s.host;
  env_options.spill_root    = ::testing::TempDir();
  device_environment env(env_options);
  device_task task(env, task_id{static_cast<std::uint64_t>(comm.rank()) + 1});

  distributed_sort_options options;
  options.key_columns.resize(num_keys);
  std::iota(options.key_columns.begin(), options.key_columns.end(), std::size_t{0});
  if (c.kind == keys_kind::STRINGS_DESC) {
    options.orders = {{order::DESCENDING, null_order::AFTER},
                      {order::ASCENDING, null_order::BEFORE}};
  }
  options.mode                    = c.mode;
  options.samples_per_batch       = 64;
  options.inbox_budget            = s.device / 4;
  options.sort.merge_budget_bytes = s.device / 2;
  options.sort.output_batch_bytes = s.device / 8;
  options.sort.coordinator        = &env.coordinator();
  options.sort.task               = &task.context();
  if (s.lose_shards) {
    options.testing_shard_loss = [random = random_shard_loss(0.2, 7)](shard_loss_point point,
                                                                      shard_key const& key) {
      return (point == shard_loss_point::AFTER_MAP && key.map == 0) || random(point, key);
    };
  }

  memory_resources const mrs{env.device()};
  auto const source = [&](std::function<void(std::unique_ptr<table>)> const& consume) {
    for (auto const& batch : batches) {  // a copy on the device each pass, as a reader would
      consume(copy(batch->view(), default_stream(), mrs));
    }
  };
  std::vector<std::unique_ptr<table>> outputs;
  auto const sink = [&](table_view const& batch) {
    outputs.push_back(copy(batch, default_stream(), memory_resources{host}));
  };
  distributed_sort_statistics stats;
  std::size_t extra_lends = 0;
  std::vector<spillable_table> stored;  // (the lent input: stored before the counts start)
  if (s.lent) {
    for (auto const& batch : batches) {
      stored.push_back(env.store().make_spillable(copy(batch->view(), default_stream(), mrs), 0));
    }
  }
  auto const before        = env.store().statistics();
  auto const spilled_since = [&](spill_statistics const& now) {
    auto const moved = [](spill_statistics const& from) {
      return from.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes +
             from.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes;
    };
    return moved(now) - moved(before);
  };
  if (s.lent) {
    std::vector<std::size_t> lent_calls(stored.size(), 0);
    std::mutex calls_mutex;
    lent_batches const input{stored.size(), [&](std::size_t index) {
                               {
                                 std::lock_guard const lock(calls_mutex);
                                 ++lent_calls.at(index);
                               }
                               auto pinned =
                                 std::make_shared<pinned_table>(stored[index].acquire());
                               table_view const view = pinned->view();
                               return map_rows{view, std::move(pinned)};
                             }};
    stats = distributed_sort(comm, env.store(), input, sink, options, default_stream(), mrs, host);
    for (auto const calls : lent_calls) {
      EXPECT_GE(calls, 2U) << "each batch is lent to the sample pass and to its map task";
      extra_lends += calls - std::min<std::size_t>(calls, 2);
    }
  } else {
    stats = distributed_sort(comm, env.store(), source, sink, options, default_stream(), mrs, host);
  }
  EXPECT_LE(env.device_peak_bytes(), env_options.device_memory);
  run_result result{stats, spilled_since(env.store().statistics()), extra_lends};

  // This rank's output is sorted by the keys.
  auto const mine = concatenate_all(outputs, host);
  std::vector<std::size_t> key_indices(num_keys);
  std::iota(key_indices.begin(), key_indices.end(), std::size_t{0});
  if (mine) {
    EXPECT_EQ(stats.output_rows, mine->num_rows());
    auto const resorted = sort(mine->view(),
                               mine->view().select(key_indices),
                               options.orders,
                               sort_stability::STABLE,
                               default_stream(),
                               memory_resources{host});
    SPILLWAY_EXPECT_TABLES_EQUAL(mine->view().select(key_indices),
                                 resorted->view().select(key_indices));
  }
  // All outputs in rank order are one sorted sequence holding exactly the input rows.
  auto const no_rows     = rank_input(c.kind, 0, 1, 0, host);  // the schema, without rows
  table_view const empty = no_rows.front()->view();
  auto const all_out =
    concatenate_all(gather_tables(comm, mine ? mine->view() : empty, host), host);
  auto const my_input = concatenate_all(batches, host);
  auto const all_in =
    concatenate_all(gather_tables(comm, my_input ? my_input->view() : empty, host), host);
  EXPECT_TRUE(all_in != nullptr);
  EXPECT_TRUE(all_out != nullptr);
  if (all_in && all_out) {
    EXPECT_EQ(all_out->num_rows(), all_in->num_rows());
  }
  // The row-by-row comparisons need tables of one length; a difference failed just above.
  if (all_in && all_out && all_out->num_rows() == all_in->num_rows()) {
    auto const expected = sort(all_in->view(),
                               all_in->view().select(key_indices),
                               options.orders,
                               sort_stability::STABLE,
                               default_stream(),
                               memory_resources{host});
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view().select(key_indices),
                                 all_out->view().select(key_indices));
    SPILLWAY_EXPECT_TABLES_EQUAL(canonical(all_in->view(), host)->view(),
                                 canonical(all_out->view(), host)->view());
  }
  return result;
}

/// `value` summed over the ranks of `comm`.
std::size_t sum_over_ranks(communicator& comm, std::size_t value) {
  std::uint64_t mine = value;
  std::size_t total  = 0;
  for (auto const& theirs :
       comm.allgather(std::as_bytes(std::span<std::uint64_t const>(&mine, 1)))) {
    std::uint64_t v = 0;
    std::memcpy(&v, theirs.data(), sizeof(v));
    total += v;
  }
  return total;
}

std::string case_name(::testing::TestParamInfo<sort_case> const& param) {
  static char const* const names[] = {"Uniform", "Skewed", "Equal", "StringsDesc"};
  return std::string(names[static_cast<int>(param.param.kind)]) +
         (param.param.mode == shuffle_mode::PUSH ? "Push" : "Pull");
}

class DistributedSort : public ::testing::TestWithParam<sort_case> {};

TEST_P(DistributedSort, GlobalOrderAndSameRows) {
  testing::for_each_rank_group([](communicator& comm) {
    static_cast<void>(run_and_check(comm, GetParam(), sort_settings{}));
  });
}

TEST_P(DistributedSort, AnEmptyRank) {
  sort_settings s;
  s.empty_rank_one = true;
  testing::for_each_rank_group(
    [&](communicator& comm) { static_cast<void>(run_and_check(comm, GetParam(), s)); });
}

/// Runs the sort on a 512 KiB device (and host tier) and checks that the sort spilled.
void sort_spilling_on_a_small_device(sort_case const& c, bool lent) {
  sort_settings s;
  s.batches = 12;
  s.rows    = 4000;  // 64 KB batches (1/8 of the device), 768 KB per rank, on a 512 KiB device
  s.device  = 512_KiB;
  s.host    = 512_KiB;
  s.lent    = lent;
  testing::for_each_rank_group([&](communicator& comm) {
    auto const result = run_and_check(comm, c, s);
    EXPECT_GT(sum_over_ranks(comm, result.spilled_bytes), 0U) << "nothing spilled";
  });
}

TEST_P(DistributedSort, SpillsOnASmallDevice) {
  sort_spilling_on_a_small_device(GetParam(), false);
}

TEST_P(DistributedSort, LentBatches) {
  sort_settings s;
  s.lent = true;
  testing::for_each_rank_group(
    [&](communicator& comm) { static_cast<void>(run_and_check(comm, GetParam(), s)); });
}

TEST_P(DistributedSort, LentBatchesSpillOnASmallDevice) {
  sort_spilling_on_a_small_device(GetParam(), true);
}

TEST_P(DistributedSort, LentBatchesRecomputeLostShards) {
  sort_settings s;
  s.lent        = true;
  s.lose_shards = true;
  testing::for_each_rank_group([&](communicator& comm) {
    auto const result = run_and_check(comm, GetParam(), s);
    EXPECT_GT(result.extra_lends, 0U) << "the first map's lost shards were not recomputed";
  });
}

INSTANTIATE_TEST_SUITE_P(Cases,
                         DistributedSort,
                         ::testing::Values(sort_case{keys_kind::UNIFORM, shuffle_mode::PUSH},
                                           sort_case{keys_kind::UNIFORM, shuffle_mode::PULL},
                                           sort_case{keys_kind::SKEWED, shuffle_mode::PUSH},
                                           sort_case{keys_kind::EQUAL, shuffle_mode::PULL},
                                           sort_case{keys_kind::STRINGS_DESC, shuffle_mode::PUSH}),
                         case_name);

/// A rank's environment with 1 MiB of device and 1 MiB of host tier.
device_environment_options one_mib_environment() {
  device_environment_options env_options;
  env_options.device_memory = 1_MiB;
  env_options.host_memory   = 1_MiB;
  env_options.spill_root    = ::testing::TempDir();
  return env_options;
}

/**
 * @brief Sorts nothing on a 1 MiB device: this rank pushes no batch and counts what is emitted.
 * @return the stats of `distributed_sort` with `options`
 */
distributed_sort_statistics sort_no_input(communicator& comm,
                                          distributed_sort_options const& options,
                                          std::size_t& emitted) {
  host_memory_resource host;
  device_environment env(one_mib_environment());
  return distributed_sort(
    comm,
    env.store(),
    [](auto const&) {},
    [&](table_view const&) { ++emitted; },
    options,
    default_stream(),
    memory_resources{env.device()},
    host);
}

TEST(DistributedSortOptions, NoSamplesIsAnErrorNotASilentlyEmptyOutput) {
  testing::for_each_rank_group([](communicator& comm) {
    distributed_sort_options options;
    options.key_columns       = {0};
    options.samples_per_batch = 0;
    std::size_t emitted       = 0;
    EXPECT_THROW(static_cast<void>(sort_no_input(comm, options, emitted)), invalid_argument);
  });
}

TEST(DistributedSortOptions, LentBatchesWithoutALenderAreAnError) {
  testing::for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    device_environment env(one_mib_environment());
    distributed_sort_options options;
    options.key_columns = {0};
    EXPECT_THROW(static_cast<void>(distributed_sort(
                   comm,
                   env.store(),
                   lent_batches{1, {}},
                   [](table_view const&) {},
                   options,
                   default_stream(),
                   memory_resources{env.device()},
                   host)),
                 invalid_argument);
  });
}

TEST(DistributedSortEmpty, NoRankHasARow) {
  testing::for_each_rank_group([](communicator& comm) {
    distributed_sort_options options;
    options.key_columns = {0};
    std::size_t emitted = 0;
    auto const stats    = sort_no_input(comm, options, emitted);
    EXPECT_EQ(emitted, 0U);
    EXPECT_EQ(stats.sampled_rows, 0U);
  });
}

/// Options of a sort by column 0 on a `one_mib_environment()` rank, for `task`.
distributed_sort_options one_mib_sort_options(device_environment& env, device_task& task) {
  distributed_sort_options options;
  options.key_columns             = {0};
  options.inbox_budget            = 256_KiB;
  options.sort.merge_budget_bytes = 512_KiB;
  options.sort.output_batch_bytes = 64_KiB;
  options.sort.coordinator        = &env.coordinator();
  options.sort.task               = &task.context();
  return options;
}

TEST(DistributedSortRankOrder, RanksWhoseOutputsAreOutOfOrderFailTheSortOnEveryRank) {
  // Every rank compares the ranks' first and last rows; in reverse rank order (the test hook) a
  // group of several ranks with distinct keys is out of order, and every rank says so.
  testing::for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    device_environment env(one_mib_environment());
    device_task task(env, task_id{static_cast<std::uint64_t>(comm.rank()) + 1});
    auto const batches = rank_input(keys_kind::UNIFORM, comm.rank(), 2, 2000, host);
    for (bool const reversed : {false, true}) {
      auto options                       = one_mib_sort_options(env, task);
      options.testing_reverse_rank_order = reversed;
      options.shuffle_id                 = reversed ? 5 : 4;
      memory_resources const mrs{env.device()};
      auto const run = [&] {
        return distributed_sort(
          comm,
          env.store(),
          [&](std::function<void(std::unique_ptr<table>)> const& consume) {
            for (auto const& batch : batches) {
              consume(copy(batch->view(), default_stream(), mrs));
            }
          },
          [](table_view const&) {},
          options,
          default_stream(),
          mrs,
          host);
      };
      if (reversed && comm.size() > 1) {
        EXPECT_THROW(static_cast<void>(run()), logic_error);
      } else {
        EXPECT_NO_THROW(static_cast<void>(run()));
      }
    }
  });
}

TEST(DistributedSortNarrowRows, AMapThatDoesNotFitTheDeviceAloneIsSplitInHalves) {
  // 200 000 one-byte keys in one batch (195 KiB): partitioning it needs a partition id of 8
  // bytes per row, 1.6 MB, more than the 1 MiB device even with everything else spilled. The
  // map task is split in halves until each fits, instead of ending the sort out of memory.
  testing::for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    device_environment env(one_mib_environment());
    device_task task(env, task_id{static_cast<std::uint64_t>(comm.rank()) + 1});
    constexpr std::size_t rows = 200000;
    std::vector<std::uint8_t> keys(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      keys[row] =
        static_cast<std::uint8_t>((row * 7919 + static_cast<std::size_t>(comm.rank())) % 251);
    }
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column(type_id::UINT8, keys, {}, host));
    table const input{std::move(columns)};
    auto const options = one_mib_sort_options(env, task);
    memory_resources const mrs{env.device()};
    std::vector<std::unique_ptr<table>> outputs;
    auto const stats = distributed_sort(
      comm,
      env.store(),
      [&](std::function<void(std::unique_ptr<table>)> const& consume) {
        consume(copy(input.view(), default_stream(), mrs));
      },
      [&](table_view const& batch) {
        outputs.push_back(copy(batch, default_stream(), memory_resources{host}));
      },
      options,
      default_stream(),
      mrs,
      host);
    auto const mine       = concatenate_all(outputs, host);
    std::size_t const got = mine ? mine->num_rows() : 0;
    EXPECT_EQ(sum_over_ranks(comm, got), rows * static_cast<std::size_t>(comm.size()));
    if (mine) {
      EXPECT_TRUE(is_sorted(mine->view(), {}, default_stream()));
    }
    EXPECT_EQ(stats.input_rows, rows);
    EXPECT_EQ(stats.output_rows, got);
  });
}

}  // namespace
}  // namespace spillway
