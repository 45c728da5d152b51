#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/reference_order.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_column;
using testing::random_table;
using testing::reference_compare;
using testing::reference_sorted_order;
using testing::to_vector;

/// Every combination of direction and null placement for one key.
std::vector<column_order> every_column_order() {
  return {{order::ASCENDING, null_order::BEFORE},
          {order::ASCENDING, null_order::AFTER},
          {order::DESCENDING, null_order::BEFORE},
          {order::DESCENDING, null_order::AFTER}};
}

std::string describe(sort_order const& orders) {
  std::string text;
  for (auto const& key : orders) {
    text += key.direction == order::ASCENDING ? "asc" : "desc";
    text += key.nulls == null_order::BEFORE ? "/nulls-first " : "/nulls-last ";
  }
  return text;
}

class SortedOrderTest : public testing::ops_fixture {
 public:
  /// sorted_order under both stabilities against std::stable_sort with the reference order.
  void check(table_view const& keys, sort_order const& orders) {
    std::vector<std::uint64_t> const expected = reference_sorted_order(keys, orders);
    for (auto stability : {sort_stability::STABLE, sort_stability::UNSTABLE}) {
      SCOPED_TRACE(describe(orders) +
                   (stability == sort_stability::STABLE ? "stable" : "unstable"));
      auto const result = sorted_order(keys, orders, stability, default_stream(), mrs_);
      expect_resources(result->allocated_bytes());
      std::vector<std::uint64_t> const actual = to_vector(result->view());
      ASSERT_EQ(actual.size(), expected.size());
      if (stability == sort_stability::STABLE) {
        ASSERT_EQ(actual, expected);
        continue;
      }
      std::vector<bool> seen(actual.size(), false);
      for (std::size_t position = 0; position < actual.size(); ++position) {
        ASSERT_LT(actual[position], actual.size());
        ASSERT_FALSE(seen[actual[position]]) << "row " << actual[position] << " twice";
        seen[actual[position]] = true;
        ASSERT_EQ(reference_compare(keys, actual[position], keys, expected[position], orders), 0)
          << "position " << position << ": row " << actual[position] << " where row "
          << expected[position] << " belongs";
      }
    }
  }

  /// `check` under every direction and null placement of a single key column.
  void check_every_order(column_view const& key) {
    for (auto const& key_order : every_column_order()) {
      check(table_view{key}, sort_order{key_order});
    }
  }
};

class SortedOrder : public SortedOrderTest {};
class ConcurrentSortedOrder : public SortedOrderTest {};

TEST_F(SortedOrder, EveryTypeRandomWithNulls) {
  for (data_type const type : testing::all_types()) {
    SCOPED_TRACE(to_string(type));
    auto const key = random_column(type, 1500, 7, 0.15, input_);
    check_every_order(key->view());
  }
}

TEST_F(SortedOrder, EveryTypeRandomWithoutNulls) {
  for (data_type const type : testing::all_types()) {
    SCOPED_TRACE(to_string(type));
    auto const key = random_column(type, 1500, 11, 0.0, input_);
    check_every_order(key->view());
  }
}

TEST_F(SortedOrder, EveryTypeNarrowRangeManyTies) {
  // Few distinct values (and a mask without nulls) make long runs of ties.
  for (data_type const type : testing::all_types()) {
    SCOPED_TRACE(to_string(type));
    std::unique_ptr<column> key;
    if (!is_fixed_width(type)) {
      key = random_column(type, 2000, 3, 0.0, input_, 1);
    } else {
      key = visit_fixed_width(type, [&]<typename T>() {
        std::vector<T> values;
        std::vector<bool> validity;
        for (std::size_t row = 0; row < 2000; ++row) {
          auto const value = static_cast<std::int64_t>((row * 7919) % 3);
          if constexpr (std::is_same_v<T, decimal128_storage>) {
            values.push_back(T{static_cast<std::uint64_t>(value), -value});
          } else if constexpr (std::is_same_v<T, decimal256_storage>) {
            values.push_back(T{{0, 0, static_cast<std::uint64_t>(value), 0}});
          } else {
            values.push_back(static_cast<T>(value));
          }
          validity.push_back(true);
        }
        return make_fixed_column<T>(type, values, validity, input_);
      });
    }
    check_every_order(key->view());
  }
}

/// INT64 keys of `rows` rows laid out by `shape`.
std::vector<std::int64_t> int64_keys(std::string const& shape, std::size_t rows) {
  std::mt19937_64 engine{shape.size() * 31 + rows};
  std::vector<std::int64_t> values(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    auto const index = static_cast<std::int64_t>(row);
    if (shape == "random") {
      values[row] = static_cast<std::int64_t>(engine());
    } else if (shape == "sorted") {
      values[row] = index * 3 - 1000;
    } else if (shape == "sorted-but-last") {
      // In order but for the last row, which belongs first: the in-order check must say no.
      values[row] = row + 1 == rows ? -5000 : index * 3 - 1000;
    } else if (shape == "reverse") {
      values[row] = 1000 - index * 3;
    } else if (shape == "all-equal") {
      values[row] = 42;
    } else if (shape == "few-distinct") {
      values[row] = static_cast<std::int64_t>(engine() % 5) - 2;
    } else {  // "skewed": 90% of the rows on one key
      values[row] = engine() % 10 == 0 ? static_cast<std::int64_t>(engine()) : -7;
    }
  }
  return values;
}

std::vector<std::string> const SHAPES{
  "random", "sorted", "sorted-but-last", "reverse", "all-equal", "few-distinct", "skewed"};

TEST_F(SortedOrder, Int64Distributions) {
  for (auto const& shape : SHAPES) {
    SCOPED_TRACE(shape);
    auto const values = int64_keys(shape, 3000);
    auto const plain  = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
    check_every_order(plain->view());
    std::vector<bool> validity;
    for (std::size_t row = 0; row < values.size(); ++row) {
      validity.push_back(row % 9 != 4);
    }
    auto const nullable = make_fixed_column<std::int64_t>(type_id::INT64, values, validity, input_);
    check_every_order(nullable->view());
  }
}

TEST_F(ConcurrentSortedOrder, Int64DistributionsAboveTheParallelThreshold) {
  std::size_t const rows = PARALLEL_SORT_MIN_ROWS + 4321;
  for (auto const& shape : SHAPES) {
    SCOPED_TRACE(shape);
    auto const values = int64_keys(shape, rows);
    std::vector<bool> validity;
    for (std::size_t row = 0; row < values.size(); ++row) {
      validity.push_back(row % 13 != 0);
    }
    auto const key = make_fixed_column<std::int64_t>(type_id::INT64, values, validity, input_);
    check(table_view{key->view()}, sort_order{{order::DESCENDING, null_order::AFTER}});
  }
}

TEST_F(ConcurrentSortedOrder, StringsAndMultiKeyAboveTheParallelThreshold) {
  std::size_t const rows = PARALLEL_SORT_MIN_ROWS + 999;
  auto const strings     = random_column(type_id::STRING, rows, 5, 0.05, input_, 30);
  check(table_view{strings->view()}, sort_order{{order::ASCENDING, null_order::AFTER}});
  // A short-string key with many ties, then a float: the prefix is incomplete, so equal
  // prefixes are resolved by full comparisons in each half and in the merge.
  auto const short_strings = random_column(type_id::STRING, rows, 6, 0.1, input_, 2);
  auto const floats        = random_column(type_id::FLOAT32, rows, 8, 0.1, input_);
  check(table_view{short_strings->view(), floats->view()},
        sort_order{{order::DESCENDING, null_order::BEFORE}, {order::ASCENDING, null_order::AFTER}});
}

