// The CUDA kernels' row comparison (compare_rows), run on the host against the CPU's
// row_comparator for every type, direction and null placement. Runs on every machine.
#include "ops/cuda/row_compare.hpp"
#include "ops/row_comparator.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <optional>
#include <random>
#include <string>
#include <vector>

namespace spillway {
namespace {

int sign(int value) { return (value > 0) - (value < 0); }

/// Every pair of rows of `lhs` and `rhs` (or a random sample of pairs when there are many),
/// compared by both.
void expect_same_order(table_view const& lhs, table_view const& rhs, sort_order const& orders) {
  detail::row_comparator const reference{lhs, orders};
  std::vector<detail::cuda::key_column> const left  = detail::cuda::key_columns_of(lhs, orders);
  std::vector<detail::cuda::key_column> const right = detail::cuda::key_columns_of(rhs, orders);
  std::mt19937_64 random{99};
  for (std::size_t pair = 0; pair < 20000; ++pair) {
    std::size_t const a = random() % lhs.num_rows();
    std::size_t const b = random() % rhs.num_rows();
    int const expected  = sign(reference.compare(lhs, a, rhs, b));
    int const actual =
      sign(detail::cuda::compare_rows(left.data(), a, right.data(), b, left.size()));
    ASSERT_EQ(actual, expected) << "rows " << a << " and " << b;
  }
}

TEST(RowCompare, MatchesTheRowComparatorForEveryTypeAndOrder) {
  host_memory_resource host;
  std::vector<column_order> const every{{order::ASCENDING, null_order::BEFORE},
                                        {order::ASCENDING, null_order::AFTER},
                                        {order::DESCENDING, null_order::BEFORE},
                                        {order::DESCENDING, null_order::AFTER}};
  for (data_type const type : testing::all_types()) {
    // Few distinct values, so that ties and equal prefixes are common.
    auto const lhs = testing::random_column(type, 500, 41, 0.2, host, 3);
    auto const rhs = testing::random_column(type, 400, 42, 0.2, host, 3);
    for (auto const& key_order : every) {
      SCOPED_TRACE(to_string(type));
      expect_same_order(
        table_view{slice(lhs->view(), 3, 500)}, table_view{rhs->view()}, {key_order});
    }
  }
}

TEST(RowCompare, SeveralKeysAndFloatSpecials) {
  host_memory_resource host;
  double const nan  = std::numeric_limits<double>::quiet_NaN();
  auto const floats = testing::make_fixed_column<double>(
    data_type{type_id::FLOAT64},
    {0.0, -0.0, nan, -nan, std::numeric_limits<double>::infinity(), -1.0, 0.0, nan},
    {true, true, true, true, true, true, false, true},
    host);
  auto const text = testing::make_string_column(
    {"a", "ab", std::string{"a\0", 2}, "", std::nullopt, "b", "ab", "a"}, host);
  table_view const keys{floats->view(), text->view()};
  for (auto direction : {order::ASCENDING, order::DESCENDING}) {
    expect_same_order(
      keys, keys, {{direction, null_order::AFTER}, {order::DESCENDING, null_order::BEFORE}});
  }
}

}  // namespace
}  // namespace spillway
