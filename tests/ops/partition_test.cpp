#include "ops/reference_order.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;
using testing::reference_compare;
using testing::row_to_string;
using testing::to_vector;

class Partition : public testing::ops_fixture {
 protected:
  /// `types` at random plus a last INT64 column holding each row's input index.
  std::unique_ptr<table> make_input(std::vector<data_type> const& types,
                                    std::size_t rows,
                                    std::uint64_t seed) {
    auto random  = random_table(types, rows, seed, 0.15, input_);
    auto columns = random->release();
    std::vector<std::int64_t> ids(rows);
    std::iota(ids.begin(), ids.end(), 0);
    columns.push_back(make_fixed_column<std::int64_t>(type_id::INT64, ids, {}, input_));
    return std::make_unique<table>(std::move(columns));
  }

  /// `make_input` of (INT16 keys with many ties, STRING), keyed by both columns under `orders`.
  std::unique_ptr<table> make_tied_input(std::size_t rows) {
    auto input   = make_input({data_type{type_id::INT16}, data_type{type_id::STRING}}, rows, 9);
    auto* shorts = input->get_column(0).mutable_data<std::int16_t>();
    for (std::size_t row = 0; row < rows; ++row) {
      shorts[row] = static_cast<std::int16_t>(shorts[row] % 5);  // many equal keys
    }
    return input;
  }

  /// A sorted sample of 200 rows of `keys` of `input`, to take quantile splitters from.
  std::unique_ptr<table> sorted_sample(table const& input,
                                       std::vector<std::size_t> const& keys,
                                       sort_order const& orders) {
    table_view const key_view = input.view().select(keys);
    auto const sampled        = sample(key_view, 200, 1, default_stream(), input_);
    return sort(
      sampled->view(), sampled->view(), orders, sort_stability::UNSTABLE, default_stream(), input_);
  }

  /// The text of row `row` of `view`, every column.
  static std::string row_text(table_view const& view, std::size_t row) {
    std::string text;
    for (column_view const& column : view) {
      text += row_to_string(column, row) + "|";
    }
    return text;
  }

  /**
   * Checks that `result` holds each input row once, in the partition `expected_partition(row)`
   * names, in input order inside each partition, with the input's values.
   */
  template <typename PartitionOf>
  static void expect_partitioned(table_view const& input,
                                 partitioned_table const& result,
                                 std::size_t num_partitions,
                                 PartitionOf expected_partition) {
    ASSERT_EQ(result.num_partitions(), num_partitions);
    ASSERT_EQ(result.offsets.front(), 0U);
    ASSERT_EQ(result.offsets.back(), input.num_rows());
    ASSERT_EQ(result.rows->num_rows(), input.num_rows());
    std::size_t const id_column = input.num_columns() - 1;
    std::vector<bool> seen(input.num_rows(), false);
    for (std::size_t partition = 0; partition < num_partitions; ++partition) {
      table_view const part = result.partition(partition);
      ASSERT_EQ(part.num_rows(), result.offsets[partition + 1] - result.offsets[partition]);
      std::int64_t previous = -1;
      for (std::size_t row = 0; row < part.num_rows(); ++row) {
        std::int64_t const id = part.column(id_column).data<std::int64_t>()[row];
        ASSERT_GT(id, previous) << "partition " << partition << " is not in input order";
        previous       = id;
        auto const src = static_cast<std::size_t>(id);
        ASSERT_FALSE(seen[src]) << "row " << src << " appears twice";
        seen[src] = true;
        ASSERT_EQ(expected_partition(src), partition) << "row " << src;
        ASSERT_EQ(row_text(part, row), row_text(input, src)) << "row " << src;
      }
    }
    EXPECT_TRUE(std::all_of(seen.begin(), seen.end(), [](bool b) { return b; }));
  }
};