TEST_F(ConcurrentSortedOrder, HeavyKeysLargeEnoughForTheMsdPasses) {
  // Halves of over 2 MiB of records take MSD passes; a prefix most probes share takes a
  // three-way pass around it. Heavy keys in the middle of the range (rows on both sides), two
  // heavy keys, and a heavy first key with a random second one.
  std::size_t const rows = 300000;
  std::mt19937_64 engine{99};
  std::vector<std::int64_t> middle(rows);
  std::vector<std::int64_t> two(rows);
  std::vector<std::int64_t> second(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    auto const random = static_cast<std::int64_t>(engine());
    middle[row]       = engine() % 10 == 0 ? random : 12345;
    two[row]          = engine() % 20 == 0 ? random : (engine() % 2 == 0 ? -3 : 3);
    second[row]       = static_cast<std::int64_t>(engine() % 1000);
  }
  std::vector<bool> validity(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    validity[row] = row % 97 != 0;
  }
  auto const heavy  = make_fixed_column<std::int64_t>(type_id::INT64, middle, {}, input_);
  auto const pair   = make_fixed_column<std::int64_t>(type_id::INT64, two, validity, input_);
  auto const random = make_fixed_column<std::int64_t>(type_id::INT64, second, {}, input_);
  check(table_view{heavy->view()}, {{order::ASCENDING, null_order::BEFORE}});
  check(table_view{heavy->view()}, {{order::DESCENDING, null_order::BEFORE}});
  check(table_view{pair->view()}, {{order::ASCENDING, null_order::AFTER}});
  check(table_view{heavy->view(), random->view()},
        {{order::ASCENDING, null_order::BEFORE}, {order::DESCENDING, null_order::BEFORE}});
}

/// Rows whose records (16 bytes for one 8-byte key) pass 2 MiB: the sort cuts them into buckets
/// by the 8 bits from the first varying one, on both threads, without a merge.
constexpr std::size_t BUCKETED_ROWS = 200000;

TEST_F(ConcurrentSortedOrder, BucketedInt64Distributions) {
  // Every shape: random ones are bucketed; sorted, all-equal and skewed ones are declined at the
  // sample and take the halves and their merge.
  for (auto const& shape : SHAPES) {
    SCOPED_TRACE(shape);
    auto const values = int64_keys(shape, BUCKETED_ROWS);
    auto const plain  = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
    check(table_view{plain->view()}, sort_order{{order::ASCENDING, null_order::BEFORE}});
    check(table_view{plain->view()}, sort_order{{order::DESCENDING, null_order::BEFORE}});
  }
}

TEST_F(ConcurrentSortedOrder, BucketedDigitsAcrossWordsAndNarrowRanges) {
  std::mt19937_64 engine{123};
  std::vector<std::int64_t> narrow(BUCKETED_ROWS);
  std::vector<std::int64_t> tiny(BUCKETED_ROWS);
  std::vector<std::int64_t> random(BUCKETED_ROWS);
  std::vector<bool> validity(BUCKETED_ROWS);
  for (std::size_t row = 0; row < BUCKETED_ROWS; ++row) {
    narrow[row]   = static_cast<std::int64_t>(engine() % 1000);
    tiny[row]     = static_cast<std::int64_t>(engine() % 16);  // varies from bit 60 of 64
    random[row]   = static_cast<std::int64_t>(engine() % 5000) - 2500;
    validity[row] = row % 11 != 3;
  }
  auto const narrow_key = make_fixed_column<std::int64_t>(type_id::INT64, narrow, {}, input_);
  auto const nullable_key =
    make_fixed_column<std::int64_t>(type_id::INT64, narrow, validity, input_);
  auto const tiny_key   = make_fixed_column<std::int64_t>(type_id::INT64, tiny, {}, input_);
  auto const random_key = make_fixed_column<std::int64_t>(type_id::INT64, random, {}, input_);
  // Ten bits vary: the digit is their first eight, the buckets' sort starts in the last byte.
  check(table_view{narrow_key->view()}, sort_order{{order::ASCENDING, null_order::BEFORE}});
  check(table_view{nullable_key->view()}, sort_order{{order::DESCENDING, null_order::AFTER}});
  // The digit takes the first key's last four bits and the second key's first four.
  check(table_view{tiny_key->view(), random_key->view()},
        sort_order{{order::ASCENDING, null_order::BEFORE}, {order::DESCENDING, null_order::AFTER}});
}

TEST_F(ConcurrentSortedOrder, BucketedRowsTheSampleMisses) {
  // The sample takes rows i * rows / 1024. Rows 1-3 (never sampled) vary in bits the sample sees
  // constant: the count finds them and counts again from the earlier bit. Then most unsampled
  // rows of the first half share one key: the count finds a bucket too heavy to share and the
  // sort takes the halves and their merge.
  std::mt19937_64 engine{321};
  std::vector<std::int64_t> values(BUCKETED_ROWS);
  for (std::size_t row = 0; row < BUCKETED_ROWS; ++row) {
    values[row] = static_cast<std::int64_t>(engine() % 100000);
  }
  values[1]         = std::numeric_limits<std::int64_t>::max();
  values[2]         = std::numeric_limits<std::int64_t>::min();
  values[3]         = std::int64_t{1} << 40;
  auto const missed = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
  check(table_view{missed->view()}, sort_order{{order::ASCENDING, null_order::BEFORE}});

  std::vector<bool> sampled(BUCKETED_ROWS, false);
  for (std::size_t index = 0; index < 1024; ++index) {
    sampled[index * BUCKETED_ROWS / 1024] = true;
  }
  for (std::size_t row = 0; row < BUCKETED_ROWS / 2; ++row) {
    if (!sampled[row]) {
      values[row] = 4242;
    }
  }
  auto const heavy = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
  check(table_view{heavy->view()}, sort_order{{order::DESCENDING, null_order::BEFORE}});
}

TEST_F(SortedOrder, LargeInputsTakeMoreBuckets) {
  // 9M rows of 16-byte records: 512 buckets (more than 512 KiB of records each at 256). Checked
  // in one pass (keys ascend, ties in row order, every row once) instead of against a reference
  // sort of 9M rows.
  std::size_t const rows = 9'000'000;
  std::mt19937_64 engine{2024};
  std::vector<std::int64_t> values(rows);
  for (auto& value : values) {
    value = static_cast<std::int64_t>(engine() % 3'000'000) - 1'500'000;
  }
  auto const key = make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_);
  auto const result =
    sorted_order(table_view{key->view()}, {}, sort_stability::STABLE, default_stream(), mrs_);
  std::vector<std::uint64_t> const order = to_vector(result->view());
  ASSERT_EQ(order.size(), rows);
  std::vector<bool> seen(rows, false);
  for (std::size_t position = 0; position < rows; ++position) {
    std::uint64_t const row = order[position];
    ASSERT_LT(row, rows);
    ASSERT_FALSE(seen[row]) << "row " << row << " twice";
    seen[row] = true;
    if (position > 0) {
      std::uint64_t const before = order[position - 1];
      ASSERT_TRUE(values[before] < values[row] || (values[before] == values[row] && before < row))
        << "position " << position;
    }
  }
}

