#include "ops/merge_cuts.hpp"
#include "ops/reference_order.hpp"
#include "ops/row_comparator.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

namespace spillway {
namespace {

using testing::random_column;

class Merge : public testing::ops_fixture {
 protected:
  /**
   * Cuts a random table into `pieces` pieces of random sizes (some empty), sorts each stably,
   * merges them, and compares with a stable sort of the concatenated sorted pieces.
   */
  void check(std::size_t pieces, std::size_t rows, sort_order const& orders) {
    SCOPED_TRACE("k = " + std::to_string(pieces));
    // Columns: a few-distinct INT32 key, a payload, a short STRING key (many ties).
    auto const first   = random_column(type_id::INT32, rows, pieces, 0.1, input_);
    auto const payload = random_column(type_id::FLOAT64, rows, pieces + 1, 0.1, input_);
    auto const second  = random_column(type_id::STRING, rows, pieces + 2, 0.1, input_, 2);
    // Make the INT32 key few-distinct so that rows tie across inputs.
    auto* ints = first->mutable_data<std::int32_t>();
    for (std::size_t row = 0; row < rows; ++row) {
      ints[row] = static_cast<std::int32_t>(static_cast<std::uint32_t>(ints[row]) % 4);
    }
    table_view const whole{first->view(), payload->view(), second->view()};
    std::vector<std::size_t> const key_columns{0, 2};

    std::mt19937 engine{static_cast<unsigned>(pieces)};
    std::vector<std::size_t> cuts{0};
    for (std::size_t piece = 1; piece < pieces; ++piece) {
      cuts.push_back(engine() % 5 == 0 ? cuts.back() : engine() % (rows + 1));
    }
    cuts.push_back(rows);
    std::sort(cuts.begin(), cuts.end());
    std::vector<std::pair<std::size_t, std::size_t>> ranges;
    for (std::size_t piece = 0; piece < pieces; ++piece) {
      ranges.emplace_back(cuts[piece], cuts[piece + 1]);
    }
    auto const merged = expect_merge_of_sorted_ranges(whole, ranges, key_columns, orders);
    expect_resources(merged->allocated_bytes());
    EXPECT_GT(temporary_.statistics().total_count, 0U);
  }