TEST_F(Partition, HashPutsEveryRowInItsPartitionStablyForEveryType) {
  auto const types = testing::all_types();
  auto const input = make_input(types, 2000, 11);
  std::vector<std::size_t> keys(types.size());
  std::iota(keys.begin(), keys.end(), 0);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
    auto const result =
      hash_partition(input->view(), keys, num_partitions, 3, default_stream(), mrs_);
    expect_resources(result.rows->allocated_bytes());
    auto const hashes =
      to_vector(hash_rows(input->view().select(keys), 3, default_stream(), input_)->view());
    expect_partitioned(input->view(), result, num_partitions, [&](std::size_t row) {
      return static_cast<std::size_t>(hashes[row] % num_partitions);
    });
    EXPECT_GT(temporary_.statistics().total_count, 0U);
  }
}

TEST_F(Partition, HashSpreadsDistinctKeysOverPartitions) {
  auto const input = make_input({data_type{type_id::INT64}}, 10000, 5);
  std::vector<std::size_t> const keys{1};  // the row ids: all distinct
  auto const result = hash_partition(input->view(), keys, 16, 0, default_stream(), mrs_);
  for (std::size_t partition = 0; partition < 16; ++partition) {
    std::size_t const rows = result.partition(partition).num_rows();
    EXPECT_GT(rows, 10000U / 16 * 8 / 10) << partition;
    EXPECT_LT(rows, 10000U / 16 * 12 / 10) << partition;
  }
}

TEST_F(Partition, HashValuesArePinned) {
  // A change of the hash breaks shuffles between versions; these values pin it.
  auto const ints =
    make_fixed_column<std::int64_t>(type_id::INT64, {0, 1, -1, 1234567890123}, {}, input_);
  auto const strings = make_string_column(
    {std::string{"spillway"}, std::string{""}, std::nullopt, std::string{"x"}}, input_);
  auto const one =
    to_vector(hash_rows(table_view{ints->view()}, 0, default_stream(), mrs_)->view());
  auto const two = to_vector(
    hash_rows(table_view{ints->view(), strings->view()}, 42, default_stream(), mrs_)->view());
  // 0xC77B3ABB6F87ACD9 is XXH3_64bits of eight zero bytes, seed 0 (xxHash's own test vector).
  EXPECT_EQ(one,
            (std::vector<std::uint64_t>{0xC77B3ABB6F87ACD9ULL,
                                        3439722301264460078ULL,
                                        5841669975847748627ULL,
                                        17403252914050227622ULL}));
  EXPECT_EQ(two,
            (std::vector<std::uint64_t>{8576445300627586834ULL,
                                        10491513599910324583ULL,
                                        17235709166963897145ULL,
                                        6205682273266357087ULL}));
}

TEST_F(Partition, EqualKeysHashEquallyWhateverTheirBits) {
  double const nan_a = std::numeric_limits<double>::quiet_NaN();
  double const nan_b = -std::numeric_limits<double>::signaling_NaN();
  auto const doubles =
    make_fixed_column<double>(type_id::FLOAT64, {0.0, -0.0, nan_a, nan_b, 1.0, 9.0}, {}, input_);
  auto const floats = make_fixed_column<float>(
    type_id::FLOAT32, {0.0F, -0.0F, std::nanf(""), -std::nanf("1"), 1.0F, 9.0F}, {}, input_);
  // Two null rows holding different garbage values, and a sliced string column.
  auto const nullable = make_fixed_column<std::int32_t>(
    type_id::INT32, {5, 6, 7, 8, 5, 6}, {false, false, true, true, true, true}, input_);
  auto const strings = make_string_column({std::string{"zz"},
                                           std::string{"ab"},
                                           std::string{"ab"},
                                           std::nullopt,
                                           std::string{""},
                                           std::string{"ab"}},
                                          input_);
  for (column_view const& view : {doubles->view(), floats->view()}) {
    auto const h = to_vector(hash_rows(table_view{view}, 0, default_stream(), mrs_)->view());
    EXPECT_EQ(h[0], h[1]) << "-0.0 and +0.0";
    EXPECT_EQ(h[2], h[3]) << "two NaNs";
    EXPECT_NE(h[0], h[4]);
    EXPECT_NE(h[2], h[5]);
  }
  auto const n =
    to_vector(hash_rows(table_view{nullable->view()}, 0, default_stream(), mrs_)->view());
  EXPECT_EQ(n[0], n[1]) << "nulls hash equally whatever their value bytes";
  EXPECT_NE(n[0], n[4]) << "a null differs from the value under it";
  EXPECT_EQ(
    n[4], to_vector(hash_rows(table_view{nullable->view()}, 0, default_stream(), mrs_)->view())[4]);
  column_view const sliced = slice(strings->view(), 1, 6);
  auto const s = to_vector(hash_rows(table_view{sliced}, 0, default_stream(), mrs_)->view());
  EXPECT_EQ(s[0], s[1]);
  EXPECT_EQ(s[0], s[4]);
  EXPECT_NE(s[2], s[3]) << "a null differs from the empty string";
}