TEST_F(ConcurrentSortedOrder, BucketedStringsAreEncodedOnce) {
  // Strings with a long common prefix vary first in their eighth byte; short ones tie often
  // beyond the prefix (with a second key the prefix is incomplete).
  std::mt19937_64 engine{77};
  std::vector<std::optional<std::string>> prefixed;
  for (std::size_t row = 0; row < BUCKETED_ROWS; ++row) {
    prefixed.push_back("account" + std::to_string(engine() % 50000));
  }
  auto const long_prefix = make_string_column(prefixed, input_);
  check(table_view{long_prefix->view()}, sort_order{{order::ASCENDING, null_order::BEFORE}});
  auto const short_strings = random_column(type_id::STRING, BUCKETED_ROWS, 6, 0.1, input_, 3);
  auto const floats        = random_column(type_id::FLOAT64, BUCKETED_ROWS, 8, 0.1, input_);
  check(table_view{short_strings->view(), floats->view()},
        sort_order{{order::DESCENDING, null_order::AFTER}, {order::ASCENDING, null_order::BEFORE}});
}

TEST_F(SortedOrder, MultiKeyMixedDirectionsAndNullOrders) {
  auto const first  = random_column(type_id::INT8, 2500, 21, 0.1, input_);
  auto const second = random_column(type_id::STRING, 2500, 22, 0.2, input_, 1);
  auto const third  = random_column(type_id::FLOAT64, 2500, 23, 0.1, input_);
  auto const fourth = random_column(type_id::UINT16, 2500, 24, 0.3, input_);
  table_view const keys{first->view(), second->view(), third->view(), fourth->view()};
  std::mt19937 engine{99};
  for (int trial = 0; trial < 12; ++trial) {
    sort_order orders;
    for (std::size_t index = 0; index < keys.num_columns(); ++index) {
      orders.push_back(every_column_order()[engine() % 4]);
    }
    check(keys, orders);
  }
}

TEST_F(SortedOrder, KeysWiderThanThePrefix) {
  // Four 8-byte keys with nulls need 36 bytes: the last ones fall outside the 24-byte prefix.
  std::vector<std::unique_ptr<column>> columns;
  std::vector<column_view> views;
  for (std::size_t index = 0; index < 4; ++index) {
    std::vector<std::int64_t> values;
    std::vector<bool> validity;
    for (std::size_t row = 0; row < 3000; ++row) {
      values.push_back(static_cast<std::int64_t>((row * (index + 3) * 2654435761U) % 3));
      validity.push_back((row + index) % 11 != 0);
    }
    columns.push_back(make_fixed_column<std::int64_t>(type_id::INT64, values, validity, input_));
    views.push_back(columns.back()->view());
  }
  table_view const keys{views};
  check(keys, {});
  check(keys,
        {{order::DESCENDING, null_order::AFTER},
         {order::ASCENDING, null_order::BEFORE},
         {order::DESCENDING, null_order::BEFORE},
         {order::ASCENDING, null_order::AFTER}});
}

TEST_F(SortedOrder, StringBeforeAnotherKeyUsesAShortPrefix) {
  std::vector<std::optional<std::string>> values;
  std::vector<std::int32_t> numbers;
  for (std::size_t row = 0; row < 2000; ++row) {
    values.emplace_back(std::string(row % 3 * 5, 'x') + std::to_string(row % 17));
    numbers.push_back(static_cast<std::int32_t>(row % 7) - 3);
  }
  auto const strings = make_string_column(values, input_);
  auto const ints    = make_fixed_column<std::int32_t>(type_id::INT32, numbers, {}, input_);
  check(table_view{strings->view(), ints->view()}, {});
  check(table_view{strings->view(), ints->view()},
        {{order::DESCENDING, null_order::BEFORE}, {order::DESCENDING, null_order::AFTER}});
}

/// Random lowercase strings of 12 to 20 letters after `stem`; one row in 100 starts with the
/// same 8 letters instead (they differ after them) and one in 50 is null.
std::unique_ptr<column> mostly_distinct_strings(std::size_t rows,
                                                unsigned seed,
                                                std::string const& stem,
                                                resource_ref resource) {
  std::mt19937 engine{seed};
  std::vector<std::optional<std::string>> values;
  for (std::size_t row = 0; row < rows; ++row) {
    if (row % 50 == 7) {
      values.emplace_back(std::nullopt);
      continue;
    }
    std::string value         = row % 100 == 3 ? stem + "samestem" : stem;
    std::size_t const letters = 12 + engine() % 9;
    for (std::size_t letter = 0; letter < letters; ++letter) {
      value.push_back(static_cast<char>('a' + engine() % 26));
    }
    values.emplace_back(std::move(value));
  }
  return make_string_column(values, resource);
}

TEST(NormalizedKeyLayout, StringPrefixesNarrowOnlyWhereTheSampleTellsRowsApart) {
  host_memory_resource host;
  sort_order const one{{order::ASCENDING, null_order::AFTER}};
  auto const words_for = [&](table_view const& keys, sort_order const& orders) {
    detail::normalized_key_layout layout = detail::plan_normalized_keys(keys, orders);
    detail::narrow_string_prefix(layout, std::span<table_view const>{&keys, 1});
    return layout;
  };
  // Strings that differ within 8 bytes: one word (a null byte, then 7 bytes of the string).
  auto const random_strings = mostly_distinct_strings(20000, 1, "", host);
  auto const narrowed       = words_for(table_view{random_strings->view()}, one);
  EXPECT_EQ(narrowed.words(), 1U);
  EXPECT_EQ(narrowed.segments.back().value_bytes, 7U);
  EXPECT_FALSE(narrowed.complete);
  // Below 4 * 1024 rows the full width stays.
  table_view const few = slice(table_view{random_strings->view()}, 0, 4000);
  EXPECT_EQ(words_for(few, one).words(), 3U);
  // The same 10 bytes first: the sample needs the second word, not the third.
  auto const stem10 = mostly_distinct_strings(20000, 2, "prefix--10", host);
  EXPECT_EQ(words_for(table_view{stem10->view()}, one).words(), 2U);
  // The same 20 bytes first: only the third word tells the rows apart.
  auto const stem20 = mostly_distinct_strings(20000, 3, std::string(20, 'q'), host);
  EXPECT_EQ(words_for(table_view{stem20->view()}, one).words(), 3U);
  // The same 30 bytes first: no prefix tells the rows apart, so the narrowest does as well.
  auto const stem30 = mostly_distinct_strings(20000, 5, std::string(30, 'q'), host);
  EXPECT_EQ(words_for(table_view{stem30->view()}, one).words(), 1U);
  // A few-valued 8-byte key first: the string keeps the second word.
  std::vector<std::int64_t> numbers(20000);
  for (std::size_t row = 0; row < numbers.size(); ++row) {
    numbers[row] = static_cast<std::int64_t>(row % 3);
  }
  auto const ints = make_fixed_column<std::int64_t>(type_id::INT64, numbers, {}, host);
  auto const both =
    words_for(table_view{ints->view(), random_strings->view()},
              {{order::ASCENDING, null_order::AFTER}, {order::DESCENDING, null_order::BEFORE}});
  EXPECT_EQ(both.words(), 2U);
  EXPECT_EQ(both.segments.back().offset, 8U);
  EXPECT_EQ(both.segments.back().value_bytes, 7U);  // after its null byte
  // Fixed-width keys are never narrowed.
  EXPECT_EQ(
    words_for(table_view{ints->view(), ints->view()},
              {{order::ASCENDING, null_order::AFTER}, {order::ASCENDING, null_order::AFTER}})
      .words(),
    2U);
}

