/**
 * @file parallel_gather_test.cpp
 * @brief The gathers, scatters and in-place permutations of src/ops/parallel_gather.hpp, on one
 * thread and on the worker pool, for every pool size.
 */
#include "ops/parallel_gather.hpp"
#include "ops/reference_order.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/gather.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
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

// ---- the same results for every worker pool size ----

using testing::POOL_SIZES;
using testing::worker_threads_guard;

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

}  // namespace
}  // namespace spillway
