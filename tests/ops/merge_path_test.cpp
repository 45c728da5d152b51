// The device merge's merge path (merge_path.hpp), run on the host: splits against a stable merge,
// rounds of pairs in shares of any size against std::stable_sort, and the kernel's comparison of
// source ids against the CPU's merge_order for every type and order. Runs on every machine.
#include "ops/cuda/merge_path.hpp"
#include "ops/cuda/row_compare.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <random>
#include <vector>

namespace spillway {
namespace {

using detail::SOURCE_ROW_BITS;
using detail::cuda::merge_path_split;
using detail::cuda::merge_round_share;
using detail::cuda::merge_rounds;
using detail::cuda::merged_run_bounds;

/// A value and where it came from, so that the order of ties shows, and how often it was
/// written, so that two shares writing one element show.
struct tagged {
  int key             = 0;
  std::uint64_t order = 0;  ///< its place in the concatenated input
  int writes          = 0;

  tagged() = default;
  tagged(int k, std::uint64_t o) : key(k), order(o) {}
  tagged(tagged const& other) : key(other.key), order(other.order) {}
  tagged& operator=(tagged const& other) {
    key   = other.key;
    order = other.order;
    ++writes;
    return *this;
  }
  ~tagged() = default;
  friend bool operator==(tagged const& x, tagged const& y) {
    return x.key == y.key && x.order == y.order;
  }
};

std::vector<tagged> sorted_run(std::size_t size, int distinct, std::mt19937_64& random) {
  std::vector<tagged> run(size);
  for (auto& value : run) {
    value.key = static_cast<int>(random() % static_cast<std::uint64_t>(distinct));
  }
  std::sort(run.begin(), run.end(), [](tagged x, tagged y) { return x.key < y.key; });
  return run;
}

/**
 * @brief Merges `runs` in rounds of shares of `share` elements (each share as one thread of the
 * kernel would), ping-ponging between two arrays as the kernel does.
 */
std::vector<tagged> merge_in_rounds(std::vector<std::vector<tagged>> const& runs,
                                    std::size_t share) {
  std::vector<tagged> current;
  std::vector<std::uint64_t> bounds{0};
  for (auto const& run : runs) {
    current.insert(current.end(), run.begin(), run.end());
    bounds.push_back(current.size());
  }
  for (std::size_t index = 0; index < current.size(); ++index) {
    current[index].order = index;
  }
  std::vector<tagged> next(current.size());
  auto const before_or_tie = [](tagged const& x, tagged const& y) { return x.key <= y.key; };
  std::size_t rounds       = 0;
  while (bounds.size() > 2) {
    std::fill(next.begin(), next.end(), tagged{-1, 0});
    for (auto& element : next) {
      element.writes = 0;
    }
    for (std::size_t begin = 0; begin < current.size(); begin += share) {
      merge_round_share(next.data(),
                        current.data(),
                        bounds.data(),
                        bounds.size() - 1,
                        begin,
                        std::min(begin + share, current.size()),
                        before_or_tie);
    }
    for (std::size_t index = 0; index < next.size(); ++index) {
      EXPECT_EQ(next[index].writes, 1) << "element " << index << " of round " << rounds;
    }
    std::swap(current, next);
    bounds = merged_run_bounds(bounds);
    ++rounds;
  }
  EXPECT_EQ(rounds, merge_rounds(runs.size()));
  return current;
}

TEST(MergePath, SplitsMatchAStableMergeOnEveryDiagonal) {
  std::mt19937_64 random{5};
  for (auto const& [a_size, b_size] : {std::pair<std::size_t, std::size_t>{0, 0},
                                       {0, 7},
                                       {7, 0},
                                       {1, 1},
                                       {13, 5},
                                       {64, 64},
                                       {100, 3}}) {
    for (int const distinct : {1, 3, 1000}) {
      auto const a       = sorted_run(a_size, distinct, random);
      auto const b       = sorted_run(b_size, distinct, random);
      auto const a_first = [&](std::size_t i, std::size_t j) { return a[i].key <= b[j].key; };
      // The reference: taken from `a` on ties, as std::merge does.
      std::size_t from_a = 0;
      std::size_t i      = 0;
      std::size_t j      = 0;
      for (std::size_t diagonal = 0; diagonal <= a_size + b_size; ++diagonal) {
        ASSERT_EQ(merge_path_split(diagonal, a_size, b_size, a_first), from_a)
          << a_size << " + " << b_size << ", " << distinct << " keys, diagonal " << diagonal;
        if (j >= b_size || (i < a_size && a[i].key <= b[j].key)) {
          ++i;
          ++from_a;
        } else {
          ++j;
        }
      }
    }
  }
}

TEST(MergePath, RoundsOfPairsInSharesOfAnySizeGiveTheStableMerge) {
  std::mt19937_64 random{8};
  for (std::size_t const inputs : {1U, 2U, 3U, 5U, 8U, 13U}) {
    for (int const distinct : {0, 1, 4, 100000}) {  // 0: every run empty but the last
      std::vector<std::vector<tagged>> runs;
      std::vector<tagged> expected;
      for (std::size_t input = 0; input < inputs; ++input) {
        // Some runs empty, some of one element.
        std::size_t const size = distinct == 0
                                   ? (input + 1 == inputs ? 5 : 0)
                                   : (input % 4 == 2 ? 0 : (input % 4 == 3 ? 1 : random() % 300));
        runs.push_back(sorted_run(size, std::max(distinct, 1), random));
      }
      for (auto const& run : runs) {
        expected.insert(expected.end(), run.begin(), run.end());
      }
      for (std::size_t index = 0; index < expected.size(); ++index) {
        expected[index].order = index;
      }
      std::stable_sort(
        expected.begin(), expected.end(), [](tagged x, tagged y) { return x.key < y.key; });
      for (std::size_t const share : {std::size_t{1},
                                      std::size_t{3},
                                      detail::cuda::MERGE_SHARE,
                                      std::size_t{64},
                                      std::size_t{100000}}) {
        SCOPED_TRACE(std::to_string(inputs) + " inputs, " + std::to_string(distinct) +
                     " keys, shares of " + std::to_string(share));
        EXPECT_EQ(merge_in_rounds(runs, share), expected);
      }
    }
  }
}

TEST(MergePath, SourceIdsComparedAsTheKernelDoesGiveTheCpuMergeOrder) {
  host_memory_resource host;
  std::vector<std::size_t> const key_columns{4, 12};
  for (auto const& orders :
       {sort_order{{order::DESCENDING, null_order::BEFORE}, {order::ASCENDING, null_order::AFTER}},
        sort_order{{order::ASCENDING, null_order::AFTER},
                   {order::DESCENDING, null_order::BEFORE}}}) {
    std::vector<std::unique_ptr<table>> pieces;
    std::vector<table_view> views;
    std::vector<detail::cuda::key_column> columns;  // input i's keys at [2 i, 2 i + 2)
    std::vector<std::uint64_t> bounds{0};
    std::vector<std::uint64_t> ids;
    for (std::size_t piece = 0; piece < 5; ++piece) {
      std::size_t const rows = piece == 2 ? 0 : 300 + 37 * piece;
      auto const values = testing::random_table(testing::all_types(), rows, 30 + piece, 0.1, host);
      pieces.push_back(sort(values->view(),
                            values->view().select(key_columns),
                            orders,
                            sort_stability::STABLE,
                            default_stream(),
                            memory_resources{host}));
      views.push_back(pieces.back()->view());
      auto const keys = detail::cuda::key_columns_of(views.back().select(key_columns), orders);
      columns.insert(columns.end(), keys.begin(), keys.end());
      for (std::size_t row = 0; row < rows; ++row) {
        ids.push_back((std::uint64_t{piece} << SOURCE_ROW_BITS) | row);
      }
      bounds.push_back(ids.size());
    }
    std::size_t const count  = key_columns.size();
    auto const before_or_tie = [&](std::uint64_t x, std::uint64_t y) {
      std::uint64_t const row_mask = (std::uint64_t{1} << SOURCE_ROW_BITS) - 1;
      return detail::cuda::compare_rows(&columns[(x >> SOURCE_ROW_BITS) * count],
                                        x & row_mask,
                                        &columns[(y >> SOURCE_ROW_BITS) * count],
                                        y & row_mask,
                                        count) <= 0;
    };
    std::vector<std::uint64_t> next(ids.size());
    while (bounds.size() > 2) {
      for (std::size_t begin = 0; begin < ids.size(); begin += detail::cuda::MERGE_SHARE) {
        merge_round_share(next.data(),
                          ids.data(),
                          bounds.data(),
                          bounds.size() - 1,
                          begin,
                          std::min(begin + detail::cuda::MERGE_SHARE, ids.size()),
                          before_or_tie);
      }
      std::swap(ids, next);
      bounds = merged_run_bounds(bounds);
    }
    auto const expected =
      detail::merge_order(views, key_columns, orders, default_stream(), memory_resources{host});
    auto const* const begin = expected->view().data<std::uint64_t>();
    EXPECT_EQ(ids, std::vector<std::uint64_t>(begin, begin + expected->size()));
  }
}

}  // namespace
}  // namespace spillway
