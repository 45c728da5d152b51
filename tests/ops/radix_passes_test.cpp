// The CUDA sort's pass plan and images, run on the host with std::stable_sort in place of CUB's
// radix sort: the same plan must give the reference stable order for every type, direction and
// null placement. Runs on every machine.
#include "ops/cuda/radix_passes.hpp"
#include "ops/reference_order.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

using detail::cuda::pass_image;
using detail::cuda::plan_passes;
using detail::cuda::radix_pass;
using testing::random_column;
using testing::reference_sorted_order;

/// The device sort's algorithm on the host: every pass encodes the rows in the current order
/// and sorts them stably by the pass's bits.
std::vector<std::uint64_t> passes_order(table_view const& keys, sort_order const& orders) {
  std::vector<std::uint64_t> longest(keys.num_columns(), 0);
  for (std::size_t c = 0; c < keys.num_columns(); ++c) {
    column_view const& key = keys.column(c);
    if (is_fixed_width(key.type())) {
      continue;
    }
    for (std::size_t row = 0; row < key.size(); ++row) {
      if (key.is_valid(row)) {
        longest[c] = std::max<std::uint64_t>(longest[c], key.string_at(row).size());
      }
    }
  }
  std::vector<std::uint64_t> rows(keys.num_rows());
  std::iota(rows.begin(), rows.end(), 0);
  std::vector<std::pair<std::uint64_t, std::uint64_t>> records(rows.size());
  for (radix_pass const& pass : plan_passes(keys, orders, longest)) {
    std::uint64_t const mask = detail::cuda::low_bits(pass.bits);
    for (std::size_t i = 0; i < rows.size(); ++i) {
      std::uint64_t const image = pass_image(pass, rows[i]);
      EXPECT_EQ(image & ~mask, 0U) << "an image has bits above the pass's " << pass.bits;
      records[i] = {image & mask, rows[i]};
    }
    std::stable_sort(records.begin(), records.end(), [](auto const& a, auto const& b) {
      return a.first < b.first;
    });
    for (std::size_t i = 0; i < rows.size(); ++i) {
      rows[i] = records[i].second;
    }
  }
  return rows;
}

std::vector<column_order> every_column_order() {
  return {{order::ASCENDING, null_order::BEFORE},
          {order::ASCENDING, null_order::AFTER},
          {order::DESCENDING, null_order::BEFORE},
          {order::DESCENDING, null_order::AFTER}};
}

TEST(RadixPasses, EveryTypeInEveryOrderWithAndWithoutNulls) {
  host_memory_resource host;
  for (data_type const type : testing::all_types()) {
    for (double const nulls : {0.0, 0.3}) {
      auto const key = random_column(type, 3000, 21, nulls, host, 30);
      // From an unaligned offset, so that masks and offsets are read where the view starts.
      column_view const rows = slice(key->view(), 5, 2990);
      for (auto const& key_order : every_column_order()) {
        SCOPED_TRACE(to_string(type) + (nulls > 0 ? " with nulls" : ""));
        table_view const keys{rows};
        ASSERT_EQ(passes_order(keys, {key_order}), reference_sorted_order(keys, {key_order}));
      }
    }
  }
}

TEST(RadixPasses, FloatSpecialsAndStringPrefixes) {
  host_memory_resource host;
  double const nan  = std::numeric_limits<double>::quiet_NaN();
  double const inf  = std::numeric_limits<double>::infinity();
  auto const floats = testing::make_fixed_column<double>(
    data_type{type_id::FLOAT64}, {0.0, -0.0, nan, -nan, inf, -inf, 1.5, -1.5, 0.0, nan}, {}, host);
  auto const singles = testing::make_fixed_column<float>(
    data_type{type_id::FLOAT32},
    {0.0F, -0.0F, std::numeric_limits<float>::quiet_NaN(), -1.0F, 2.0F},
    {},
    host);
  auto const strings = testing::make_string_column({"ab",
                                                    std::string{"ab\0", 3},
                                                    "a",
                                                    "",
                                                    std::nullopt,
                                                    "abcdefghij",
                                                    "abcdefgh",
                                                    "abcdefghi",
                                                    std::string{"\xff", 1},
                                                    "abcdefgh"},
                                                   host);
  for (auto const& key_order : every_column_order()) {
    for (column const* key : {floats.get(), singles.get(), strings.get()}) {
      table_view const keys{key->view()};
      ASSERT_EQ(passes_order(keys, {key_order}), reference_sorted_order(keys, {key_order}))
        << to_string(key->type());
    }
  }
}

TEST(RadixPasses, SeveralKeysInMixedDirections) {
  host_memory_resource host;
  auto const few  = random_column(data_type{type_id::INT8}, 4000, 22, 0.1, host);
  auto const text = random_column(data_type{type_id::STRING}, 4000, 23, 0.05, host, 3);
  auto const when =
    random_column(data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}, 4000, 24, 0.2, host);
  table_view const keys{few->view(), text->view(), when->view()};
  sort_order const orders{{order::DESCENDING, null_order::AFTER},
                          {order::ASCENDING, null_order::BEFORE},
                          {order::DESCENDING, null_order::BEFORE}};
  EXPECT_EQ(passes_order(keys, orders), reference_sorted_order(keys, orders));
}

TEST(RadixPasses, PlanUsesOnlyTheBitsEachPassNeeds) {
  host_memory_resource host;
  auto const small = testing::make_fixed_column<std::int16_t>(
    data_type{type_id::INT16}, {1, 2, 3}, {true, false, true}, host);
  auto const text = testing::make_string_column({"a", "abcdefghijklmnopq"}, host);
  auto const passes =
    plan_passes(table_view{small->view()}, {column_order{}}, std::vector<std::uint64_t>{0});
  ASSERT_EQ(passes.size(), 2U);
  EXPECT_EQ(passes[0].bits, 16U);
  EXPECT_EQ(passes[1].kind, detail::cuda::pass_kind::NULLS);
  EXPECT_EQ(passes[1].bits, 1U);
  // 17 bytes: a 5-bit length, then chunks 2, 1 and 0.
  auto const string_passes =
    plan_passes(table_view{text->view()}, {column_order{}}, std::vector<std::uint64_t>{17});
  ASSERT_EQ(string_passes.size(), 4U);
  EXPECT_EQ(string_passes[0].kind, detail::cuda::pass_kind::STRING_LENGTH);
  EXPECT_EQ(string_passes[0].bits, 5U);
  EXPECT_EQ(string_passes[1].chunk, 2U);
  EXPECT_EQ(string_passes[3].chunk, 0U);
}

}  // namespace
}  // namespace spillway
