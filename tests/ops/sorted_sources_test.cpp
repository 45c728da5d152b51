/**
 * @file sorted_sources_test.cpp
 * @brief `sorted_sources` and `sorted_key_values`: the stable order of several tables of keys,
 * and key-value sorts, for every pool size.
 */
#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/reference_order.hpp"
#include "ops/sort_test_support.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::describe;
using testing::every_column_order;
using testing::int64_keys;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_column;
using testing::random_table;
using testing::reference_sorted_order;
using testing::to_vector;

class SortedSources : public testing::ops_fixture {
 public:
  /// sorted_sources of `keys` cut at `cuts` against the stable reference order of all of it.
  void check(table_view const& keys,
             std::vector<std::size_t> const& cuts,
             sort_order const& orders) {
    std::vector<table_view> parts;
    std::vector<std::size_t> starts;
    std::size_t begin = 0;
    for (std::size_t const cut : cuts) {
      parts.push_back(slice(keys, begin, cut));
      starts.push_back(begin);
      begin = cut;
    }
    parts.push_back(slice(keys, begin, keys.num_rows()));
    starts.push_back(begin);
    std::vector<std::uint64_t> const expected = reference_sorted_order(keys, orders);
    auto const result = detail::sorted_sources(parts, orders, default_stream(), mrs_);
    expect_resources(result->allocated_bytes());
    std::vector<std::uint64_t> const ids = to_vector(result->view());
    ASSERT_EQ(ids.size(), expected.size());
    std::uint64_t const row_mask = (std::uint64_t{1} << detail::SOURCE_ROW_BITS) - 1;
    for (std::size_t position = 0; position < ids.size(); ++position) {
      std::size_t const input = ids[position] >> detail::SOURCE_ROW_BITS;
      ASSERT_LT(input, parts.size());
      std::size_t const row = ids[position] & row_mask;
      ASSERT_LT(row, parts[input].num_rows());
      // Stable: ties in input order, so the ids name exactly the reference's rows.
      ASSERT_EQ(starts[input] + row, expected[position]) << "position " << position;
    }
  }
};

TEST_F(SortedSources, EveryFixedWidthTypeWithNullsAcrossTablesIsAStableSort) {
  for (data_type const type : testing::all_types()) {
    if (!is_fixed_width(type) || size_of(type) + 1 > detail::MAX_PREFIX_BYTES) {
      continue;  // (a DECIMAL256 key's prefix is never complete: `sorted_sources` refuses it)
    }
    SCOPED_TRACE(to_string(type));
    auto const key = random_column(type, 1500, 31, 0.15, input_);
    for (auto const& key_order : every_column_order()) {
      SCOPED_TRACE(describe(sort_order{key_order}));
      // An empty table first and in the middle, and one of a single row.
      check(table_view{key->view()}, {0, 400, 400, 401, 1000}, sort_order{key_order});
    }
  }
}

TEST_F(SortedSources, TwoKeysManyTiesAboveTheParallelThreshold) {
  std::size_t const rows = PARALLEL_SORT_MIN_ROWS + 777;
  auto const first =
    make_fixed_column<std::int64_t>(type_id::INT64, int64_keys("few-distinct", rows), {}, input_);
  auto const second = random_column(type_id::INT32, rows, 5, 0.1, input_);
  table_view const keys{first->view(), second->view()};
  check(keys,
        {rows / 3, rows / 2},
        sort_order{{order::ASCENDING, null_order::BEFORE}, {order::DESCENDING, null_order::AFTER}});
  auto const equal =
    make_fixed_column<std::int64_t>(type_id::INT64, int64_keys("all-equal", rows), {}, input_);
  check(table_view{equal->view()}, {rows / 4, rows / 2, 3 * rows / 4}, sort_order{});
}

