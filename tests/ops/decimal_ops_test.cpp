// Decimal keys through the operators: sorted by value (asc/desc, nulls first/last, beyond 64
// bits), checked in order, hashed equal when equal. The values of each type are listed in
// ascending order by construction, so the expected order is their ranks, not a reference sort.
#include "ops/cuda/radix_passes.hpp"
#include "ops/cuda/row_compare.hpp"
#include "ops/cuda/row_hash.hpp"
#include "ops/reference_order.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/ops/merge.hpp>
#include <spillway/ops/order_check.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>
#include <xxhash.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

__extension__ using int128  = __int128;
__extension__ using uint128 = unsigned __int128;

/// A value of any decimal type as four 64-bit words, least significant first.
struct wide_value {
  std::uint64_t words[4];
};

wide_value from128(int128 value) {
  auto const fill = value < 0 ? ~std::uint64_t{0} : 0;
  return {{static_cast<std::uint64_t>(value), static_cast<std::uint64_t>(value >> 64), fill, fill}};
}

/// `sign * 2^power` plus `delta` (|delta| small), over 256 bits.
wide_value power_of_two(int sign, unsigned power, std::int64_t delta) {
  wide_value value{{0, 0, 0, 0}};
  value.words[power / 64] = std::uint64_t{1} << (power % 64);
  if (sign < 0) {  // negate
    std::uint64_t carry = 1;
    for (auto& word : value.words) {
      word  = ~word + carry;
      carry = (carry != 0 && word == 0) ? 1 : 0;
    }
  }
  wide_value const step = from128(delta);  // added with its sign extended
  uint128 carry         = 0;
  for (std::size_t word = 0; word < 4; ++word) {
    uint128 const sum = static_cast<uint128>(value.words[word]) + step.words[word] + carry;
    value.words[word] = static_cast<std::uint64_t>(sum);
    carry             = sum >> 64;
  }
  return value;
}