TEST_F(Partition, RangeByQuantileSplittersHonorsOrderAndTies) {
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  auto const input = make_tied_input(3000);
  std::vector<std::size_t> const keys{0, 1};
  table_view const key_view = input->view().select(keys);
  auto const sorted         = sorted_sample(*input, keys, orders);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{2}, std::size_t{40}}) {
    auto const splitters =
      quantile_splitters(sorted->view(), num_partitions, default_stream(), input_);
    auto const result =
      range_partition(input->view(), keys, splitters->view(), orders, default_stream(), mrs_);
    expect_resources(result.rows->allocated_bytes());
    expect_partitioned(input->view(), result, num_partitions, [&](std::size_t row) {
      std::size_t not_greater = 0;  // splitters <= row
      for (std::size_t s = 0; s < splitters->num_rows(); ++s) {
        if (reference_compare(splitters->view(), s, key_view, row, orders) <= 0) {
          ++not_greater;
        }
      }
      return not_greater;
    });
  }
}

TEST_F(Partition, RangeRejectsUnsortedOrMismatchedSplitters) {
  auto const input    = make_input({data_type{type_id::INT32}}, 10, 1);
  auto const unsorted = make_fixed_column<std::int32_t>(type_id::INT32, {5, 3}, {}, input_);
  auto const wrong    = make_fixed_column<std::int64_t>(type_id::INT64, {3, 5}, {}, input_);
  std::vector<std::size_t> const keys{0};
  EXPECT_THROW((void)range_partition(
                 input->view(), keys, table_view{unsorted->view()}, {}, default_stream(), mrs_),
               invalid_argument);
  EXPECT_THROW((void)range_partition(
                 input->view(), keys, table_view{wrong->view()}, {}, default_stream(), mrs_),
               invalid_argument);
  EXPECT_THROW((void)hash_partition(input->view(), keys, 0, 0, default_stream(), mrs_),
               invalid_argument);
  std::vector<std::size_t> const missing{4};
  EXPECT_THROW((void)hash_partition(input->view(), missing, 2, 0, default_stream(), mrs_),
               invalid_argument);
}

TEST_F(Partition, ByMapChecksIdsAndGroupsStably) {
  auto const input = make_input({data_type{type_id::STRING}}, 6, 2);
  auto const map =
    make_fixed_column<std::uint32_t>(type_id::UINT32, {2, 0, 2, 1, 0, 2}, {}, input_);
  auto const result = partition_by_map(input->view(), map->view(), 4, default_stream(), mrs_);
  EXPECT_EQ(result.offsets, (std::vector<std::size_t>{0, 2, 3, 6, 6}));
  expect_partitioned(input->view(), result, 4, [&](std::size_t row) {
    return static_cast<std::size_t>(map->view().data<std::uint32_t>()[row]);
  });
  auto const bad =
    make_fixed_column<std::uint32_t>(type_id::UINT32, {0, 0, 0, 0, 0, 4}, {}, input_);
  EXPECT_THROW((void)partition_by_map(input->view(), bad->view(), 4, default_stream(), mrs_),
               invalid_argument);
  auto const signed_map =
    make_fixed_column<std::int32_t>(type_id::INT32, {0, 0, 0, 0, 0, 0}, {}, input_);
  EXPECT_THROW((void)partition_by_map(input->view(), signed_map->view(), 4, default_stream(), mrs_),
               invalid_argument);
}

