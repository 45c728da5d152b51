#include <spillway/table/null_mask.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace spillway {
namespace {

/// Bytes that hold bits `[0, bits)`; buffers of exactly this size let ASan catch over-reads.
std::size_t bytes_for(std::size_t bits) { return (bits + 7) / 8; }

std::vector<bitmask_type> random_bytes(std::size_t count, std::mt19937_64& engine) {
  std::vector<bitmask_type> bytes(count);
  for (auto& byte : bytes) {
    byte = static_cast<bitmask_type>(engine());
  }
  return bytes;
}

/// The reference: bit `index` read one bit at a time, without `bit_is_set`.
bool reference_bit(std::vector<bitmask_type> const& mask, std::size_t index) {
  return ((static_cast<unsigned>(mask[index / 8]) >> (index % 8)) & 1U) != 0;
}

TEST(NullMask, BitmaskAllocationSizePadsToWhole64ByteBlocks) {
  EXPECT_EQ(bitmask_allocation_size(0), 0U);
  EXPECT_EQ(bitmask_allocation_size(1), 64U);
  EXPECT_EQ(bitmask_allocation_size(8), 64U);
  EXPECT_EQ(bitmask_allocation_size(512), 64U);
  EXPECT_EQ(bitmask_allocation_size(513), 128U);
  EXPECT_EQ(bitmask_allocation_size(1024), 128U);
  EXPECT_EQ(bitmask_allocation_size(4096), 512U);
  EXPECT_EQ(bitmask_allocation_size(4097), 576U);
  for (std::size_t rows = 0; rows < 2000; ++rows) {
    std::size_t const bytes = bitmask_allocation_size(rows);
    EXPECT_EQ(bytes % 64, 0U);
    EXPECT_GE(bytes * 8, rows);
    EXPECT_LT(bytes, bytes_for(rows) + 64);
  }
}

TEST(NullMask, BitIsSetAndSetBitAreLeastSignificantBitFirst) {
  std::vector<bitmask_type> mask{0b0000'0101, 0b1000'0000};
  EXPECT_TRUE(bit_is_set(mask.data(), 0));
  EXPECT_FALSE(bit_is_set(mask.data(), 1));
  EXPECT_TRUE(bit_is_set(mask.data(), 2));
  EXPECT_FALSE(bit_is_set(mask.data(), 8));
  EXPECT_TRUE(bit_is_set(mask.data(), 15));
  set_bit(mask.data(), 1, true);
  set_bit(mask.data(), 2, false);
  set_bit(mask.data(), 15, false);
  set_bit(mask.data(), 9, true);
  EXPECT_EQ(mask[0], 0b0000'0011);
  EXPECT_EQ(mask[1], 0b0000'0010);
  set_bit(mask.data(), 9, true);  // setting a set bit keeps it set
  EXPECT_EQ(mask[1], 0b0000'0010);
}

TEST(NullMask, CountUnsetBitsOverEveryRange) {
  constexpr std::size_t BITS = 300;
  std::mt19937_64 engine{42};
  std::vector<bitmask_type> const mask = random_bytes(bytes_for(BITS), engine);
  std::vector<std::size_t> unset_before(BITS + 1, 0);  // prefix sums of clear bits
  for (std::size_t index = 0; index < BITS; ++index) {
    unset_before[index + 1] = unset_before[index] + (reference_bit(mask, index) ? 0 : 1);
  }
  for (std::size_t begin = 0; begin <= BITS; ++begin) {
    for (std::size_t end = begin; end <= BITS; ++end) {
      ASSERT_EQ(count_unset_bits(mask.data(), begin, end), unset_before[end] - unset_before[begin])
        << "[" << begin << ", " << end << ")";
    }
  }
}

TEST(NullMask, CountUnsetBitsOfUniformMasks) {
  std::vector<bitmask_type> const all_set(bytes_for(1000), 0xFF);
  std::vector<bitmask_type> const all_clear(bytes_for(1000), 0x00);
  EXPECT_EQ(count_unset_bits(all_set.data(), 0, 1000), 0U);
  EXPECT_EQ(count_unset_bits(all_clear.data(), 0, 1000), 1000U);
  EXPECT_EQ(count_unset_bits(all_clear.data(), 3, 997), 994U);
  EXPECT_EQ(count_unset_bits(all_clear.data(), 500, 500), 0U);
}

/// Copies with every combination of offsets and lengths and checks every bit of the destination
/// buffer, in and out of the range, against a bit-by-bit reference.
TEST(NullMask, CopyBitsMatchesBitByBitReference) {
  constexpr std::size_t MAX_OFFSET = 17;
  constexpr std::size_t MAX_COUNT  = 200;
  constexpr std::size_t GUARD      = 9;  // bytes past the range that must stay untouched
  std::mt19937_64 engine{7};
  for (std::size_t source_offset = 0; source_offset <= MAX_OFFSET; ++source_offset) {
    for (std::size_t destination_offset = 0; destination_offset <= MAX_OFFSET;
         ++destination_offset) {
      for (std::size_t count = 0; count <= MAX_COUNT; ++count) {
        // Exactly sized source: reading a byte past the last copied bit is an ASan error.
        std::vector<bitmask_type> const source =
          random_bytes(bytes_for(source_offset + count), engine);
        for (std::size_t const guard : {std::size_t{0}, GUARD}) {
          std::vector<bitmask_type> destination =
            random_bytes(bytes_for(destination_offset + count) + guard, engine);
          std::vector<bitmask_type> expected = destination;
          for (std::size_t index = 0; index < count; ++index) {
            std::size_t const at = destination_offset + index;
            auto const bit       = static_cast<unsigned>(1U << (at % 8));
            expected[at / 8]     = static_cast<bitmask_type>(
              reference_bit(source, source_offset + index) ? (expected[at / 8] | bit)
                                                               : (expected[at / 8] & ~bit));
          }
          copy_bits(destination.data(), destination_offset, source.data(), source_offset, count);
          ASSERT_EQ(destination, expected)
            << "source offset " << source_offset << ", destination offset " << destination_offset
            << ", count " << count << ", guard bytes " << guard;
        }
      }
    }
  }
}

TEST(NullMask, CopyBitsOfLongRuns) {
  // Lengths well past the 64-bit fast path, with offsets that straddle words.
  std::mt19937_64 engine{11};
  for (std::size_t const count : {std::size_t{64}, std::size_t{1000}, std::size_t{4099}}) {
    for (std::size_t const source_offset : {std::size_t{0}, std::size_t{63}, std::size_t{129}}) {
      for (std::size_t const destination_offset : {std::size_t{0}, std::size_t{5}}) {
        std::vector<bitmask_type> const source =
          random_bytes(bytes_for(source_offset + count), engine);
        std::vector<bitmask_type> destination(bytes_for(destination_offset + count), 0);
        copy_bits(destination.data(), destination_offset, source.data(), source_offset, count);
        for (std::size_t index = 0; index < count; ++index) {
          ASSERT_EQ(reference_bit(destination, destination_offset + index),
                    reference_bit(source, source_offset + index))
            << "bit " << index << " of " << count;
        }
        EXPECT_EQ(
          count_unset_bits(destination.data(), destination_offset, destination_offset + count),
          count_unset_bits(source.data(), source_offset, source_offset + count));
      }
    }
  }
}

TEST(NullMask, FillBitsSetsOnlyTheRange) {
  constexpr std::size_t BITS = 100;
  std::mt19937_64 engine{3};
  for (bool const valid : {false, true}) {
    for (std::size_t begin = 0; begin <= 40; ++begin) {
      for (std::size_t end = begin; end <= BITS; ++end) {
        std::vector<bitmask_type> mask     = random_bytes(bytes_for(end), engine);
        std::vector<bitmask_type> expected = mask;
        for (std::size_t index = begin; index < end; ++index) {
          auto const bit      = static_cast<unsigned>(1U << (index % 8));
          expected[index / 8] = static_cast<bitmask_type>(valid ? (expected[index / 8] | bit)
                                                                : (expected[index / 8] & ~bit));
        }
        fill_bits(mask.data(), begin, end, valid);
        ASSERT_EQ(mask, expected) << "[" << begin << ", " << end << ") valid " << valid;
      }
    }
  }
}

TEST(NullMask, FillBitsThenCountUnsetBits) {
  std::vector<bitmask_type> mask(bytes_for(777), 0xFF);
  fill_bits(mask.data(), 13, 600, false);
  EXPECT_EQ(count_unset_bits(mask.data(), 0, 777), 587U);
  EXPECT_EQ(count_unset_bits(mask.data(), 0, 13), 0U);
  EXPECT_EQ(count_unset_bits(mask.data(), 600, 777), 0U);
  fill_bits(mask.data(), 100, 101, true);
  EXPECT_EQ(count_unset_bits(mask.data(), 0, 777), 586U);
  EXPECT_TRUE(bit_is_set(mask.data(), 100));
  EXPECT_FALSE(bit_is_set(mask.data(), 99));
  EXPECT_FALSE(bit_is_set(mask.data(), 101));
}

}  // namespace
}  // namespace spillway