TEST_F(SortedOrder, NarrowedStringPrefixesLeaveTiesToTheFullStrings) {
  // One row in 100 ties with others on its first 8 bytes: the sample lets the prefix narrow to
  // one word, and those rows are ordered by their full strings.
  auto const key = mostly_distinct_strings(20000, 4, "", input_);
  check_every_order(key->view());
  std::vector<std::int32_t> numbers(20000);
  for (std::size_t row = 0; row < numbers.size(); ++row) {
    numbers[row] = static_cast<std::int32_t>(row % 3) - 1;
  }
  auto const ints = make_fixed_column<std::int32_t>(type_id::INT32, numbers, {}, input_);
  check(table_view{ints->view(), key->view()},
        {{order::DESCENDING, null_order::BEFORE}, {order::ASCENDING, null_order::AFTER}});
}

TEST_F(SortedOrder, StringsWithLongCommonPrefixesEmptyAndEmbeddedZeros) {
  std::string const common(40, 'p');  // longer than any normalized prefix
  std::vector<std::optional<std::string>> values;
  std::mt19937 engine{5};
  for (std::size_t row = 0; row < 1200; ++row) {
    switch (row % 8) {
      case 0:
        values.emplace_back(common + std::to_string(engine() % 50));
        break;
      case 1:
        values.emplace_back(common);
        break;
      case 2:
        values.emplace_back(std::string{});
        break;
      case 3:
        values.emplace_back(std::string("ab\0", 3));
        break;
      case 4:
        values.emplace_back(std::string("ab"));
        break;
      case 5:
        values.emplace_back(std::nullopt);
        break;
      case 6:
        values.emplace_back(std::string("\xff\x80", 2) + common);
        break;
      default:
        values.emplace_back(common.substr(0, engine() % 40) + std::string(1, '\0'));
        break;
    }
  }
  auto const key = make_string_column(values, input_);
  check_every_order(key->view());
}

template <typename T>
void float_specials_case(SortedOrderTest& test, resource_ref input) {
  using limits = std::numeric_limits<T>;
  std::vector<T> const specials{limits::quiet_NaN(),
                                -limits::quiet_NaN(),
                                T{0},
                                T{-0.0},
                                limits::infinity(),
                                -limits::infinity(),
                                T{1},
                                T{-1},
                                limits::max(),
                                limits::lowest(),
                                limits::min(),
                                -limits::min(),
                                limits::denorm_min(),
                                -limits::denorm_min(),
                                limits::signaling_NaN()};
  std::vector<T> values;
  std::vector<bool> validity;
  for (std::size_t row = 0; row < 600; ++row) {
    values.push_back(specials[(row * 7) % specials.size()]);
    validity.push_back(row % 10 != 3);
  }
  auto const key = make_fixed_column<T>(
    sizeof(T) == 4 ? type_id::FLOAT32 : type_id::FLOAT64, values, validity, input);
  test.check_every_order(key->view());
}

TEST_F(SortedOrder, FloatNaNSignedZeroAndInfinities) {
  float_specials_case<float>(*this, input_);
  float_specials_case<double>(*this, input_);
}

TEST_F(SortedOrder, IntegerExtremes) {
  std::vector<std::int64_t> int64s;
  std::vector<std::int8_t> int8s;
  std::vector<std::uint64_t> uint64s;
  for (std::size_t row = 0; row < 500; ++row) {
    int64s.push_back(row % 4 == 0   ? std::numeric_limits<std::int64_t>::min()
                     : row % 4 == 1 ? std::numeric_limits<std::int64_t>::max()
                                    : static_cast<std::int64_t>(row % 5) - 2);
    int8s.push_back(static_cast<std::int8_t>(row % 3 == 0 ? -128 : (row % 3 == 1 ? 127 : 0)));
    uint64s.push_back(row % 2 == 0 ? std::numeric_limits<std::uint64_t>::max() : row % 3);
  }
  auto const a = make_fixed_column<std::int64_t>(type_id::INT64, int64s, {}, input_);
  auto const b = make_fixed_column<std::int8_t>(type_id::INT8, int8s, {}, input_);
  auto const c = make_fixed_column<std::uint64_t>(type_id::UINT64, uint64s, {}, input_);
  check_every_order(a->view());
  check_every_order(b->view());
  check_every_order(c->view());
  check(table_view{b->view(), a->view(), c->view()}, {});
}

TEST_F(SortedOrder, EmptyOneRowAndNoKeyColumns) {
  auto const empty = random_column(type_id::STRING, 0, 1, 0.0, input_);
  check(table_view{empty->view()}, {});
  auto const one = random_column(type_id::INT32, 1, 1, 0.0, input_);
  check(table_view{one->view()}, {{order::DESCENDING, null_order::AFTER}});
  auto const result =
    sorted_order(table_view{}, {}, sort_stability::STABLE, default_stream(), mrs_);
  EXPECT_EQ(result->size(), 0U);
  expect_resources(result->allocated_bytes());
}

TEST_F(SortedOrder, SlicedInput) {
  auto const key          = random_column(type_id::STRING, 900, 4, 0.2, input_, 10);
  auto const number       = random_column(type_id::INT16, 900, 5, 0.2, input_);
  table_view const whole  = table_view{key->view(), number->view()};
  table_view const middle = slice(whole, 123, 801);
  check(middle, {{order::ASCENDING, null_order::AFTER}, {order::DESCENDING, null_order::BEFORE}});
}

TEST_F(SortedOrder, RejectsMismatchedOrders) {
  auto const key = random_column(type_id::INT32, 10, 1, 0.0, input_);
  EXPECT_THROW((void)sorted_order(
                 table_view{key->view()}, {{}, {}}, sort_stability::STABLE, default_stream(), mrs_),
               invalid_argument);
  expect_resources(0);
}

TEST_F(SortedOrder, PublicDefaultsUseTheCurrentResource) {
  auto const key = random_column(type_id::INT32, 10, 1, 0.0, input_);
  EXPECT_THROW((void)sorted_order(table_view{key->view()}), logic_error);
}

class Sort : public testing::ops_fixture {};

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

TEST_F(Sort, StableSortKeepsInputOrderOfEqualKeys) {
  std::vector<std::int32_t> keys;
  std::vector<std::int64_t> payload;
  std::vector<bool> validity;
  for (std::size_t row = 0; row < 3000; ++row) {
    keys.push_back(static_cast<std::int32_t>((row * 31) % 4));
    payload.push_back(static_cast<std::int64_t>(row));
    validity.push_back(row % 5 != 0);
  }
  auto const key    = make_fixed_column<std::int32_t>(type_id::INT32, keys, validity, input_);
  auto const values = make_fixed_column<std::int64_t>(type_id::INT64, payload, {}, input_);
  auto const words  = random_column(type_id::STRING, 3000, 12, 0.1, input_);
  table_view const input{key->view(), values->view(), words->view()};
  sort_order const orders{{order::DESCENDING, null_order::AFTER}};
  auto const sorted =
    sort(input, table_view{key->view()}, orders, sort_stability::STABLE, default_stream(), mrs_);
  expect_resources(sorted->allocated_bytes());
  table_view const view = sorted->view();
  ASSERT_EQ(view.num_rows(), 3000U);
  for (std::size_t row = 1; row < view.num_rows(); ++row) {
    int const order_of_keys = reference_compare(view.select(std::vector<std::size_t>{0}),
                                                row - 1,
                                                view.select(std::vector<std::size_t>{0}),
                                                row,
                                                orders);
    ASSERT_LE(order_of_keys, 0) << "row " << row;
    if (order_of_keys == 0) {
      ASSERT_LT(view.column(1).data<std::int64_t>()[row - 1],
                view.column(1).data<std::int64_t>()[row])
        << "equal keys out of input order at row " << row;
    }
  }
  // The other columns moved with their keys.
  auto const expected_map = make_fixed_column<std::uint64_t>(
    type_id::UINT64, testing::reference_sorted_order(table_view{key->view()}, orders), {}, input_);
  auto const expected =
    gather(input, expected_map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), view);
}