TEST_F(Partition, EmptyInputGivesEmptyPartitions) {
  auto const input = make_input(testing::all_types(), 0, 1);
  std::vector<std::size_t> const keys{0, 12};
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{1000}}) {
    auto const result =
      hash_partition(input->view(), keys, num_partitions, 0, default_stream(), mrs_);
    EXPECT_EQ(result.num_partitions(), num_partitions);
    EXPECT_EQ(result.rows->num_rows(), 0U);
    EXPECT_EQ(result.rows->num_columns(), input->num_columns());
    EXPECT_TRUE(std::all_of(result.offsets.begin(), result.offsets.end(), [](std::size_t offset) {
      return offset == 0;
    }));
    EXPECT_EQ(result.partitions().size(), num_partitions);
  }
}

// ---- partition_and_pack: one pass, the same bytes as partitioning and then packing ----

/// The bytes of `bytes` bytes at `data`, for comparison.
std::vector<std::uint8_t> bytes_of(void const* data, std::size_t bytes) {
  auto const* begin = static_cast<std::uint8_t const*>(data);
  return bytes == 0 ? std::vector<std::uint8_t>{} : std::vector<std::uint8_t>(begin, begin + bytes);
}

class PartitionAndPack : public Partition {
 protected:
  /// Checks that `fused` holds, partition by partition, what `pack(two_step.partition(p))` makes.
  void expect_same_as_two_step(std::vector<packed_partition> const& fused,
                               partitioned_table const& two_step,
                               std::size_t data_offset) {
    ASSERT_EQ(fused.size(), two_step.num_partitions());
    for (std::size_t partition = 0; partition < fused.size(); ++partition) {
      SCOPED_TRACE("partition " + std::to_string(partition));
      table_view const rows       = two_step.partition(partition);
      packed_columns const packed = pack(rows, default_stream(), input_);
      packed_partition const& got = fused[partition];
      EXPECT_EQ(got.num_rows, rows.num_rows());
      EXPECT_EQ(got.metadata, packed.metadata);
      ASSERT_EQ(got.frame.size(), data_offset + packed.data.size());
      EXPECT_EQ(bytes_of(got.frame.data(), data_offset), std::vector<std::uint8_t>(data_offset, 0));
      EXPECT_EQ(bytes_of(static_cast<std::uint8_t const*>(got.frame.data()) + data_offset,
                         packed.data.size()),
                bytes_of(packed.data.data(), packed.data.size()));
      // And the packed partition reads back as the rows.
      if (got.frame.size() > data_offset) {
        SPILLWAY_EXPECT_TABLES_EQUAL(
          rows,
          unpack(got.metadata,
                 static_cast<std::uint8_t const*>(got.frame.data()) + data_offset,
                 got.frame.size() - data_offset,
                 got.frame.kind()));
      }
    }
  }

  /// Hash-partitions `input` both ways and compares them.
  void expect_hash_matches(table_view const& input,
                           std::vector<std::size_t> const& keys,
                           std::size_t num_partitions,
                           std::size_t data_offset) {
    SCOPED_TRACE(std::to_string(input.num_rows()) + " rows, " + std::to_string(num_partitions) +
                 " partitions, data offset " + std::to_string(data_offset));
    auto const two_step = hash_partition(input, keys, num_partitions, 3, default_stream(), input_);
    std::size_t frames  = 0;
    {
      auto const fused = hash_partition_and_pack(
        input, keys, num_partitions, 3, data_offset, default_stream(), mrs_);
      for (auto const& part : fused) {
        frames += part.frame.size();
      }
      expect_resources(frames);
      expect_same_as_two_step(fused, two_step, data_offset);
    }
    expect_resources(0);
  }
};