TEST_F(SortedSources, BucketedAcrossTablesIsAStableSort) {
  // Above 2 MiB of records the rows of all tables are bucketed together; ties stay in table and
  // row order.
  std::size_t const rows = 200000;
  std::mt19937_64 engine{17};
  std::vector<std::int64_t> values(rows);
  for (auto& value : values) {
    value = static_cast<std::int64_t>(engine() % 20000) - 10000;
  }
  auto const key = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
  check(table_view{key->view()},
        {rows / 5, rows / 5, rows / 2, rows / 2 + 1, 4 * rows / 5},
        sort_order{{order::DESCENDING, null_order::BEFORE}});
}

TEST_F(SortedSources, EightByteIntegerKeysComeBackDecodedInSortedOrder) {
  // Above the parallel threshold (both halves' merges write the keys), in every direction, the
  // extremes included; the decoded key column equals the keys gathered by the sorted ids.
  std::size_t const rows = PARALLEL_SORT_MIN_ROWS + 999;
  std::mt19937_64 engine{41};
  std::vector<std::int64_t> signed_values(rows);
  std::vector<std::uint64_t> unsigned_values(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    signed_values[row]   = row % 97 == 0   ? std::numeric_limits<std::int64_t>::min()
                           : row % 89 == 0 ? std::numeric_limits<std::int64_t>::max()
                                           : static_cast<std::int64_t>(engine());
    unsigned_values[row] = row % 83 == 0 ? std::numeric_limits<std::uint64_t>::max() : engine();
  }
  auto const int64_key = make_fixed_column<std::int64_t>(type_id::INT64, signed_values, {}, input_);
  auto const timestamp_key =
    make_fixed_column<std::int64_t>(type_id::TIMESTAMP, signed_values, {}, input_);
  auto const uint64_key =
    make_fixed_column<std::uint64_t>(type_id::UINT64, unsigned_values, {}, input_);
  // The keys gathered by the sorted ids: what the decoded columns must equal.
  auto const gathered = [&](std::vector<table_view> const& parts, column const& ids) {
    return detail::gather_sources_in_parallel(parts,
                                              ids.view().data<std::uint64_t>(),
                                              rows,
                                              detail::SOURCE_ROW_BITS,
                                              default_stream(),
                                              memory_resources{input_});
  };
  for (column const* key : {int64_key.get(), timestamp_key.get(), uint64_key.get()}) {
    for (auto const direction : {order::ASCENDING, order::DESCENDING}) {
      SCOPED_TRACE(to_string(key->type()) + (direction == order::ASCENDING ? " asc" : " desc"));
      table_view const whole{key->view()};
      std::vector<table_view> const parts{slice(whole, 0, rows / 3), slice(whole, rows / 3, rows)};
      sort_order const orders{{direction, null_order::BEFORE}};
      std::vector<std::unique_ptr<column>> sorted_keys;
      auto const ids = detail::sorted_sources(parts, orders, default_stream(), mrs_, &sorted_keys);
      ASSERT_EQ(sorted_keys.size(), 1U);
      auto const& sorted_key = sorted_keys.front();
      ASSERT_NE(sorted_key, nullptr);
      expect_resources(ids->allocated_bytes() + sorted_key->allocated_bytes());
      SPILLWAY_EXPECT_TABLES_EQUAL(gathered(parts, *ids)->view(), table_view{sorted_key->view()});
    }
  }
  // Several keys: each 8-byte integer or timestamp in a word of its own comes back, in both
  // directions, from both halves' merges.
  for (auto const direction : {order::ASCENDING, order::DESCENDING}) {
    table_view const whole{int64_key->view(), uint64_key->view(), timestamp_key->view()};
    std::vector<table_view> const parts{slice(whole, 0, rows / 2), slice(whole, rows / 2, rows)};
    sort_order const orders{{direction, null_order::BEFORE},
                            {order::ASCENDING, null_order::BEFORE},
                            {direction, null_order::AFTER}};
    std::vector<std::unique_ptr<column>> sorted_keys;
    auto const ids = detail::sorted_sources(parts, orders, default_stream(), mrs_, &sorted_keys);
    ASSERT_EQ(sorted_keys.size(), 3U);
    auto const expected = gathered(parts, *ids);
    for (std::size_t key = 0; key < 3; ++key) {
      ASSERT_NE(sorted_keys[key], nullptr) << "key " << key;
      SPILLWAY_EXPECT_TABLES_EQUAL(table_view{expected->view().column(key)},
                                   table_view{sorted_keys[key]->view()});
    }
  }
  // Keys that do not come back from their prefixes bit for bit, or not whole, or not in a word
  // of their own: not decoded.
  auto const floats      = random_column(type_id::FLOAT64, 500, 3, 0.0, input_);
  auto const narrow      = random_column(type_id::INT32, 500, 4, 0.0, input_);
  auto const nullable    = random_column(type_id::INT64, 500, 5, 0.2, input_);
  column_view const wide = slice(int64_key->view(), 0, 500);
  struct decoded_case {
    table_view keys;
    std::vector<bool> decoded;
  };
  std::vector<decoded_case> const cases{
    {table_view{floats->view()}, {false}},
    {table_view{narrow->view()}, {false}},
    {table_view{nullable->view()}, {false}},
    {table_view{narrow->view(), wide}, {false, false}},    // at byte 4
    {table_view{nullable->view(), wide}, {false, false}},  // null bytes
    {table_view{wide, floats->view()}, {true, false}},
    {table_view{wide, narrow->view()}, {true, false}}};
  for (auto const& c : cases) {
    std::vector<table_view> const parts{slice(c.keys, 0, 500)};
    std::vector<std::unique_ptr<column>> sorted_keys(5);
    (void)detail::sorted_sources(parts, {}, default_stream(), mrs_, &sorted_keys);
    ASSERT_EQ(sorted_keys.size(), c.decoded.size());
    for (std::size_t key = 0; key < c.decoded.size(); ++key) {
      EXPECT_EQ(sorted_keys[key] != nullptr, c.decoded[key]) << "key " << key;
    }
  }
}