/// Whether no row of `keys` comes before the row above it, by the reference order.
bool reference_is_sorted(table_view const& keys, sort_order const& orders) {
  for (std::size_t row = 1; row < keys.num_rows(); ++row) {
    if (reference_compare(keys, row, keys, row - 1, orders) < 0) {
      return false;
    }
  }
  return true;
}

/// `permutation` with the rows at `position - 1` and `position` swapped.
std::vector<std::uint64_t> swapped(std::vector<std::uint64_t> permutation, std::size_t position) {
  std::swap(permutation[position - 1], permutation[position]);
  return permutation;
}

class IsSorted : public SortedOrderTest {
 public:
  /// is_sorted of `keys` reordered by `permutation`, against the reference.
  void expect_matches_reference(table_view const& keys,
                                std::vector<std::uint64_t> const& permutation,
                                sort_order const& orders,
                                std::optional<bool> expected = std::nullopt) {
    auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, permutation, {}, input_);
    auto const reordered =
      gather(keys, map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
    bool const reference = reference_is_sorted(reordered->view(), orders);
    if (expected.has_value()) {
      ASSERT_EQ(reference, *expected) << "the case does not test what it says";
    }
    EXPECT_EQ(is_sorted(reordered->view(), orders), reference);
  }
};

TEST_F(IsSorted, EveryTypeAndOrderSortedOrOneSwapAtABlockBoundary) {
  // Rows out of order in the first row, around the 1024-row blocks of the fixed-width check, and
  // last; whether a swap breaks the order (ties do not) comes from the reference.
  std::size_t const rows = 3000;
  for (data_type const type : testing::all_types()) {
    for (double const nulls : {0.0, 0.2}) {
      SCOPED_TRACE(to_string(type) + (nulls > 0.0 ? " with nulls" : ""));
      auto const key = random_column(type, rows, 17, nulls, input_);
      table_view const keys{key->view()};
      for (auto const& key_order : every_column_order()) {
        sort_order const orders{key_order};
        SCOPED_TRACE(describe(orders));
        std::vector<std::uint64_t> identity(rows);
        for (std::size_t row = 0; row < rows; ++row) {
          identity[row] = row;
        }
        expect_matches_reference(keys, identity, orders);
        auto const order = testing::reference_sorted_order(keys, orders);
        expect_matches_reference(keys, order, orders, true);
        for (std::size_t const position : {1UL, 1023UL, 1024UL, 1025UL, 2048UL, rows - 1}) {
          expect_matches_reference(keys, swapped(order, position), orders);
        }
        // The first row moved last: out of order unless every key ties.
        std::vector<std::uint64_t> rotated(order.begin() + 1, order.end());
        rotated.push_back(order.front());
        expect_matches_reference(keys, rotated, orders);
      }
    }
  }
}

TEST_F(IsSorted, MultiKeySlicedEmptyAndFloatSpecials) {
  auto const text   = random_column(type_id::STRING, 2000, 5, 0.1, input_, 3);
  auto const number = random_column(type_id::INT16, 2000, 6, 0.1, input_);
  table_view const keys{text->view(), number->view()};
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  auto const order = testing::reference_sorted_order(keys, orders);
  expect_matches_reference(keys, order, orders, true);
  expect_matches_reference(keys, swapped(order, 1500), orders);
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, order, {}, input_);
  auto const sorted =
    gather(keys, map->view(), out_of_bounds_policy::FAIL, default_stream(), input_);
  EXPECT_TRUE(is_sorted(slice(sorted->view(), 100, 1900), orders));
  EXPECT_TRUE(is_sorted(slice(sorted->view(), 7, 7), orders));
  EXPECT_TRUE(is_sorted(table_view{}, {}));
  // NaN after every number, NaNs and signed zeros tied: the order row_comparator gives.
  double const nan     = std::numeric_limits<double>::quiet_NaN();
  double const inf     = std::numeric_limits<double>::infinity();
  auto const ascending = make_fixed_column<double>(
    type_id::FLOAT64, {-inf, -0.0, 0.0, -0.0, 2.0, inf, nan, nan}, {}, input_);
  EXPECT_TRUE(is_sorted(table_view{ascending->view()}));
  EXPECT_FALSE(is_sorted(table_view{ascending->view()}, {{order::DESCENDING, null_order::BEFORE}}));
  auto const nan_first = make_fixed_column<double>(type_id::FLOAT64, {nan, 2.0, 1.0}, {}, input_);
  EXPECT_FALSE(is_sorted(table_view{nan_first->view()}));
  EXPECT_TRUE(is_sorted(table_view{nan_first->view()}, {{order::DESCENDING, null_order::BEFORE}}));
  EXPECT_THROW((void)is_sorted(keys, {{}}), invalid_argument);
}

TEST_F(Sort, SortedInputIsCopiedFromTheOutputResourceAlone) {
  std::vector<std::int64_t> keys;
  for (std::size_t row = 0; row < PARALLEL_SORT_MIN_ROWS + 10; ++row) {
    keys.push_back(static_cast<std::int64_t>(row / 3));  // in order, with ties
  }
  auto const key   = make_fixed_column<std::int64_t>(type_id::INT64, keys, {}, input_);
  auto const words = random_column(type_id::STRING, keys.size(), 12, 0.1, input_);
  table_view const input{key->view(), words->view()};
  for (auto stability : {sort_stability::STABLE, sort_stability::UNSTABLE}) {
    auto const sorted = sort(input, table_view{key->view()}, {}, stability, default_stream(), mrs_);
    expect_resources(sorted->allocated_bytes());
    SPILLWAY_EXPECT_TABLES_EQUAL(input, sorted->view());
  }
  // Neither an order nor normalized keys were built.
  EXPECT_EQ(temporary_.statistics().peak_bytes, 0U);
}

/// Piece `p` of `pieces` is rows `[starts[p], starts[p + 1])` of `expected`.
void expect_pieces_of(table_view const& expected,
                      std::vector<std::unique_ptr<table>> const& pieces,
                      std::vector<std::size_t> const& starts) {
  ASSERT_EQ(pieces.size(), starts.size() - 1);
  for (std::size_t piece = 0; piece + 1 < starts.size(); ++piece) {
    SCOPED_TRACE("piece " + std::to_string(piece));
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected, starts[piece], starts[piece + 1]),
                                 pieces[piece]->view());
  }
}

TEST(ParallelGather, CopyStringCopiesExactlyItsBytesAtEveryLength) {
  // Every branch (bytes, 4, 8 and 16 byte pairs, memcpy) and every boundary between them.
  std::vector<char> source(100);
  for (std::size_t index = 0; index < source.size(); ++index) {
    source[index] = static_cast<char>('A' + index % 50);
  }
  for (std::size_t bytes = 0; bytes <= 70; ++bytes) {
    SCOPED_TRACE(bytes);
    std::vector<char> target(100, '#');
    detail::copy_string(target.data() + 5, source.data() + 3, bytes);
    for (std::size_t index = 0; index < target.size(); ++index) {
      if (index >= 5 && index < 5 + bytes) {
        ASSERT_EQ(target[index], source[index - 2]) << "byte " << index;
      } else {
        ASSERT_EQ(target[index], '#') << "byte " << index << " written";
      }
    }
  }
}