TEST_F(PartitionAndPack, HashMatchesTwoStepForEveryTypeWithNulls) {
  auto const types = testing::all_types();
  std::vector<std::size_t> keys(types.size());
  std::iota(keys.begin(), keys.end(), 0);
  // 40000 rows are scattered by two threads, 2000 by one.
  for (std::size_t const rows : {std::size_t{2000}, std::size_t{40000}}) {
    auto const input = make_input(types, rows, 21);
    for (std::size_t const num_partitions :
         {std::size_t{1}, std::size_t{7}, std::size_t{64}, std::size_t{1000}}) {
      expect_hash_matches(input->view(), keys, num_partitions, 0);
    }
    expect_hash_matches(input->view(), {12}, 5, 128);  // by the strings, with room for a header
  }
}

TEST_F(PartitionAndPack, HashMatchesTwoStepOnSlicedInputs) {
  auto const types = testing::all_types();
  auto const input = make_input(types, 40000, 4);
  std::vector<std::size_t> const keys{4, 12};
  // Offsets that are not multiples of 8 (mask bits) nor of the two-thread split.
  for (auto const& [begin, end] : {std::pair<std::size_t, std::size_t>{3, 39995},
                                   std::pair<std::size_t, std::size_t>{17001, 17100},
                                   std::pair<std::size_t, std::size_t>{5, 5}}) {
    table_view const sliced = slice(input->view(), begin, end);
    for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{13}, std::size_t{1000}}) {
      expect_hash_matches(sliced, keys, num_partitions, 64);
    }
  }
}

TEST_F(PartitionAndPack, HashMatchesTwoStepWithoutNullsAndWithMasksButNoNulls) {
  auto no_nulls = random_table(testing::all_types(), 30000, 8, 0.0, input_);
  std::vector<std::size_t> keys(no_nulls->num_columns());
  std::iota(keys.begin(), keys.end(), 0);
  expect_hash_matches(no_nulls->view(), keys, 64, 0);
  // A mask without nulls: gather drops it, and so must the packed partitions.
  std::vector<std::int32_t> values(30000);
  std::iota(values.begin(), values.end(), 0);
  auto const masked = make_fixed_column<std::int32_t>(
    type_id::INT32, values, std::vector<bool>(values.size(), true), input_);
  auto const strings = make_string_column({"a", std::nullopt, "ccc", ""}, input_, true);
  table_view const both{{masked->view()}};
  EXPECT_TRUE(both.column(0).nullable());
  expect_hash_matches(both, {0}, 9, 0);
  expect_hash_matches(table_view{{strings->view()}}, {0}, 3, 0);
}

TEST_F(PartitionAndPack, HashLeavesEmptyPartitionsEmpty) {
  auto const empty = make_input(testing::all_types(), 0, 1);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{1000}}) {
    expect_hash_matches(empty->view(), {0, 12}, num_partitions, 0);
  }
  // One distinct key: one partition has every row, the others none.
  auto const same = make_fixed_column<std::int64_t>(
    type_id::INT64, std::vector<std::int64_t>(20000, 42), {}, input_);
  auto const strings = testing::random_column(data_type{type_id::STRING}, 20000, 5, 0.1, input_);
  table_view const input{{same->view(), strings->view()}};
  expect_hash_matches(input, {0}, 16, 0);
}