  /**
   * Sorts each range `[first, second)` of `whole` stably by `key_columns`, merges the sorted
   * ranges, and checks the merge against a stable sort of them one after the other.
   * @return the merge
   */
  std::unique_ptr<table> expect_merge_of_sorted_ranges(
    table_view const& whole,
    std::vector<std::pair<std::size_t, std::size_t>> const& ranges,
    std::vector<std::size_t> const& key_columns,
    sort_order const& orders) {
    std::vector<std::unique_ptr<table>> sorted_pieces;
    std::vector<table_view> views;
    for (auto const& [begin, end] : ranges) {
      table_view const part = slice(whole, begin, end);
      sorted_pieces.push_back(sort(
        part, part.select(key_columns), orders, sort_stability::STABLE, default_stream(), input_));
      views.push_back(sorted_pieces.back()->view());
    }
    auto const concatenated = concatenate(views, default_stream(), input_);
    auto const expected     = sort(concatenated->view(),
                               concatenated->view().select(key_columns),
                               orders,
                               sort_stability::STABLE,
                               default_stream(),
                               input_);
    auto merged             = spillway::merge(views, key_columns, orders, default_stream(), mrs_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), merged->view());
    return merged;
  }
};

TEST_F(Merge, EqualsAStableSortOfTheConcatenation) {
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  for (std::size_t const pieces : {1U, 2U, 7U, 64U}) {
    check(pieces, 1500, orders);
  }
  check(3, 500, {});
}

TEST_F(Merge, SingleNullFreeKeyOfEveryFixedWidthTypeInBothDirections) {
  // One fixed-width key without nulls takes the encoded-key path of the loser tree; it must order
  // exactly as the full comparison: -0.0 == 0.0, NaNs equal and above +inf, integer extremes.
  std::vector<double> const specials{0.0,
                                     -0.0,
                                     std::numeric_limits<double>::infinity(),
                                     -std::numeric_limits<double>::infinity(),
                                     std::numeric_limits<double>::quiet_NaN(),
                                     -std::numeric_limits<double>::quiet_NaN(),
                                     std::numeric_limits<double>::lowest(),
                                     std::numeric_limits<double>::max(),
                                     std::numeric_limits<double>::denorm_min()};
  for (data_type const type : testing::all_types()) {
    if (!is_fixed_width(type)) {
      continue;
    }
    for (order const direction : {order::ASCENDING, order::DESCENDING}) {
      SCOPED_TRACE(to_string(type) + (direction == order::ASCENDING ? " asc" : " desc"));
      auto const keys    = random_column(type, 900, 11, 0.0, input_);
      auto const payload = random_column(type_id::INT64, 900, 12, 0.0, input_);
      std::mt19937 engine{static_cast<unsigned>(type.id()) * 2 + (direction == order::ASCENDING)};
      visit_fixed_width(type, [&]<typename T>() {
        T* values = keys->template mutable_data<T>();
        for (std::size_t row = 0; row < 900; row += 7) {
          if constexpr (std::is_floating_point_v<T>) {
            // Random order, so that some inputs meet -0.0 before 0.0 and NaN before -NaN.
            values[row] = static_cast<T>(specials[engine() % specials.size()]);
          } else if (type.id() != type_id::BOOL8) {
            values[row] =
              (row / 7) % 2 == 0 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
          }
        }
      });
      table_view const whole{keys->view(), payload->view()};
      std::vector<std::size_t> const key_columns{0};
      sort_order const orders{{direction, null_order::BEFORE}};
      std::vector<std::pair<std::size_t, std::size_t>> ranges;
      for (std::size_t piece = 0; piece < 5; ++piece) {
        ranges.emplace_back(piece * 180, (piece + 1) * 180);
      }
      (void)expect_merge_of_sorted_ranges(whole, ranges, key_columns, orders);
    }
  }
}

/// Merges large enough to run on two threads (one tree from the front, one from the back).
class ConcurrentMerge : public Merge {};

TEST_F(ConcurrentMerge, MultiKeyNullableStringsMergeOnPrefixesOnTwoThreads) {
  // INT32 (nullable, few distinct) then a short STRING key: normalized prefixes that tie often
  // and are incomplete, so the row comparator breaks ties; both halves of the output must meet.
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  for (std::size_t const pieces : {2U, 7U, 64U}) {
    check(pieces, 40000, orders);
  }
}

TEST_F(Merge, NarrowedStringPrefixesLeaveTiesToTheFullStrings) {
  // Long random strings, one in 100 sharing its first 8 bytes with others: the merge's heads
  // narrow to one word and those rows are merged by their full strings.
  std::mt19937 engine{9};
  std::vector<std::optional<std::string>> values;
  for (std::size_t row = 0; row < 30000; ++row) {
    std::string value = row % 100 == 3 ? "samestem" : "";
    for (std::size_t letter = 0, letters = 10 + engine() % 11; letter < letters; ++letter) {
      value.push_back(static_cast<char>('a' + engine() % 26));
    }
    values.emplace_back(row % 40 == 1 ? std::nullopt : std::optional<std::string>{value});
  }
  auto const key = testing::make_string_column(values, input_);
  table_view const whole{key->view()};
  std::vector<std::size_t> const key_columns{0};
  for (auto const& orders : {sort_order{{order::ASCENDING, null_order::AFTER}},
                             sort_order{{order::DESCENDING, null_order::BEFORE}}}) {
    std::vector<std::unique_ptr<table>> pieces;
    std::vector<table_view> views;
    for (auto const& [begin, end] :
         {std::pair{0, 9000}, std::pair{9000, 21000}, std::pair{21000, 30000}}) {
      table_view const part =
        slice(whole, static_cast<std::size_t>(begin), static_cast<std::size_t>(end));
      pieces.push_back(sort(part, part, orders, sort_stability::STABLE, default_stream(), input_));
      views.push_back(pieces.back()->view());
    }
    auto const expected =
      sort(whole, whole, orders, sort_stability::STABLE, default_stream(), input_);
    auto const merged = spillway::merge(views, key_columns, orders, default_stream(), mrs_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), merged->view());
  }
}