class SortedKeyValues : public testing::ops_fixture {
 public:
  /// sorted_key_values of `keys` and `values` cut at `cuts` against a stable sort of the rows.
  template <typename V>
  void check(std::vector<std::int64_t> const& keys,
             std::vector<V> const& values,
             data_type value_type,
             std::vector<std::size_t> const& cuts,
             order direction) {
    auto const key_column   = make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, input_);
    auto const value_column = make_fixed_column<V>(value_type, values, {}, input_);
    std::vector<table_view> key_tables;
    std::vector<column_view> value_columns;
    std::size_t begin = 0;
    for (std::size_t index = 0; index <= cuts.size(); ++index) {
      std::size_t const end = index < cuts.size() ? cuts[index] : keys.size();
      key_tables.push_back(slice(table_view{key_column->view()}, begin, end));
      value_columns.push_back(slice(value_column->view(), begin, end));
      begin = end;
    }
    sort_order const orders{{direction, null_order::BEFORE}};
    ASSERT_TRUE(detail::sorts_key_values(key_tables, orders, value_columns));
    std::vector<std::size_t> expected(keys.size());
    for (std::size_t row = 0; row < keys.size(); ++row) {
      expected[row] = row;
    }
    std::stable_sort(expected.begin(), expected.end(), [&](std::size_t lhs, std::size_t rhs) {
      return direction == order::ASCENDING ? keys[lhs] < keys[rhs] : keys[lhs] > keys[rhs];
    });
    auto const [sorted_keys, sorted_values] =
      detail::sorted_key_values(key_tables, orders, value_columns, default_stream(), mrs_);
    expect_resources(sorted_keys->allocated_bytes() + sorted_values->allocated_bytes());
    ASSERT_EQ(sorted_keys->size(), keys.size());
    ASSERT_EQ(sorted_values->size(), keys.size());
    std::int64_t const* got_keys = sorted_keys->view().data<std::int64_t>();
    V const* got_values          = sorted_values->view().data<V>();
    for (std::size_t position = 0; position < keys.size(); ++position) {
      ASSERT_EQ(got_keys[position], keys[expected[position]]) << "position " << position;
      ASSERT_EQ(got_values[position], values[expected[position]]) << "position " << position;
    }
  }
};