TEST_F(PartitionAndPack, RangeMatchesTwoStep) {
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  auto const input = make_tied_input(30000);
  std::vector<std::size_t> const keys{0, 1};
  auto const sorted = sorted_sample(*input, keys, orders);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{2}, std::size_t{40}}) {
    auto const splitters =
      quantile_splitters(sorted->view(), num_partitions, default_stream(), input_);
    auto const two_step =
      range_partition(input->view(), keys, splitters->view(), orders, default_stream(), input_);
    auto const fused = range_partition_and_pack(
      input->view(), keys, splitters->view(), orders, 64, default_stream(), mrs_);
    expect_same_as_two_step(fused, two_step, 64);
  }
  auto const unsorted = make_fixed_column<std::int16_t>(type_id::INT16, {5, 3}, {}, input_);
  std::vector<std::size_t> const first{0};
  EXPECT_THROW(
    (void)range_partition_and_pack(
      input->view(), first, table_view{{unsorted->view()}}, {}, 0, default_stream(), mrs_),
    invalid_argument);
}

TEST_F(PartitionAndPack, RejectsBadArguments) {
  auto const input = make_input({data_type{type_id::INT32}}, 6, 1);
  std::vector<std::size_t> const keys{0};
  EXPECT_THROW((void)hash_partition_and_pack(input->view(), keys, 0, 0, 0, default_stream(), mrs_),
               invalid_argument);
  EXPECT_THROW((void)hash_partition_and_pack(input->view(), keys, 2, 0, 32, default_stream(), mrs_),
               invalid_argument);
  auto const map =
    make_fixed_column<std::uint32_t>(type_id::UINT32, {0, 1, 0, 1, 0, 2}, {}, input_);
  EXPECT_THROW((void)pack_partitions(input->view(), map->view(), 2, 0, default_stream(), mrs_),
               invalid_argument);
  auto const signed_map =
    make_fixed_column<std::int32_t>(type_id::INT32, {0, 0, 0, 0, 0, 0}, {}, input_);
  EXPECT_THROW(
    (void)pack_partitions(input->view(), signed_map->view(), 2, 0, default_stream(), mrs_),
    invalid_argument);
  auto const packed = pack_partitions(input->view(), map->view(), 3, 0, default_stream(), mrs_);
  EXPECT_EQ(packed[0].num_rows, 3U);
  EXPECT_EQ(packed[1].num_rows, 2U);
  EXPECT_EQ(packed[2].num_rows, 1U);
}

TEST_F(Partition, BinaryKeysHashAsTheirBytesLikeStrings) {
  // Equal bytes hash equally, in a BINARY column as in a STRING one, whatever row they are in.
  std::vector<std::optional<std::string>> values;
  for (std::size_t row = 0; row < 500; ++row) {
    values.push_back(row % 9 == 4 ? std::nullopt
                                  : std::optional<std::string>{std::string(row % 7, '\x80') +
                                                               std::string(1, '\0')});
  }
  auto const binary  = testing::make_binary_column(values, input_);
  auto const strings = make_string_column(values, input_);
  auto const binary_hashes =
    to_vector(hash_rows(table_view{binary->view()}, 5, default_stream(), input_)->view());
  auto const string_hashes =
    to_vector(hash_rows(table_view{strings->view()}, 5, default_stream(), input_)->view());
  EXPECT_EQ(binary_hashes, string_hashes);
  for (std::size_t row = 0; row < values.size(); ++row) {
    EXPECT_EQ(binary_hashes[row], binary_hashes[row % 63]) << row;  // the same value
  }
  std::map<std::string, std::uint64_t> hash_of;
  for (std::size_t row = 0; row < values.size(); ++row) {
    if (values[row]) {
      hash_of[*values[row]] = binary_hashes[row];
    }
  }
  std::vector<std::size_t> const keys{0};
  auto const result =
    hash_partition(table_view{binary->view()}, keys, 4, 5, default_stream(), mrs_);
  for (std::size_t partition = 0; partition < 4; ++partition) {
    auto const part = result.partition(partition).column(0);
    EXPECT_EQ(part.type(), data_type{type_id::BINARY});
    for (std::size_t row = 0; row < part.size(); ++row) {
      if (part.is_valid(row)) {
        EXPECT_EQ(hash_of.at(std::string{part.string_at(row)}) % 4, partition);
      }
    }
  }
}

}  // namespace
}  // namespace spillway