TEST(ConcurrentParallelGather, WideRowsBelowTheRowThresholdAreGatheredOnTwoThreads) {
  // 3000 rows of about 1.2 KB: under PARALLEL_GATHER_MIN_ROWS, over PARALLEL_GATHER_MIN_BYTES.
  host_memory_resource host;
  std::size_t const rows = 3000;
  ASSERT_LT(rows, detail::PARALLEL_GATHER_MIN_ROWS);
  std::vector<std::optional<std::string>> long_text;
  std::vector<std::optional<std::string>> other_text;
  std::vector<std::int64_t> numbers;
  std::vector<bool> validity;
  for (std::size_t row = 0; row < rows; ++row) {
    long_text.push_back(row % 11 == 3 ? std::nullopt
                                      : std::optional<std::string>{std::string(
                                          500 + row % 200, static_cast<char>('a' + row % 26))});
    other_text.push_back(std::string(400 + row % 100, static_cast<char>('A' + row % 26)) +
                         std::to_string(row));
    numbers.push_back(static_cast<std::int64_t>(row * 31));
    validity.push_back(row % 13 != 5);
  }
  auto const a = make_string_column(long_text, host);
  auto const b = make_string_column(other_text, host);
  auto const c = make_fixed_column<std::int64_t>(type_id::INT64, numbers, validity, host);
  auto const d = make_fixed_column<std::int64_t>(type_id::INT64, numbers, {}, host);
  table_view const input{a->view(), b->view(), c->view(), d->view()};
  std::vector<std::uint64_t> order(rows);
  for (std::size_t row = 0; row < rows; ++row) {
    order[row] = (row * 1237) % rows;  // a permutation (1237 and 3000 are coprime)
  }
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, order, {}, host);
  auto const expected =
    gather(input, map->view(), out_of_bounds_policy::FAIL, default_stream(), host);
  auto const actual = detail::gather_rows_in_parallel(
    input, order.data(), rows, default_stream(), memory_resources{host});
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), actual->view());
  // The same rows into pieces (an empty one, one of one row): the two threads' cut falls inside
  // the last piece; each piece is its range of the whole gather.
  std::vector<std::size_t> const starts{0, 0, 70, 1070, 1071, rows};
  auto const pieces = detail::gather_pieces_in_parallel(std::span<table_view const>{&input, 1},
                                                        order.data(),
                                                        starts,
                                                        detail::SOURCE_ROW_BITS,
                                                        default_stream(),
                                                        memory_resources{host});
  expect_pieces_of(expected->view(), pieces, starts);
}

TEST(ParallelGather, PlainColumnsAreGroupedByTheirSourceBytes) {
  std::size_t const limit = detail::GATHER_GROUP_BYTES;
  std::vector<std::size_t> const columns{2, 3, 5, 7, 8, 9};
  // Large columns (over the limit) together at the end; the others packed up to the limit.
  std::vector<std::size_t> const bytes{
    limit * 3 / 4, limit + 1, limit / 4, limit / 2, 4 * limit, limit / 2};
  auto const groups = detail::plain_column_groups(columns, bytes);
  std::vector<std::vector<std::size_t>> const expected{{2, 5}, {7, 9}, {3, 8}};
  EXPECT_EQ(groups, expected);
  EXPECT_TRUE(detail::plain_column_groups({}, {}).empty());
  std::vector<std::size_t> const one{4};
  std::vector<std::size_t> const zero{0};
  EXPECT_EQ(detail::plain_column_groups(one, zero), (std::vector<std::vector<std::size_t>>{{4}}));
}

TEST(ConcurrentParallelGather, ColumnGroupsFromSeveralInputsIntoPieces) {
  // Two inputs whose INT64 and FLOAT64 columns are over GATHER_GROUP_BYTES together (gathered
  // row by row as one group) and whose narrower ones are packed into groups, with a nullable
  // column and a string column besides, gathered at random into pieces (one empty).
  host_memory_resource host;
  std::size_t const rows = detail::GATHER_GROUP_BYTES / 8 / 2 + 5000;
  std::vector<data_type> const types{data_type{type_id::INT64},
                                     data_type{type_id::INT32},
                                     data_type{type_id::FLOAT64},
                                     data_type{type_id::INT8},
                                     data_type{type_id::INT16},
                                     data_type{type_id::INT32},
                                     data_type{type_id::STRING},
                                     data_type{type_id::UINT32}};
  auto const first      = random_table(types, rows, 21, 0.0, host);
  auto const second     = random_table(types, rows - 1000, 22, 0.0, host);
  auto const with_nulls = random_column(type_id::INT32, rows, 23, 0.2, host);
  auto const more_nulls = random_column(type_id::INT32, rows - 1000, 24, 0.2, host);
  auto const columns_of = [](table const& source, column const& extra) {
    std::vector<column_view> views;
    for (std::size_t index = 0; index < source.num_columns(); ++index) {
      views.push_back(source.view().column(index));
    }
    views.push_back(extra.view());
    return table_view{views};
  };
  std::array<table_view, 2> const inputs{columns_of(*first, *with_nulls),
                                         columns_of(*second, *more_nulls)};
  auto const both = concatenate(inputs, default_stream(), memory_resources{host});
  // Every row of both inputs in a random order, as ids and as rows of the concatenation.
  std::size_t const total = inputs[0].num_rows() + inputs[1].num_rows();
  std::vector<std::uint64_t> rows_of_both(total);
  std::iota(rows_of_both.begin(), rows_of_both.end(), std::uint64_t{0});
  std::shuffle(rows_of_both.begin(), rows_of_both.end(), std::mt19937_64{25});
  std::vector<std::uint64_t> ids(total);
  for (std::size_t row = 0; row < total; ++row) {
    std::uint64_t const at = rows_of_both[row];
    ids[row] = at < rows ? at : (std::uint64_t{1} << detail::SOURCE_ROW_BITS) | (at - rows);
  }
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, rows_of_both, {}, host);
  auto const expected =
    gather(both->view(), map->view(), out_of_bounds_policy::FAIL, default_stream(), host);
  std::vector<std::size_t> const starts{0, 1000, 1000, total / 2 + 7, total};
  auto const pieces = detail::gather_pieces_in_parallel(
    inputs, ids.data(), starts, detail::SOURCE_ROW_BITS, default_stream(), memory_resources{host});
  expect_pieces_of(expected->view(), pieces, starts);
}

/// Rows of two tables of several kinds of column as inputs of a gather, and their concatenation.
struct two_inputs {
  std::unique_ptr<table> first;
  std::unique_ptr<table> second;
  std::unique_ptr<table> both;
  std::array<table_view, 2> views;
  [[nodiscard]] std::uint64_t id_of(std::size_t row_of_both) const {
    std::size_t const rows = views[0].num_rows();
    return row_of_both < rows
             ? row_of_both
             : (std::uint64_t{1} << detail::SOURCE_ROW_BITS) | (row_of_both - rows);
  }
};