TEST_F(ConcurrentMerge, HeadWordsAtTheExtremesTieWithRunOutInputsAndStillMerge) {
  // The tree gives an input that ran out the word that sorts last (all ones forward, zero in
  // reverse); INT64_MAX ascending and INT64_MIN ascending (read from the back) encode to those
  // very words, so these rows tie with run-out inputs and go to the full comparison.
  std::size_t const rows = 40000;
  std::mt19937 engine{21};
  std::vector<std::int64_t> first(rows);
  std::vector<std::int32_t> second(rows);
  constexpr std::array<std::int64_t, 3> EXTREMES{
    std::numeric_limits<std::int64_t>::min(), 0, std::numeric_limits<std::int64_t>::max()};
  for (std::size_t row = 0; row < rows; ++row) {
    first[row]  = EXTREMES[engine() % 3];
    second[row] = static_cast<std::int32_t>(engine() % 5);
  }
  auto const a = testing::make_fixed_column<std::int64_t>(type_id::INT64, first, {}, input_);
  auto const b = testing::make_fixed_column<std::int32_t>(type_id::INT32, second, {}, input_);
  table_view const whole{a->view(), b->view()};
  std::vector<std::size_t> const key_columns{0, 1};
  for (auto const& orders :
       {sort_order{{order::ASCENDING, null_order::AFTER}, {order::ASCENDING, null_order::AFTER}},
        sort_order{{order::DESCENDING, null_order::AFTER},
                   {order::DESCENDING, null_order::AFTER}}}) {
    // Inputs of very different lengths, so that some run out long before the others.
    (void)expect_merge_of_sorted_ranges(
      whole, {{0, 100}, {100, 30000}, {30000, 30001}, {30001, 40000}}, key_columns, orders);
  }
}

TEST_F(ConcurrentMerge, SingleKeysOnTwoThreadsEncodedAndNullable) {
  // A null-free INT64 key takes the encoded path; the same key with nulls takes the prefix path
  // with a complete prefix. Many duplicates cross the middle of the output.
  constexpr std::size_t ROWS = 50000;
  for (double const nulls : {0.0, 0.2}) {
    for (order const direction : {order::ASCENDING, order::DESCENDING}) {
      SCOPED_TRACE(std::to_string(nulls) + (direction == order::ASCENDING ? " asc" : " desc"));
      auto const keys    = random_column(type_id::INT64, ROWS, 21, nulls, input_);
      auto const payload = random_column(type_id::STRING, ROWS, 22, 0.1, input_, 12);
      auto* values       = keys->mutable_data<std::int64_t>();
      for (std::size_t row = 0; row < ROWS; ++row) {
        values[row] = static_cast<std::int64_t>(static_cast<std::uint64_t>(values[row]) % 97);
      }
      table_view const whole{keys->view(), payload->view()};
      std::vector<std::size_t> const key_columns{0};
      sort_order const orders{{direction, null_order::AFTER}};
      std::vector<std::pair<std::size_t, std::size_t>> ranges;
      for (std::size_t piece = 0; piece < 3; ++piece) {
        ranges.emplace_back(piece * ROWS / 3, (piece + 1) * ROWS / 3);
      }
      (void)expect_merge_of_sorted_ranges(whole, ranges, key_columns, orders);
    }
  }
}

TEST_F(ConcurrentMerge, UnsortedInputsStillGiveAPermutation) {
  // Not sorted: the two halves may not meet, and the merge must still return every row once.
  constexpr std::size_t ROWS = 60000;
  auto const keys            = random_column(type_id::INT64, ROWS, 31, 0.0, input_);
  std::vector<std::int64_t> ids(ROWS);
  std::iota(ids.begin(), ids.end(), 0);
  auto const payload = testing::make_fixed_column(data_type{type_id::INT64}, ids, {}, input_);
  // The first input runs high to low, the others are random: forward and backward trees disagree.
  auto* values = keys->mutable_data<std::int64_t>();
  for (std::size_t row = 0; row < ROWS / 3; ++row) {
    values[row] = static_cast<std::int64_t>(ROWS - row);
  }
  table_view const whole{keys->view(), payload->view()};
  std::vector<table_view> const views{
    slice(whole, 0, ROWS / 3), slice(whole, ROWS / 3, ROWS / 2), slice(whole, ROWS / 2, ROWS)};
  auto const merged = spillway::merge(views, {0}, {}, default_stream(), mrs_);
  ASSERT_EQ(merged->num_rows(), ROWS);
  std::vector<std::int64_t> seen(merged->view().column(1).data<std::int64_t>(),
                                 merged->view().column(1).data<std::int64_t>() + ROWS);
  std::sort(seen.begin(), seen.end());
  EXPECT_EQ(seen, ids);
}

