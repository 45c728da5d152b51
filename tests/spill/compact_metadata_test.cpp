/**
 * @file compact_metadata_test.cpp
 * @brief The compact form of pack metadata that the spill store keeps: every word back as it was,
 * real metadata in well under half its size, and damage found.
 */
#include "spill/compact_metadata.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/table/pack.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <limits>
#include <random>
#include <vector>

namespace spillway {
namespace {

std::vector<std::uint8_t> bytes_of_words(std::vector<std::uint64_t> const& words) {
  std::vector<std::uint8_t> bytes(words.size() * sizeof(std::uint64_t));
  std::memcpy(bytes.data(), words.data(), bytes.size());
  return bytes;
}

TEST(CompactMetadata, EveryWordComesBackAsItWas) {
  std::vector<std::uint64_t> words{0,
                                   1,
                                   127,
                                   128,
                                   16383,
                                   16384,
                                   std::uint64_t{1} << 35U,
                                   std::uint64_t{1} << 63U,
                                   std::numeric_limits<std::uint64_t>::max(),
                                   std::numeric_limits<std::uint64_t>::max() - 1};
  std::mt19937_64 random(7);
  for (int index = 0; index < 1000; ++index) {
    words.push_back(random() >> (random() % 64));  // every width
  }
  auto const metadata = bytes_of_words(words);
  auto const compact  = detail::compact_metadata(metadata);
  EXPECT_EQ(detail::expand_metadata(compact), metadata);
  EXPECT_TRUE(detail::expand_metadata(detail::compact_metadata({})).empty());
  // One byte for a word below 128, ten for the widest.
  EXPECT_EQ(detail::compact_metadata(bytes_of_words({5})).size(), 1U);
  EXPECT_EQ(
    detail::compact_metadata(bytes_of_words({std::numeric_limits<std::uint64_t>::max()})).size(),
    10U);
}

TEST(CompactMetadata, APackedTablesMetadataTakesLessThanHalf) {
  host_memory_resource host;
  std::vector<std::unique_ptr<column>> columns;
  for (int index = 0; index < 8; ++index) {
    columns.push_back(testing::make_fixed_column<std::int64_t>(
      type_id::INT64, std::vector<std::int64_t>(5000, index), {}, host));
    columns.push_back(testing::make_string_column(
      std::vector<std::optional<std::string>>(5000, std::string(20, 'a')), host, true));
  }
  table const input{std::move(columns)};
  auto const packed  = detail::pack(input.view(), default_stream(), memory_resources{host});
  auto const compact = detail::compact_metadata(packed.metadata);
  EXPECT_LT(compact.size(), packed.metadata.size() / 2);
  auto const expanded = detail::expand_metadata(compact);
  EXPECT_EQ(expanded, packed.metadata);
  // What it was made from reads back through the expanded metadata.
  auto const view = unpack(expanded, packed.data.data(), packed.data.size(), packed.data.kind());
  ASSERT_EQ(view.num_columns(), input.num_columns());
  EXPECT_EQ(view.num_rows(), input.num_rows());
  EXPECT_EQ(view.column(1).string_at(4999), std::string(20, 'a'));
}

TEST(CompactMetadata, DamageIsFoundAndAPartialWordRefused) {
  auto const compact = detail::compact_metadata(bytes_of_words({300, 1U << 20U}));
  // Cut inside the last word: it ends with a continuation byte.
  std::vector<std::uint8_t> cut(compact.begin(), compact.end() - 1);
  EXPECT_THROW(detail::expand_metadata(cut), corruption_error);
  // Eleven bytes for one word: more than 64 bits.
  std::vector<std::uint8_t> const too_long(11, 0x80U);
  EXPECT_THROW(detail::expand_metadata(too_long), corruption_error);
  // A tenth byte that carries more than the 64th bit.
  std::vector<std::uint8_t> overflow(9, 0xFFU);
  overflow.push_back(0x02U);
  EXPECT_THROW(detail::expand_metadata(overflow), corruption_error);
  std::vector<std::uint8_t> const partial(12, 0);
  EXPECT_THROW(detail::compact_metadata(partial), logic_error);
}

}  // namespace
}  // namespace spillway