two_inputs two_inputs_of(std::size_t first_rows, std::size_t second_rows, resource_ref host) {
  std::vector<data_type> const types{data_type{type_id::INT64},
                                     data_type{type_id::INT32},
                                     data_type{type_id::FLOAT64},
                                     data_type{type_id::INT8},
                                     data_type{type_id::INT16},
                                     data_type{type_id::STRING},
                                     data_type{type_id::UINT32}};
  two_inputs result;
  result.first  = random_table(types, first_rows, 31, 0.0, host);
  result.second = random_table(types, second_rows, 32, 0.0, host);
  // A nullable column besides, in each.
  auto with_nulls = [&](table& source, std::uint64_t seed) {
    auto columns = source.release();
    columns.push_back(random_column(type_id::INT32, columns.front()->size(), seed, 0.2, host));
    return std::make_unique<table>(std::move(columns));
  };
  result.first  = with_nulls(*result.first, 33);
  result.second = with_nulls(*result.second, 34);
  result.views  = {result.first->view(), result.second->view()};
  result.both   = concatenate(result.views, default_stream(), memory_resources{host});
  return result;
}

/// Checks `gather_pieces_in_parallel` of `rows_of_both` (rows of the concatenation) into pieces.
void expect_gathered_pieces(two_inputs const& inputs,
                            std::vector<std::uint64_t> const& rows_of_both,
                            std::vector<std::size_t> const& starts,
                            resource_ref host) {
  std::vector<std::uint64_t> ids;
  for (std::uint64_t const row : rows_of_both) {
    ids.push_back(inputs.id_of(row));
  }
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, rows_of_both, {}, host);
  auto const expected =
    gather(inputs.both->view(), map->view(), out_of_bounds_policy::FAIL, default_stream(), host);
  auto const pieces = detail::gather_pieces_in_parallel(inputs.views,
                                                        ids.data(),
                                                        starts,
                                                        detail::SOURCE_ROW_BITS,
                                                        default_stream(),
                                                        memory_resources{host});
  expect_pieces_of(expected->view(), pieces, starts);
}

/// Every row of `total` ordered by a key of `values` values drawn at random, ties in row order.
std::vector<std::uint64_t> stably_sorted_by_a_key_of(std::size_t total, std::size_t values) {
  std::mt19937_64 random{35};
  std::vector<std::size_t> key(total);
  for (auto& value : key) {
    value = random() % values;
  }
  std::vector<std::uint64_t> rows(total);
  std::iota(rows.begin(), rows.end(), std::uint64_t{0});
  std::stable_sort(
    rows.begin(), rows.end(), [&](std::uint64_t a, std::uint64_t b) { return key[a] < key[b]; });
  return rows;
}

TEST(ConcurrentParallelGather, FewAscendingRunsAreScatteredIntoPieces) {
  // A sort by a key of 40 values of rows in time order: 40 ascending runs through both inputs.
  host_memory_resource host;
  auto const inputs       = two_inputs_of(50000, 30001, host);
  std::size_t const total = 80001;
  auto const rows_of_both = stably_sorted_by_a_key_of(total, 40);
  std::vector<std::uint64_t> ids;
  for (std::uint64_t const row : rows_of_both) {
    ids.push_back(inputs.id_of(row));
  }
  EXPECT_TRUE(detail::scatter_pays(inputs.views, ids.data(), total));
  expect_gathered_pieces(inputs, rows_of_both, {0, 1000, 1000, 1001, total / 2 + 7, total}, host);
  expect_gathered_pieces(inputs, rows_of_both, {0, total}, host);
}

TEST(ConcurrentParallelGather, ARowTwiceIsGatheredAfterAll) {
  // Runs a scatter would take, but one row twice and another missing: the places are found
  // incomplete and the rows are gathered instead.
  host_memory_resource host;
  auto const inputs       = two_inputs_of(40000, 40000, host);
  std::size_t const total = 80000;
  auto rows_of_both       = stably_sorted_by_a_key_of(total, 40);
  rows_of_both[100]       = rows_of_both[101];
  std::vector<std::uint64_t> ids;
  for (std::uint64_t const row : rows_of_both) {
    ids.push_back(inputs.id_of(row));
  }
  EXPECT_TRUE(detail::scatter_pays(inputs.views, ids.data(), total));
  expect_gathered_pieces(inputs, rows_of_both, {0, 5000, total}, host);
}

TEST(ParallelGather, AScatterPaysOnlyForEveryRowInFewRunsThatLeaveTheLine) {
  host_memory_resource host;
  auto const inputs       = two_inputs_of(40000, 40000, host);
  std::size_t const total = 80000;
  auto const ids_of       = [&](std::vector<std::uint64_t> const& rows) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t const row : rows) {
      ids.push_back(inputs.id_of(row));
    }
    return ids;
  };
  EXPECT_TRUE(
    detail::scatter_pays(inputs.views,
                         ids_of(stably_sorted_by_a_key_of(total, detail::SCATTER_MAX_RUNS)).data(),
                         total));
  // More runs than that; every row at random; rows in order (a gather reads them in order);
  // fewer rows than the inputs hold; too few rows to pay.
  EXPECT_FALSE(detail::scatter_pays(
    inputs.views,
    ids_of(stably_sorted_by_a_key_of(total, 4 * detail::SCATTER_MAX_RUNS)).data(),
    total));
  std::vector<std::uint64_t> shuffled(total);
  std::iota(shuffled.begin(), shuffled.end(), std::uint64_t{0});
  auto const in_order = ids_of(shuffled);
  EXPECT_FALSE(detail::scatter_pays(inputs.views, in_order.data(), total));
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64{36});
  EXPECT_FALSE(detail::scatter_pays(inputs.views, ids_of(shuffled).data(), total));
  auto const runs = ids_of(stably_sorted_by_a_key_of(total, 40));
  EXPECT_FALSE(detail::scatter_pays(inputs.views, runs.data(), total - 1));
  auto const small = two_inputs_of(100, 100, host);
  std::vector<std::uint64_t> few(200);
  for (std::size_t row = 0; row < 200; ++row) {
    few[row] = small.id_of((row % 2) * 100 + row / 2);
  }
  EXPECT_FALSE(detail::scatter_pays(small.views, few.data(), 200));
}

TEST(ConcurrentParallelGather, PermuteInPlaceMovesPlainColumnsOrNothing) {
  // Two owned tables of plain columns of every width: permuted in place, each keeps its rows.
  host_memory_resource host;
  std::vector<data_type> const types{data_type{type_id::INT64},
                                     data_type{type_id::INT8},
                                     data_type{type_id::INT16},
                                     data_type{type_id::FLOAT32}};
  auto first  = random_table(types, 30000, 41, 0.0, host);
  auto second = random_table(types, 20000, 42, 0.0, host);
  std::array<table_view, 2> const views{first->view(), second->view()};
  auto const both       = concatenate(views, default_stream(), memory_resources{host});
  std::size_t const all = 50000;
  auto rows_of_both     = stably_sorted_by_a_key_of(all, 30);
  auto const ids_of     = [&](std::vector<std::uint64_t> const& rows) {
    std::vector<std::uint64_t> ids;
    for (std::uint64_t const row : rows) {
      ids.push_back(row < 30000 ? row
                                : (std::uint64_t{1} << detail::SOURCE_ROW_BITS) | (row - 30000));
    }
    return ids;
  };
  std::array<table*, 2> const tables{first.get(), second.get()};
  std::vector<std::size_t> const plain{0, 1, 2, 3};
  // A row twice (another missing): nothing moves.
  auto twice = rows_of_both;
  twice[5]   = twice[6];
  EXPECT_FALSE(detail::permute_in_place(
    tables, ids_of(twice).data(), detail::SOURCE_ROW_BITS, plain, default_stream(), host));
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(both->view(), 0, 30000), first->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(both->view(), 30000, all), second->view());
  ASSERT_TRUE(detail::permute_in_place(
    tables, ids_of(rows_of_both).data(), detail::SOURCE_ROW_BITS, plain, default_stream(), host));
  auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, rows_of_both, {}, host);
  auto const expected =
    gather(both->view(), map->view(), out_of_bounds_policy::FAIL, default_stream(), host);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 0, 30000), first->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 30000, all), second->view());
}