TEST_F(Merge, MergeOrderNamesEachRowByInputAndRowInKeyThenInputOrder) {
  // Keys 0, 0, 1, 1, ... in each input: equal keys tie across inputs and go input by input.
  std::vector<std::unique_ptr<column>> keys;
  std::vector<table_view> inputs;
  for (std::size_t input = 0; input < 3; ++input) {
    std::vector<std::int64_t> values;
    for (std::size_t row = 0; row < 10 + input; ++row) {
      values.push_back(static_cast<std::int64_t>(row / 2));
    }
    keys.push_back(testing::make_fixed_column<std::int64_t>(type_id::INT64, values, {}, input_));
    inputs.push_back(table_view{keys.back()->view()});
  }
  auto const order = detail::merge_order(inputs, {0}, {}, default_stream(), mrs_);
  expect_resources(order->allocated_bytes());
  std::vector<std::uint64_t> const ids = testing::to_vector(order->view());
  std::vector<std::uint64_t> expected;
  for (std::int64_t key = 0; key < 6; ++key) {
    for (std::uint64_t input = 0; input < 3; ++input) {
      for (std::uint64_t row = 0; row < 10 + input; ++row) {
        if (static_cast<std::int64_t>(row / 2) == key) {
          expected.push_back((input << detail::SOURCE_ROW_BITS) | row);
        }
      }
    }
  }
  EXPECT_EQ(ids, expected);
  std::vector<table_view> const none;
  EXPECT_EQ(detail::merge_order(none, {0}, {}, default_stream(), mrs_)->size(), 0U);
}

TEST_F(Merge, AllInputsEmptyAndNoInputs) {
  auto const key = random_column(type_id::INT64, 0, 1, 0.0, input_);
  std::vector<table_view> const inputs{table_view{key->view()}, table_view{key->view()}};
  auto const merged = spillway::merge(inputs, {0}, {}, default_stream(), mrs_);
  EXPECT_EQ(merged->num_rows(), 0U);
  EXPECT_EQ(merged->num_columns(), 1U);
  expect_resources(merged->allocated_bytes());
  auto const nothing = spillway::merge({}, {0}, {}, default_stream(), mrs_);
  EXPECT_EQ(nothing->num_columns(), 0U);
}

TEST_F(Merge, RejectsMismatchedInputs) {
  auto const ints    = random_column(type_id::INT64, 5, 1, 0.0, input_);
  auto const strings = random_column(type_id::STRING, 5, 1, 0.0, input_);
  std::vector<table_view> const mixed{table_view{ints->view()}, table_view{strings->view()}};
  EXPECT_THROW((void)spillway::merge(mixed, {0}, {}, default_stream(), mrs_), invalid_argument);
  std::vector<table_view> const same{table_view{ints->view()}, table_view{ints->view()}};
  EXPECT_THROW((void)spillway::merge(same, {1}, {}, default_stream(), mrs_), invalid_argument);
  EXPECT_THROW((void)spillway::merge(same, {0}, {{}, {}}, default_stream(), mrs_),
               invalid_argument);
  expect_resources(0);
}

TEST_F(ConcurrentMerge, SameRowsForEveryPoolSize) {
  // Large enough for both halves on the pool; the same merge, byte for byte, at every size.
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE}};
  std::size_t const rows = 60000;
  auto const keys        = random_column(type_id::INT64, rows, 91, 0.1, input_);
  auto const payload     = random_column(type_id::STRING, rows, 92, 0.1, input_, 6);
  auto* values           = keys->mutable_data<std::int64_t>();
  for (std::size_t row = 0; row < rows; ++row) {
    values[row] = static_cast<std::int64_t>(static_cast<std::uint64_t>(values[row]) % 61);
  }
  table_view const whole{keys->view(), payload->view()};
  std::vector<std::pair<std::size_t, std::size_t>> const ranges{
    {0, 10000}, {10000, 10000}, {10000, 35000}, {35000, rows}};
  std::unique_ptr<table> one_thread;
  for (std::size_t const threads : testing::POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    testing::worker_threads_guard const pool{threads};
    check(7, 40000, orders);
    auto merged = expect_merge_of_sorted_ranges(
      whole, ranges, {0}, sort_order{{order::ASCENDING, null_order::AFTER}});
    if (one_thread == nullptr) {
      // Kept off the output resource, whose bytes `check` counts.
      std::array<table_view, 1> const copied{merged->view()};
      one_thread = concatenate(copied, default_stream(), input_);
    } else {
      SPILLWAY_EXPECT_TABLES_EQUAL(one_thread->view(), merged->view());
    }
  }
}