/// The distinct values of `type`, ascending.
std::vector<wide_value> ascending_values(type_id id) {
  int128 const one = 1;
  switch (id) {
    case type_id::DECIMAL32:
      return {from128(-999'999'999),
              from128(-1000),
              from128(-1),
              from128(0),
              from128(1),
              from128(7),
              from128(999'999'999)};
    case type_id::DECIMAL64:
      return {from128(-999'999'999'999'999'999),
              from128(-(one << 40)),
              from128(-1),
              from128(0),
              from128(1),
              from128(one << 40),
              from128(999'999'999'999'999'999)};
    case type_id::DECIMAL128:
      return {from128(-(one << 126)),
              from128(-(one << 100) - 1),
              from128(-(one << 64)),
              from128(-(one << 63) - 1),
              from128(-1),
              from128(0),
              from128(1),
              from128(one << 63),
              from128((one << 64) - 1),
              from128(one << 64),
              from128(one << 100),
              from128(one << 126)};
    default:
      return {power_of_two(-1, 250, 0),
              power_of_two(-1, 128, 0),
              power_of_two(-1, 64, -1),
              from128(-1),
              from128(0),
              from128(1),
              power_of_two(1, 64, 0),
              power_of_two(1, 128, -1),
              power_of_two(1, 128, 0),
              power_of_two(1, 200, 0),
              power_of_two(1, 250, 0)};
  }
}

std::vector<data_type> decimal_types() {
  return {data_type{type_id::DECIMAL32, 9, 2},
          data_type{type_id::DECIMAL64, 18, 2},
          data_type{type_id::DECIMAL128, 38, 2},
          data_type{type_id::DECIMAL256, 76, 2}};
}

/// A column of `type` holding value `ranks[row]` of `ascending_values` (null where none).
std::unique_ptr<column> decimal_column(data_type type,
                                       std::vector<std::optional<std::size_t>> const& ranks,
                                       resource_ref resource) {
  auto const values = ascending_values(type.id());
  bool const nulls  = std::any_of(ranks.begin(), ranks.end(), [](auto rank) { return !rank; });
  auto result       = make_fixed_width_column(type,
                                        ranks.size(),
                                        nulls ? mask_state::ALL_VALID : mask_state::UNALLOCATED,
                                        default_stream(),
                                        resource);
  std::size_t const width = size_of(type);
  for (std::size_t row = 0; row < ranks.size(); ++row) {
    auto* out = result->mutable_data<std::byte>() + row * width;
    if (!ranks[row]) {
      set_bit(result->mutable_null_mask(), row, false);
      std::memset(out, 0, width);
      continue;
    }
    std::memcpy(out, values[*ranks[row]].words, width);  // little-endian: the low bytes
  }
  result->recount_nulls();
  return result;
}

/// Ranks in a scrambled order with repeats, and a null every fifth row.
std::vector<std::optional<std::size_t>> scrambled_ranks(std::size_t count, std::size_t rows) {
  std::vector<std::optional<std::size_t>> ranks;
  for (std::size_t row = 0; row < rows; ++row) {
    ranks.push_back(row % 5 == 3 ? std::nullopt : std::optional<std::size_t>{(row * 7) % count});
  }
  return ranks;
}

std::vector<column_order> every_column_order() {
  return {{order::ASCENDING, null_order::BEFORE},
          {order::ASCENDING, null_order::AFTER},
          {order::DESCENDING, null_order::BEFORE},
          {order::DESCENDING, null_order::AFTER}};
}

/// Checks that `ranks` permuted by `order` is sorted by rank under `ordering`.
void expect_ranks_in_order(std::vector<std::optional<std::size_t>> const& ranks,
                           column_view const& order,
                           column_order ordering) {
  ASSERT_EQ(order.size(), ranks.size());
  std::vector<std::optional<std::size_t>> sorted;
  for (std::size_t row = 0; row < order.size(); ++row) {
    sorted.push_back(ranks[order.data<std::uint64_t>()[row]]);
  }
  std::size_t const nulls = static_cast<std::size_t>(
    std::count(sorted.begin(), sorted.end(), std::optional<std::size_t>{}));
  bool const before = ordering.nulls == null_order::BEFORE;
  for (std::size_t row = 0; row < sorted.size(); ++row) {
    bool const null_here = before ? row < nulls : row >= sorted.size() - nulls;
    ASSERT_EQ(!sorted[row].has_value(), null_here) << "row " << row;
  }
  for (std::size_t row = 1; row < sorted.size(); ++row) {
    if (!sorted[row] || !sorted[row - 1]) {
      continue;
    }
    if (ordering.direction == order::ASCENDING) {
      ASSERT_LE(*sorted[row - 1], *sorted[row]) << "row " << row;
    } else {
      ASSERT_GE(*sorted[row - 1], *sorted[row]) << "row " << row;
    }
  }
}

class DecimalOps : public testing::ops_fixture {};

TEST_F(DecimalOps, SortByValueInEveryOrder) {
  for (data_type const type : decimal_types()) {
    std::size_t const count = ascending_values(type.id()).size();
    auto const ranks        = scrambled_ranks(count, 301);
    auto const keys         = decimal_column(type, ranks, input_);
    for (auto const& ordering : every_column_order()) {
      SCOPED_TRACE(to_string(type) + (ordering.direction == order::ASCENDING ? " asc" : " desc") +
                   (ordering.nulls == null_order::BEFORE ? " nulls first" : " nulls last"));
      for (auto const stability : {sort_stability::STABLE, sort_stability::UNSTABLE}) {
        auto const order = sorted_order(
          table_view{keys->view()}, sort_order{ordering}, stability, default_stream(), mrs_);
        expect_ranks_in_order(ranks, order->view(), ordering);
        auto const sorted = gather(table_view{keys->view()},
                                   order->view(),
                                   out_of_bounds_policy::FAIL,
                                   default_stream(),
                                   mrs_);
        EXPECT_TRUE(is_sorted(sorted->view(), sort_order{ordering}));
        EXPECT_FALSE(is_sorted(table_view{keys->view()}, sort_order{ordering}));
      }
      // The device sort's passes, run on the host, order them the same way.
      auto const passes = detail::cuda::plan_passes(
        table_view{keys->view()}, sort_order{ordering}, std::vector<std::uint64_t>(1, 0));
      std::vector<std::uint64_t> rows(ranks.size());
      for (std::size_t row = 0; row < rows.size(); ++row) {
        rows[row] = row;
      }
      for (auto const& pass : passes) {
        std::stable_sort(rows.begin(), rows.end(), [&](std::uint64_t a, std::uint64_t b) {
          return detail::cuda::pass_image(pass, a) < detail::cuda::pass_image(pass, b);
        });
      }
      auto const device_order = testing::make_fixed_column<std::uint64_t>(
        type_id::UINT64, rows, std::vector<bool>(rows.size(), true), input_);
      expect_ranks_in_order(ranks, device_order->view(), ordering);
    }
  }
}

TEST_F(DecimalOps, TiesOnAWideDecimalAreBrokenByTheNextKey) {
  // A DECIMAL256 key does not fit the 24-byte prefix: ties go to the full comparison.
  for (data_type const type : decimal_types()) {
    SCOPED_TRACE(to_string(type));
    std::size_t const rows = 500;
    std::vector<std::optional<std::size_t>> first;
    std::vector<std::optional<std::size_t>> second;
    std::size_t const count = ascending_values(type.id()).size();
    for (std::size_t row = 0; row < rows; ++row) {
      first.emplace_back((row * 13) % 3 + count - 3);  // the three largest, many ties
      second.emplace_back((row * 31) % count);
    }
    auto const a = decimal_column(type, first, input_);
    auto const b = decimal_column(type, second, input_);
    sort_order const orders{{order::DESCENDING, null_order::AFTER},
                            {order::ASCENDING, null_order::BEFORE}};
    auto const order = sorted_order(
      table_view{a->view(), b->view()}, orders, sort_stability::STABLE, default_stream(), mrs_);
    for (std::size_t row = 1; row < rows; ++row) {
      auto const previous = order->view().data<std::uint64_t>()[row - 1];
      auto const current  = order->view().data<std::uint64_t>()[row];
      ASSERT_GE(*first[previous], *first[current]) << row;
      if (*first[previous] == *first[current]) {
        ASSERT_LE(*second[previous], *second[current]) << row;
      }
    }
  }
}

TEST_F(DecimalOps, MergeKeepsTheOrderAndTheOrderCheckFindsADescent) {
  for (data_type const type : decimal_types()) {
    SCOPED_TRACE(to_string(type));
    std::size_t const count = ascending_values(type.id()).size();
    std::vector<std::optional<std::size_t>> evens;
    std::vector<std::optional<std::size_t>> odds;
    for (std::size_t rank = 0; rank < count; ++rank) {
      (rank % 2 == 0 ? evens : odds).emplace_back(rank);
    }
    auto const left  = decimal_column(type, evens, input_);
    auto const right = decimal_column(type, odds, input_);
    std::vector<table_view> const inputs{table_view{left->view()}, table_view{right->view()}};
    auto const merged = merge(inputs, {0}, sort_order{}, default_stream(), mrs_);
    ASSERT_EQ(merged->num_rows(), count);
    std::vector<std::optional<std::size_t>> ascending;
    for (std::size_t rank = 0; rank < count; ++rank) {
      ascending.emplace_back(rank);
    }
    auto const expected = decimal_column(type, ascending, input_);
    SPILLWAY_EXPECT_TABLES_EQUAL(table_view{expected->view()}, merged->view());

    order_checker checker{{0}, sort_order{}, input_};
    EXPECT_FALSE(checker.next(table_view{expected->view()}, default_stream()).has_value());
    // The next batch starts below the last value: a descent at the batch's first row.
    auto const after = decimal_column(type, {count - 2, count - 1}, input_);
    EXPECT_EQ(checker.next(table_view{after->view()}, default_stream()), std::optional{count});
  }
}

TEST_F(DecimalOps, EqualValuesHashEquallyAsTheirBytes) {
  for (data_type const type : decimal_types()) {
    SCOPED_TRACE(to_string(type));
    std::size_t const count = ascending_values(type.id()).size();
    auto const ranks        = scrambled_ranks(count, 100);
    auto const keys         = decimal_column(type, ranks, input_);
    auto const hashes       = hash_rows(table_view{keys->view()}, 42, default_stream(), mrs_);
    auto const values       = ascending_values(type.id());
    for (std::size_t row = 0; row < ranks.size(); ++row) {
      std::uint64_t const expected =
        ranks[row] ? XXH3_64bits_withSeed(values[*ranks[row]].words, size_of(type), 42)
                   : XXH3_64bits_withSeed(nullptr, 0, 42 ^ null_hash_salt);
      ASSERT_EQ(hashes->view().data<std::uint64_t>()[row], expected) << row;
      for (std::size_t other = 0; other < row; ++other) {
        if (ranks[other] == ranks[row]) {
          ASSERT_EQ(hashes->view().data<std::uint64_t>()[other],
                    hashes->view().data<std::uint64_t>()[row]);
        }
      }
    }
    // The device's row hash is the same function.
    auto const columns = detail::cuda::key_columns_of(table_view{keys->view()}, sort_order{{}});
    for (std::size_t row = 0; row < ranks.size(); ++row) {
      ASSERT_EQ(detail::cuda::row_hash(columns.data(), 1, row, 42, null_hash_salt),
                hashes->view().data<std::uint64_t>()[row])
        << row;
    }
    // Hash partitioning keeps every row, and puts equal values in one partition.
    std::vector<std::size_t> const key_columns{0};
    auto const parts =
      hash_partition(table_view{keys->view()}, key_columns, 7, 0, default_stream(), mrs_);
    std::size_t rows = 0;
    std::vector<std::string> seen;  // the values of each partition, as text
    for (table_view const& part : parts.partitions()) {
      rows += part.num_rows();
      for (std::size_t row = 0; row < part.num_rows(); ++row) {
        std::string const text = testing::row_to_string(part.column(0), row);
        EXPECT_EQ(std::count(seen.begin(), seen.end(), text), 0) << text << " in two partitions";
      }
      for (std::size_t row = 0; row < part.num_rows(); ++row) {
        seen.push_back(testing::row_to_string(part.column(0), row));
      }
    }
    EXPECT_EQ(rows, ranks.size());
  }
}

}  // namespace
}  // namespace spillway