TEST_F(Sort, ValuesWithoutKeysKeepTheirOrder) {
  auto const values = random_column(type_id::STRING, 50, 3, 0.2, input_);
  auto const sorted = sort(
    table_view{values->view()}, table_view{}, {}, sort_stability::STABLE, default_stream(), mrs_);
  expect_resources(sorted->allocated_bytes());
  SPILLWAY_EXPECT_TABLES_EQUAL(table_view{values->view()}, sorted->view());
}

TEST_F(Sort, RejectsKeysOfAnotherLength) {
  auto const values = random_column(type_id::INT32, 10, 1, 0.0, input_);
  auto const keys   = random_column(type_id::INT32, 11, 1, 0.0, input_);
  EXPECT_THROW((void)sort(table_view{values->view()},
                          table_view{keys->view()},
                          {},
                          sort_stability::UNSTABLE,
                          default_stream(),
                          mrs_),
               invalid_argument);
  expect_resources(0);
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

class ConcurrentSortedOrderPoolSizes : public SortedOrderTest {};

TEST_F(ConcurrentSortedOrderPoolSizes, StableOrderIsTheSameForEveryPoolSize) {
  // Keys whose prefix is incomplete (strings, then a nullable INT32) so that ties are resolved
  // by the rows, bucketed (strings are encoded once) and not (a smaller slice); and a heavy
  // INT32 key whose bucket sort is declined on more than one thread.
  std::size_t const rows = 200000;
  auto const text        = random_column(type_id::STRING, rows, 61, 0.05, input_, 3);
  auto const number      = random_column(type_id::INT32, rows, 62, 0.1, input_);
  auto* values           = number->mutable_data<std::int32_t>();
  for (std::size_t row = 0; row < rows; ++row) {
    values[row] =
      row % 3 == 0 ? 0 : static_cast<std::int32_t>(static_cast<std::uint32_t>(values[row]) % 50);
  }
  table_view const keys{text->view(), number->view()};
  sort_order const orders{{order::ASCENDING, null_order::BEFORE},
                          {order::DESCENDING, null_order::AFTER}};
  std::vector<std::uint64_t> one_thread;
  for (std::size_t const threads : POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    worker_threads_guard const pool{threads};
    check(keys, orders);
    check(slice(keys, 3, 90000), orders);
    check(table_view{number->view()}, sort_order{{order::ASCENDING, null_order::AFTER}});
    auto const result = sorted_order(keys, orders, sort_stability::STABLE, default_stream(), mrs_);
    if (threads == 1) {
      one_thread = to_vector(result->view());
    } else {
      EXPECT_EQ(to_vector(result->view()), one_thread);
    }
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

TEST(ConcurrentParallelGatherPoolSizes, GathersScattersAndPermutesForEveryPoolSize) {
  host_memory_resource host;
  auto const inputs       = two_inputs_of(50000, 30001, host);
  std::size_t const total = 80001;
  auto const runs         = stably_sorted_by_a_key_of(total, 40);  // scattered
  std::vector<std::uint64_t> shuffled(total);
  std::iota(shuffled.begin(), shuffled.end(), std::uint64_t{0});
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937_64{77});  // gathered
  // Many small pieces (a batch cut into chunks), an empty one, one of a single row.
  std::vector<std::size_t> chunks{0, 0, 1};
  while (chunks.back() + 2000 < total) {
    chunks.push_back(chunks.back() + 2000);
  }
  chunks.push_back(total);
  for (std::size_t const threads : POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    worker_threads_guard const pool{threads};
    expect_gathered_pieces(inputs, runs, {0, total}, host);
    expect_gathered_pieces(inputs, runs, chunks, host);
    expect_gathered_pieces(inputs, shuffled, {0, 1000, 1000, 1001, total / 2 + 7, total}, host);
    expect_gathered_pieces(inputs, shuffled, chunks, host);

    // Three owned tables permuted in place.
    std::vector<data_type> const types{
      data_type{type_id::INT64}, data_type{type_id::INT8}, data_type{type_id::INT16}};
    std::array<std::unique_ptr<table>, 3> owned{random_table(types, 30000, 81, 0.0, host),
                                                random_table(types, 1, 82, 0.0, host),
                                                random_table(types, 20000, 83, 0.0, host)};
    std::array<table_view, 3> const views{owned[0]->view(), owned[1]->view(), owned[2]->view()};
    auto const both       = concatenate(views, default_stream(), memory_resources{host});
    std::size_t const all = 50001;
    auto const order      = stably_sorted_by_a_key_of(all, 30);
    std::vector<std::uint64_t> ids;
    for (std::uint64_t const row : order) {
      ids.push_back(row < 30000    ? row
                    : row == 30000 ? std::uint64_t{1} << detail::SOURCE_ROW_BITS
                                   : (std::uint64_t{2} << detail::SOURCE_ROW_BITS) | (row - 30001));
    }
    std::array<table*, 3> const tables{owned[0].get(), owned[1].get(), owned[2].get()};
    std::vector<std::size_t> const plain{0, 1, 2};
    ASSERT_TRUE(detail::permute_in_place(
      tables, ids.data(), detail::SOURCE_ROW_BITS, plain, default_stream(), host));
    auto const map = make_fixed_column<std::uint64_t>(type_id::UINT64, order, {}, host);
    auto const expected =
      gather(both->view(), map->view(), out_of_bounds_policy::FAIL, default_stream(), host);
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 0, 30000), owned[0]->view());
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 30000, 30001), owned[1]->view());
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 30001, all), owned[2]->view());
  }
}

TEST_F(SortedOrder, BinaryKeysOrderBytewiseUnsignedAPrefixFirst) {
  // Bytes above 0x7F order after 0x7F (unsigned), a zero byte is a byte like any other, and a
  // value comes before the values it prefixes; nulls where the order puts them.
  std::vector<std::optional<std::string>> const values{std::string{"\x80", 1},
                                                       std::string{"\x7F", 1},
                                                       std::nullopt,
                                                       std::string{"a\0b", 3},
                                                       std::string{},
                                                       std::string{"a", 1},
                                                       std::string{"a\0", 2},
                                                       std::string{"\xFF\x00", 2}};
  auto const key = testing::make_binary_column(values, input_);
  table_view const keys{key->view()};
  auto const ascending =
    to_vector(sorted_order(keys, {}, sort_stability::STABLE, default_stream(), mrs_)->view());
  EXPECT_EQ(ascending, (std::vector<std::uint64_t>{2, 4, 5, 6, 3, 1, 0, 7}));
  sort_order const descending_nulls_last{column_order{order::DESCENDING, null_order::AFTER}};
  auto const descending = to_vector(
    sorted_order(keys, descending_nulls_last, sort_stability::STABLE, default_stream(), mrs_)
      ->view());
  EXPECT_EQ(descending, (std::vector<std::uint64_t>{7, 0, 1, 3, 6, 5, 4, 2}));
}

}  // namespace
}  // namespace spillway