/// How the inputs of a merge cut for the pool are keyed: column 0 a number, column 1 a string,
/// column 2 a payload; which of them are keys, under which orders, and how the values repeat.
struct split_case {
  char const* name;
  data_type number_type;
  double number_nulls;
  std::uint64_t distinct;  ///< numbers modulo this (1: all equal); FLOAT64 picks specials
  double text_nulls;
  bool stems;  ///< long strings, a third sharing a 12-byte stem; else 0 to 2 letters
  std::vector<std::size_t> key_columns;
  sort_order orders;
};

/// Merges cut into parts for pools of every size: the order must be the one an independent
/// stable sort gives, and the same on every pool.
class SplitMerge : public Merge {
 protected:
  /// `sizes[i]` rows for input `i`, each sorted stably by the case's keys.
  std::vector<std::unique_ptr<table>> sorted_inputs(split_case const& keyed,
                                                    std::vector<std::size_t> const& sizes,
                                                    std::uint64_t seed) {
    std::vector<std::unique_ptr<table>> inputs;
    for (std::size_t input = 0; input < sizes.size(); ++input) {
      std::size_t const rows = sizes[input];
      std::uint64_t const at = seed * 1000 + input * 3;
      auto number = random_column(keyed.number_type, rows, at, keyed.number_nulls, input_);
      visit_fixed_width(keyed.number_type, [&]<typename T>() {
        T* values = number->template mutable_data<T>();
        for (std::size_t row = 0; row < rows; ++row) {
          if constexpr (std::is_floating_point_v<T>) {
            constexpr std::array<double, 8> SPECIALS{0.0,
                                                     -0.0,
                                                     1.5,
                                                     -2.0,
                                                     std::numeric_limits<double>::infinity(),
                                                     -std::numeric_limits<double>::infinity(),
                                                     std::numeric_limits<double>::quiet_NaN(),
                                                     -std::numeric_limits<double>::quiet_NaN()};
            auto const pick = static_cast<std::size_t>(std::fabs(values[row]) * 1000);
            values[row]     = static_cast<T>(SPECIALS[pick % SPECIALS.size()]);
          } else if constexpr (std::is_integral_v<T>) {
            values[row] = static_cast<T>(static_cast<std::uint64_t>(values[row]) % keyed.distinct);
          }
        }
      });
      std::unique_ptr<column> text;
      if (keyed.stems) {
        std::mt19937 engine{static_cast<unsigned>(at + 1)};
        std::vector<std::optional<std::string>> values;
        for (std::size_t row = 0; row < rows; ++row) {
          std::string value = engine() % 3 == 0 ? "commonstem12" : "";
          for (std::size_t letter = 0, letters = 4 + engine() % 9; letter < letters; ++letter) {
            value.push_back(static_cast<char>('a' + engine() % 3));
          }
          bool const null = static_cast<double>(engine() % 1000) < keyed.text_nulls * 1000;
          values.push_back(null ? std::nullopt : std::optional<std::string>{value});
        }
        text = testing::make_string_column(values, input_, true);
      } else {
        text = random_column(type_id::STRING, rows, at + 1, keyed.text_nulls, input_, 2);
      }
      auto const payload = random_column(type_id::INT64, rows, at + 2, 0.0, input_);
      table_view const whole{number->view(), text->view(), payload->view()};
      inputs.push_back(sort(whole,
                            whole.select(keyed.key_columns),
                            keyed.orders,
                            sort_stability::STABLE,
                            default_stream(),
                            input_));
      table_view const keys = inputs.back()->view().select(keyed.key_columns);
      for (std::size_t row = 1; row < rows; ++row) {
        EXPECT_LE(testing::reference_compare(keys, row - 1, keys, row, keyed.orders), 0)
          << "input " << input << " is not sorted at row " << row;
      }
    }
    return inputs;
  }

  /// The merge order by std::stable_sort of every row, in input order, by the reference order.
  static std::vector<std::uint64_t> stable_sorted_sources(std::vector<table_view> const& keys,
                                                          sort_order const& orders) {
    std::vector<std::uint64_t> sources;
    for (std::size_t input = 0; input < keys.size(); ++input) {
      for (std::size_t row = 0; row < keys[input].num_rows(); ++row) {
        sources.push_back((std::uint64_t{input} << detail::SOURCE_ROW_BITS) | row);
      }
    }
    auto const input_of = [](std::uint64_t source) { return source >> detail::SOURCE_ROW_BITS; };
    auto const row_of   = [](std::uint64_t source) {
      return source & ((std::uint64_t{1} << detail::SOURCE_ROW_BITS) - 1);
    };
    std::stable_sort(sources.begin(), sources.end(), [&](std::uint64_t lhs, std::uint64_t rhs) {
      return testing::reference_compare(
               keys[input_of(lhs)], row_of(lhs), keys[input_of(rhs)], row_of(rhs), orders) < 0;
    });
    return sources;
  }