TEST_F(SortedKeyValues, IsAStableSortAtEverySizeAndShape) {
  // Insertion (under 48 rows), LSD (under 256), one radix sort, buckets on two threads (over
  // 2 MiB of records) and the halves with their merge (a heavy key); many ties, so that a
  // value out of its row's order shows.
  for (std::size_t const rows : {std::size_t{0},
                                 std::size_t{1},
                                 std::size_t{40},
                                 std::size_t{200},
                                 std::size_t{5000},
                                 std::size_t{200000}}) {
    for (bool const heavy : {false, true}) {
      SCOPED_TRACE(std::to_string(rows) + (heavy ? " heavy" : " spread"));
      std::mt19937_64 engine{rows + (heavy ? 1 : 0)};
      std::vector<std::int64_t> keys(rows);
      std::vector<std::int64_t> values(rows);
      for (std::size_t row = 0; row < rows; ++row) {
        auto const random = static_cast<std::int64_t>(engine() % (rows / 8 + 2)) - 100;
        keys[row]         = heavy && engine() % 10 != 0 ? 5 : random;
        // Not in row order: a sort of (key, value) pairs would reorder ties.
        values[row] = static_cast<std::int64_t>(engine() % 1000000);
      }
      std::vector<std::size_t> const cuts{rows / 3, rows / 3, rows / 2};
      check(keys, values, data_type{type_id::INT64}, cuts, order::ASCENDING);
      check(keys, values, data_type{type_id::INT64}, cuts, order::DESCENDING);
    }
  }
}

TEST_F(SortedKeyValues, NarrowValuesAndExtremeKeys) {
  std::size_t const rows = 150000;
  std::mt19937_64 engine{5};
  std::vector<std::int64_t> keys(rows);
  std::vector<std::int32_t> ints(rows);
  std::vector<double> doubles(rows);
  std::vector<std::uint8_t> bytes(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    keys[row]    = row % 101 == 0   ? std::numeric_limits<std::int64_t>::min()
                   : row % 103 == 0 ? std::numeric_limits<std::int64_t>::max()
                                    : static_cast<std::int64_t>(engine());
    ints[row]    = static_cast<std::int32_t>(row * 7);
    doubles[row] = static_cast<double>(row) / 3.0;
    bytes[row]   = static_cast<std::uint8_t>(row % 251);
  }
  check(keys, ints, data_type{type_id::INT32}, {rows / 2}, order::ASCENDING);
  check(keys, doubles, data_type{type_id::FLOAT64}, {}, order::DESCENDING);
  check(keys, bytes, data_type{type_id::UINT8}, {1000, 90000}, order::ASCENDING);
}

TEST_F(SortedKeyValues, SaysWhichTablesItSorts) {
  auto const key = make_fixed_column<std::int64_t>(type_id::INT64, {3, 1, 2}, {}, input_);
  auto const nulls =
    make_fixed_column<std::int64_t>(type_id::INT64, {3, 1, 2}, {true, false, true}, input_);
  auto const narrow = make_fixed_column<std::int32_t>(type_id::INT32, {3, 1, 2}, {}, input_);
  auto const text   = make_string_column({"a", "b", "c"}, input_);
  std::vector<table_view> const keys{table_view{key->view()}};
  std::vector<column_view> const values{narrow->view()};
  sort_order const orders{{order::ASCENDING, null_order::BEFORE}};
  EXPECT_TRUE(detail::sorts_key_values(keys, orders, values));
  // A key with nulls (a null byte makes the prefix 9 bytes), a 4-byte key, two key columns.
  EXPECT_FALSE(
    detail::sorts_key_values(std::vector<table_view>{table_view{nulls->view()}}, orders, values));
  EXPECT_FALSE(
    detail::sorts_key_values(std::vector<table_view>{table_view{narrow->view()}}, orders, values));
  EXPECT_FALSE(detail::sorts_key_values(
    std::vector<table_view>{table_view{key->view(), key->view()}},
    sort_order{{order::ASCENDING, null_order::BEFORE}, {order::ASCENDING, null_order::BEFORE}},
    values));
  // Values with nulls or of strings; tables and value columns that do not pair up.
  EXPECT_FALSE(detail::sorts_key_values(keys, orders, std::vector<column_view>{nulls->view()}));
  EXPECT_FALSE(detail::sorts_key_values(keys, orders, std::vector<column_view>{text->view()}));
  EXPECT_FALSE(detail::sorts_key_values(keys, orders, std::vector<column_view>{}));
  EXPECT_THROW((void)detail::sorted_key_values(
                 keys, orders, std::vector<column_view>{text->view()}, default_stream(), mrs_),
               invalid_argument);
}

