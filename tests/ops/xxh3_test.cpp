// The CUDA kernels' XXH3 (xxh3.hpp), run on the host against the xxhash library's
// XXH3_64bits_withSeed: every length through the short, middle and long paths, several seeds;
// and their row hash (row_hash.hpp) against hash_rows. Runs on every machine.
#include "ops/cuda/row_hash.hpp"
#include "ops/cuda/xxh3.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/partition.hpp>

#include <gtest/gtest.h>
#include <xxhash.h>

#include <cstdint>
#include <limits>
#include <random>
#include <vector>

namespace spillway {
namespace {

TEST(Xxh3, MatchesTheLibraryForEveryLengthAndSeed) {
  std::mt19937_64 random{2024};
  std::vector<std::uint8_t> bytes(3000);
  for (auto& byte : bytes) {
    byte = static_cast<std::uint8_t>(random());
  }
  for (std::uint64_t const seed :
       {std::uint64_t{0}, std::uint64_t{1}, std::uint64_t{0x9E3779B97F4A7C15ULL}, random()}) {
    for (std::size_t length = 0; length <= bytes.size(); length += length < 300 ? 1 : 97) {
      // From an odd offset too: the device reads bytes one at a time, the library may not.
      for (std::size_t offset : {0U, 3U}) {
        if (offset + length > bytes.size()) {
          continue;
        }
        ASSERT_EQ(detail::cuda::xxh3_64(bytes.data() + offset, length, seed),
                  XXH3_64bits_withSeed(bytes.data() + offset, length, seed))
          << "length " << length << ", seed " << seed << ", offset " << offset;
      }
    }
  }
}

TEST(Xxh3, RowHashMatchesHashRowsForEveryType) {
  host_memory_resource host;
  // Few distinct strings and small floats so that ties, empty strings, -0.0 and NaN occur.
  auto const keys       = testing::random_table(testing::all_types(), 3000, 77, 0.2, host);
  table_view const view = slice(keys->view(), 7, 2990);
  for (std::uint64_t const seed : {std::uint64_t{0}, std::uint64_t{42}}) {
    auto const expected = hash_rows(view, seed, default_stream(), memory_resources{host});
    std::vector<detail::cuda::key_column> const columns =
      detail::cuda::key_columns_of(view, sort_order(view.num_columns()));
    for (std::size_t row = 0; row < view.num_rows(); ++row) {
      ASSERT_EQ(detail::cuda::row_hash(columns.data(), columns.size(), row, seed, null_hash_salt),
                expected->view().data<std::uint64_t>()[row])
        << "row " << row;
    }
  }
  double const nan    = std::numeric_limits<double>::quiet_NaN();
  auto const specials = testing::make_fixed_column<double>(
    data_type{type_id::FLOAT64}, {0.0, -0.0, nan, -nan, 1.0}, {}, host);
  auto const expected =
    hash_rows(table_view{specials->view()}, 5, default_stream(), memory_resources{host});
  auto const columns = detail::cuda::key_columns_of(table_view{specials->view()}, {column_order{}});
  for (std::size_t row = 0; row < 5; ++row) {
    EXPECT_EQ(detail::cuda::row_hash(columns.data(), 1, row, 5, null_hash_salt),
              expected->view().data<std::uint64_t>()[row]);
  }
}

}  // namespace
}  // namespace spillway