  /**
   * Merges `inputs` on pools of every size, cut for the pool from `min_rows_per_part` rows per
   * part, and checks each order against the stable sort and against the pool of one thread.
   */
  void expect_same_order_on_every_pool(std::vector<std::unique_ptr<table>> const& inputs,
                                       split_case const& keyed,
                                       std::size_t min_rows_per_part) {
    std::vector<table_view> views;
    std::vector<table_view> keys;
    for (auto const& input : inputs) {
      views.push_back(input->view());
      keys.push_back(input->view().select(keyed.key_columns));
    }
    std::vector<std::uint64_t> const expected = stable_sorted_sources(keys, keyed.orders);
    std::vector<std::uint64_t> one_thread;
    for (std::size_t const threads : testing::POOL_SIZES) {
      SCOPED_TRACE(std::to_string(threads) + " threads");
      testing::worker_threads_guard const pool{threads};
      auto const order = detail::merge_order(
        views, keyed.key_columns, keyed.orders, default_stream(), mrs_, min_rows_per_part);
      std::vector<std::uint64_t> const sources = testing::to_vector(order->view());
      ASSERT_EQ(sources.size(), expected.size());
      std::size_t const first_wrong = static_cast<std::size_t>(
        std::mismatch(sources.begin(), sources.end(), expected.begin()).first - sources.begin());
      EXPECT_EQ(first_wrong, sources.size()) << "the merge differs from the stable sort first at "
                                                "output row "
                                             << first_wrong;
      if (threads == 1) {
        one_thread = sources;
      } else {
        EXPECT_EQ(sources, one_thread);
      }
    }
  }

  static std::vector<split_case> cases() {
    sort_order const asc{{order::ASCENDING, null_order::BEFORE}};
    sort_order const desc{{order::DESCENDING, null_order::AFTER}};
    data_type const int64{type_id::INT64};
    data_type const int32{type_id::INT32};
    return {
      {"encoded INT64 ascending, heavy duplicates", int64, 0.0, 50, 0.0, false, {0}, asc},
      {"encoded INT64 descending, three values", int64, 0.0, 3, 0.0, false, {0}, desc},
      {"encoded INT64, all keys equal", int64, 0.0, 1, 0.0, false, {0}, asc},
      {"encoded FLOAT64 -0.0, NaN, infinities",
       data_type{type_id::FLOAT64},
       0.0,
       0,
       0.0,
       false,
       {0},
       desc},
      {"INT32 nulls last",
       int32,
       0.2,
       40,
       0.0,
       false,
       {0},
       sort_order{{order::ASCENDING, null_order::AFTER}}},
      {"INT32 descending, nulls first",
       int32,
       0.3,
       7,
       0.0,
       false,
       {0},
       sort_order{{order::DESCENDING, null_order::BEFORE}}},
      {"INT32 all null or equal",
       int32,
       0.5,
       1,
       0.0,
       false,
       {0},
       sort_order{{order::ASCENDING, null_order::AFTER}}},
      {"INT32 descending nulls last, then short STRING nulls first",
       int32,
       0.1,
       4,
       0.1,
       false,
       {0, 1},
       sort_order{{order::DESCENDING, null_order::AFTER}, {order::ASCENDING, null_order::BEFORE}}},
      {"STRING with shared stems descending, then INT64",
       int64,
       0.0,
       5,
       0.05,
       true,
       {1, 0},
       sort_order{{order::DESCENDING, null_order::AFTER}, {order::ASCENDING, null_order::AFTER}}},
    };
  }

  /// `inputs` input sizes of about `rows` rows in all: varied with some empty, or one input
  /// holding most rows.
  static std::vector<std::size_t> input_sizes(std::size_t inputs,
                                              std::size_t rows,
                                              bool dominant,
                                              std::mt19937& engine) {
    std::size_t const mean = rows / inputs;
    std::vector<std::size_t> sizes(inputs);
    std::size_t const big = engine() % inputs;
    for (std::size_t input = 0; input < inputs; ++input) {
      if (dominant) {
        sizes[input] = input == big ? rows - mean : engine() % (mean / 4 + 1);
      } else {
        sizes[input] = engine() % 4 == 0 ? 0 : engine() % (2 * mean + 1);
      }
    }
    return sizes;
  }
};