TEST_F(SortedSources, RejectsKeysWithoutACompletePrefix) {
  auto const strings = random_column(type_id::STRING, 100, 3, 0.0, input_, 5);
  std::vector<table_view> const parts{table_view{strings->view()}};
  EXPECT_THROW((void)detail::sorted_sources(parts, {}, default_stream(), mrs_), invalid_argument);
  std::vector<table_view> const none;
  EXPECT_THROW((void)detail::sorted_sources(none, {}, default_stream(), mrs_), invalid_argument);
}

// ---- the same results for every worker pool size ----

using testing::POOL_SIZES;
using testing::worker_threads_guard;

class ConcurrentSortPoolSizes : public SortedSources {};

TEST_F(ConcurrentSortPoolSizes, SortedSourcesAreTheStableOrderForEveryPoolSize) {
  // Bucketed (random keys above 2 MiB of records), declined for a heavy key (halves, then a
  // merge in up to 12 parts), sorted already (declined: halves and merge), and below the bucket
  // threshold (halves and a merge in up to 4 parts): each cut into tables.
  std::size_t const rows = 400000;
  std::mt19937_64 engine{53};
  std::vector<std::int64_t> random_keys(rows);
  std::vector<std::int64_t> heavy_keys(rows);
  std::vector<std::int64_t> ascending_keys(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    random_keys[row]    = static_cast<std::int64_t>(engine() % 100000) - 50000;
    heavy_keys[row]     = row % 2 == 0 ? 7 : static_cast<std::int64_t>(engine() % 1000);
    ascending_keys[row] = static_cast<std::int64_t>(row / 3);
  }
  auto const random_key = make_fixed_column<std::int64_t>(type_id::INT64, random_keys, {}, input_);
  auto const heavy_key  = make_fixed_column<std::int64_t>(type_id::INT64, heavy_keys, {}, input_);
  auto const ascending_key =
    make_fixed_column<std::int64_t>(type_id::INT64, ascending_keys, {}, input_);
  std::vector<std::size_t> const cuts{rows / 7, rows / 7, rows / 2, rows / 2 + 1, rows - 5};
  for (std::size_t const threads : POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    worker_threads_guard const pool{threads};
    check(table_view{random_key->view()}, cuts, sort_order{});
    check(table_view{heavy_key->view()}, cuts, sort_order{{order::DESCENDING, null_order::AFTER}});
    check(table_view{ascending_key->view()}, cuts, sort_order{});
    check(slice(table_view{random_key->view()}, 0, 120000), {60000}, sort_order{});
  }
}

TEST_F(ConcurrentSortPoolSizes, SortedTablesAreTheSameForEveryPoolSize) {
  // The whole sort (order and gather of every column type) against one thread's, byte for byte.
  std::size_t const rows = 150000;
  auto const input       = random_table(testing::all_types(), rows, 71, 0.1, input_);
  std::vector<std::size_t> const key_columns{0, 1};
  auto const keys = input->view().select(key_columns);
  std::unique_ptr<table> one_thread;
  for (std::size_t const threads : POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    worker_threads_guard const pool{threads};
    auto sorted = sort(input->view(), keys, {}, sort_stability::STABLE, default_stream(), mrs_);
    if (one_thread == nullptr) {
      one_thread = std::move(sorted);
    } else {
      SPILLWAY_EXPECT_TABLES_EQUAL(one_thread->view(), sorted->view());
    }
  }
}

}  // namespace
}  // namespace spillway
