/**
 * @file sort_test.cpp
 * @brief `sorted_order` on the CPU against the reference order: every type, order and shape of
 * keys, the radix and bucket paths, prefixes narrower than the keys, and every pool size.
 */
#include "ops/normalized_key.hpp"
#include "ops/reference_order.hpp"
#include "ops/sort_test_support.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using testing::every_column_order;
using testing::int64_keys;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_column;
using testing::SortedOrderTest;
using testing::to_vector;

class SortedOrder : public SortedOrderTest {};
class ConcurrentSortedOrder : public SortedOrderTest {
 protected:
  /// Sorts `rows` rows of heavy keys (see HeavyKeysTakeAThreeWayPassAtEverySize) and checks them.
  void check_heavy_keys(std::size_t rows);
};

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

void ConcurrentSortedOrder::check_heavy_keys(std::size_t rows) {
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

TEST_F(ConcurrentSortedOrder, HeavyKeysTakeAThreeWayPassAtEverySize) {
  // A prefix most probes share takes a three-way pass around it, in halves of over 2 MiB of
  // records (which then take MSD passes) and in cache-sized inputs (which then take LSD passes,
  // as a sort's chunks do). Heavy keys in the middle of the range (rows on both sides), two
  // heavy keys, and a heavy first key with a random second one.
  for (std::size_t const rows : {std::size_t{300000}, std::size_t{20000}}) {
    SCOPED_TRACE(std::to_string(rows) + " rows");
    check_heavy_keys(rows);
  }
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

// ---- the same results for every worker pool size ----

using testing::POOL_SIZES;
using testing::worker_threads_guard;

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

}  // namespace
}  // namespace spillway