TEST_F(SplitMerge, EveryKeyPathCutIntoPartsForEveryPoolSizeEqualsAStableSort) {
  // Parts of at least 37 rows: some 2500-row merges are cut into as many parts as the pool has
  // threads (16 parts on 16 threads), with every key path, 2 to 20 inputs, empty inputs and
  // one input holding nearly every row.
  std::mt19937 engine{5};
  std::uint64_t seed = 1;
  for (split_case const& keyed : cases()) {
    for (std::size_t const inputs : {2U, 3U, 5U, 11U, 20U}) {
      for (bool const dominant : {false, true}) {
        SCOPED_TRACE(std::string{keyed.name} + ", " + std::to_string(inputs) + " inputs" +
                     (dominant ? ", one dominant" : ""));
        auto const sizes        = input_sizes(inputs, 2500, dominant, engine);
        auto const sorted_views = sorted_inputs(keyed, sizes, ++seed);
        expect_same_order_on_every_pool(sorted_views, keyed, 37);
        if (HasFailure()) {
          return;
        }
      }
    }
  }
}

TEST_F(SplitMerge, LargeMergesCutAtTheDefaultSizeEqualAStableSort) {
  // 9 * 2^15 rows: 3 parts on 3 threads, 8 on 8, 9 on 16; halves on 2.
  std::mt19937 engine{6};
  std::vector<split_case> const all = cases();
  for (std::size_t const index : {std::size_t{0}, all.size() - 2}) {
    SCOPED_TRACE(all[index].name);
    auto const sizes  = input_sizes(7, 9 * detail::PARALLEL_MERGE_MIN_ROWS + 100, true, engine);
    auto const inputs = sorted_inputs(all[index], sizes, 90 + index);
    expect_same_order_on_every_pool(inputs, all[index], detail::PARALLEL_MERGE_MIN_ROWS);
  }
}

TEST_F(SplitMerge, UnsortedInputsCutIntoPartsStillGiveEveryRowOnce) {
  std::vector<std::unique_ptr<column>> columns;
  std::vector<table_view> inputs;
  std::size_t rows = 0;
  for (std::size_t input = 0; input < 6; ++input) {
    std::size_t const size = 300 + input * 211;
    columns.push_back(random_column(type_id::INT64, size, 70 + input, 0.0, input_));
    columns.push_back(random_column(type_id::STRING, size, 80 + input, 0.1, input_, 3));
    inputs.push_back(table_view{columns[columns.size() - 2]->view(), columns.back()->view()});
    rows += size;
  }
  for (auto const& key_columns : {std::vector<std::size_t>{0}, std::vector<std::size_t>{1, 0}}) {
    for (std::size_t const threads : testing::POOL_SIZES) {
      SCOPED_TRACE(std::to_string(threads) + " threads, " + std::to_string(key_columns.size()) +
                   " keys");
      testing::worker_threads_guard const pool{threads};
      auto const order = detail::merge_order(inputs, key_columns, {}, default_stream(), mrs_, 29);
      std::vector<std::uint64_t> sources = testing::to_vector(order->view());
      std::sort(sources.begin(), sources.end());
      std::vector<std::uint64_t> every;
      for (std::size_t input = 0; input < inputs.size(); ++input) {
        for (std::size_t row = 0; row < inputs[input].num_rows(); ++row) {
          every.push_back((std::uint64_t{input} << detail::SOURCE_ROW_BITS) | row);
        }
      }
      EXPECT_EQ(sources.size(), rows);
      EXPECT_EQ(sources, every);
    }
  }
}

