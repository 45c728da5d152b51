/**
 * @file reference_order.hpp
 * @brief The key order written out plainly, value by value, independent of the ops layer's
 * comparator and normalized keys, plus the resource fixture the ops tests share.
 */
#pragma once

#include "testing/default_resource_guard.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ops/sort_order.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <string_view>
#include <vector>

namespace spillway::testing {

/// Three-way comparison of two valid values of the same type, by the documented rules.
inline int reference_compare_values(column_view const& lhs,
                                    std::size_t lhs_row,
                                    column_view const& rhs,
                                    std::size_t rhs_row) {
  if (!is_fixed_width(lhs.type())) {
    std::string_view const a = lhs.string_at(lhs_row);
    std::string_view const b = rhs.string_at(rhs_row);
    for (std::size_t index = 0; index < std::min(a.size(), b.size()); ++index) {
      auto const x = static_cast<unsigned char>(a[index]);
      auto const y = static_cast<unsigned char>(b[index]);
      if (x != y) {
        return x < y ? -1 : 1;
      }
    }
    return a.size() == b.size() ? 0 : (a.size() < b.size() ? -1 : 1);
  }
  return visit_fixed_width(lhs.type(), [&]<typename T>() {
    T const a = lhs.data<T>()[lhs_row];
    T const b = rhs.data<T>()[rhs_row];
    if constexpr (std::is_floating_point_v<T>) {
      if (std::isnan(a) && std::isnan(b)) {
        return 0;
      }
      if (std::isnan(a)) {
        return 1;
      }
      if (std::isnan(b)) {
        return -1;
      }
    }
    return a < b ? -1 : (a > b ? 1 : 0);
  });
}

/// Three-way comparison of key rows under `orders` (empty: all ASCENDING, nulls BEFORE).
inline int reference_compare(table_view const& lhs,
                             std::size_t lhs_row,
                             table_view const& rhs,
                             std::size_t rhs_row,
                             sort_order const& orders) {
  for (std::size_t index = 0; index < lhs.num_columns(); ++index) {
    column_order const key = orders.empty() ? column_order{} : orders[index];
    bool const a_null      = lhs.column(index).is_null(lhs_row);
    bool const b_null      = rhs.column(index).is_null(rhs_row);
    if (a_null && b_null) {
      continue;
    }
    if (a_null != b_null) {
      bool const a_first = a_null == (key.nulls == null_order::BEFORE);
      return a_first ? -1 : 1;
    }
    int result = reference_compare_values(lhs.column(index), lhs_row, rhs.column(index), rhs_row);
    if (key.direction == order::DESCENDING) {
      result = -result;
    }
    if (result != 0) {
      return result;
    }
  }
  return 0;
}

/// The stable sorted order of `keys` by `std::stable_sort`.
inline std::vector<std::uint64_t> reference_sorted_order(table_view const& keys,
                                                         sort_order const& orders) {
  std::vector<std::uint64_t> rows(keys.num_rows());
  std::iota(rows.begin(), rows.end(), 0);
  std::stable_sort(rows.begin(), rows.end(), [&](std::uint64_t a, std::uint64_t b) {
    return reference_compare(keys, a, keys, b, orders) < 0;
  });
  return rows;
}

/// The values of a UINT64 column.
inline std::vector<std::uint64_t> to_vector(column_view const& view) {
  EXPECT_EQ(view.type().id(), type_id::UINT64);
  EXPECT_FALSE(view.has_nulls());
  std::uint64_t const* data = view.data<std::uint64_t>();
  return {data, data + view.size()};
}

/**
 * Inputs come from `input_`; operators get `mrs_` (output and temporary counted separately)
 * with the default-resource validation switch on.
 */
class ops_fixture : public ::testing::Test {
 protected:
  /// Checks that the output resource holds exactly `output_bytes` and the temporary none.
  void expect_resources(std::size_t output_bytes) const {
    EXPECT_EQ(output_.statistics().current_bytes, output_bytes)
      << "bytes outstanding on the output resource are not the result's";
    EXPECT_EQ(temporary_.statistics().current_bytes, 0U) << "scratch was not freed";
  }

  host_memory_resource input_;
  host_memory_resource device_;
  statistics_resource_adaptor output_{device_};
  statistics_resource_adaptor temporary_{device_};
  memory_resources mrs_{output_, temporary_};
  default_resource_guard guard_;
};

}  // namespace spillway::testing