TEST_F(SplitMerge, CutsAreEvenForInterleavedAndForDisjointInputs) {
  // Disjoint: sorted runs of consecutive values (presorted data), where cuts from one input's
  // rows alone would leave nearly everything to one part. Interleaved: random sorted runs.
  constexpr std::size_t RUNS  = 16;
  constexpr std::size_t ROWS  = 200000;
  constexpr std::size_t PARTS = 8;
  std::vector<std::int64_t> values(ROWS);
  std::iota(values.begin(), values.end(), 0);
  for (bool const disjoint : {true, false}) {
    SCOPED_TRACE(disjoint ? "disjoint" : "interleaved");
    if (!disjoint) {
      std::mt19937_64 engine{3};
      std::shuffle(values.begin(), values.end(), engine);
    }
    std::vector<std::unique_ptr<column>> columns;
    std::vector<table_view> keys;
    for (std::size_t run = 0; run < RUNS; ++run) {
      // Runs of different lengths: run r has (r + 1) shares.
      std::size_t const begin = ROWS * (run * (run + 1) / 2) / (RUNS * (RUNS + 1) / 2);
      std::size_t const end   = ROWS * ((run + 1) * (run + 2) / 2) / (RUNS * (RUNS + 1) / 2);
      std::vector<std::int64_t> run_values(values.begin() + static_cast<std::ptrdiff_t>(begin),
                                           values.begin() + static_cast<std::ptrdiff_t>(end));
      std::sort(run_values.begin(), run_values.end());
      columns.push_back(
        testing::make_fixed_column<std::int64_t>(type_id::INT64, run_values, {}, input_));
      keys.push_back(table_view{columns.back()->view()});
    }
    detail::row_comparator const comparator{keys.front(), sort_order{column_order{}}};
    testing::worker_threads_guard const pool{PARTS};
    detail::merge_cuts const cuts = detail::cut_merge(keys, ROWS, comparator, PARTS);
    ASSERT_EQ(cuts.parts(), PARTS);
    ASSERT_TRUE(cuts.consecutive());
    std::int64_t previous_last = -1;
    for (std::size_t part = 0; part < PARTS; ++part) {
      std::size_t const part_rows =
        (part + 1 < PARTS ? cuts.output_begin(part + 1) : ROWS) - cuts.output_begin(part);
      EXPECT_GE(part_rows, ROWS / PARTS * 3 / 4) << "part " << part;
      EXPECT_LE(part_rows, ROWS / PARTS * 5 / 4) << "part " << part;
      // Every value of a part is above every value of the part before (keys are distinct).
      std::int64_t first = std::numeric_limits<std::int64_t>::max();
      std::int64_t last  = -1;
      for (std::size_t run = 0; run < RUNS; ++run) {
        if (cuts.begin(part, run) < cuts.end(part, run)) {
          first = std::min(first, keys[run].column(0).data<std::int64_t>()[cuts.begin(part, run)]);
          last  = std::max(last, keys[run].column(0).data<std::int64_t>()[cuts.end(part, run) - 1]);
        }
      }
      EXPECT_GT(first, previous_last) << "part " << part;
      previous_last = last;
    }
  }
}

TEST_F(ConcurrentMerge, NoKeyColumnsConcatenatesTheInputsInOrder) {
  // Without key columns every row ties, so the stable merge keeps input order: all of input 0,
  // then input 1, ... Large enough to run in halves or cut into parts on every pool size.
  std::vector<std::size_t> const sizes{9000, 0, 21000, 1, 13000};
  std::vector<std::unique_ptr<column>> columns;
  std::vector<table_view> inputs;
  for (std::size_t input = 0; input < sizes.size(); ++input) {
    columns.push_back(random_column(type_id::INT64, sizes[input], 40 + input, 0.1, input_));
    columns.push_back(random_column(type_id::STRING, sizes[input], 50 + input, 0.1, input_, 4));
    inputs.push_back(table_view{columns[columns.size() - 2]->view(), columns.back()->view()});
  }
  auto const expected = concatenate(inputs, default_stream(), input_);
  std::vector<std::uint64_t> every;
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    for (std::size_t row = 0; row < inputs[input].num_rows(); ++row) {
      every.push_back((std::uint64_t{input} << detail::SOURCE_ROW_BITS) | row);
    }
  }
  for (std::size_t const threads : testing::POOL_SIZES) {
    SCOPED_TRACE(std::to_string(threads) + " threads");
    testing::worker_threads_guard const pool{threads};
    auto const merged = spillway::merge(inputs, {}, {}, default_stream(), mrs_);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), merged->view());
    auto const order = detail::merge_order(inputs, {}, {}, default_stream(), mrs_, 29);
    EXPECT_EQ(testing::to_vector(order->view()), every);
  }
  // Orders for keys that are not there are still refused.
  EXPECT_THROW(
    (void)spillway::merge(inputs, {}, sort_order{column_order{}}, default_stream(), mrs_),
    invalid_argument);
}

}  // namespace
}  // namespace spillway
