#include "testing/parameter_printers.hpp"

#include <spillway/core/error.hpp>
#include <spillway/spill/codec.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <vector>

namespace spillway {
namespace {

std::vector<std::byte> sample_bytes(std::size_t size, bool compressible) {
  std::vector<std::byte> bytes(size);
  std::mt19937_64 random(42);
  for (std::size_t index = 0; index < size; ++index) {
    bytes[index] = compressible ? static_cast<std::byte>((index / 64) % 7)
                                : static_cast<std::byte>(random() & 0xFFU);
  }
  return bytes;
}

class CodecTest : public ::testing::TestWithParam<codec> {};

TEST_P(CodecTest, RoundTripsCompressibleAndRandomBytes) {
  for (bool const compressible : {true, false}) {
    for (std::size_t const size : {std::size_t{0}, std::size_t{1}, std::size_t{100000}}) {
      auto const raw = sample_bytes(size, compressible);
      std::vector<std::byte> stored(compress_bound(GetParam(), size));
      std::size_t const stored_size = compress(GetParam(), raw, stored);
      if (GetParam() != codec::NONE && compressible && size > 1000) {
        EXPECT_LT(stored_size * 4, size) << to_string(GetParam());
      }
      std::vector<std::byte> back(size);
      decompress(GetParam(), std::span(stored).first(stored_size), back);
      EXPECT_EQ(raw, back) << to_string(GetParam()) << " size " << size;
    }
  }
}

TEST_P(CodecTest, DamagedStreamIsCorruptionNotWrongData) {
  // NONE has no structure, but a block of the wrong size is still rejected; flipped bytes are the
  // block checksum's job (spill_file_test).
  auto const raw = sample_bytes(10000, true);
  std::vector<std::byte> stored(compress_bound(GetParam(), raw.size()));
  std::size_t const stored_size = compress(GetParam(), raw, stored);
  std::vector<std::byte> back(raw.size());
  // Truncated input never decodes to the full size.
  EXPECT_THROW(decompress(GetParam(), std::span(stored).first(stored_size / 2), back),
               corruption_error);
  // Asking for a different size is an error too.
  std::vector<std::byte> wrong_size(raw.size() + 1);
  EXPECT_THROW(decompress(GetParam(), std::span(stored).first(stored_size), wrong_size),
               corruption_error);
}

TEST_P(CodecTest, DestinationSmallerThanBoundIsRejected) {
  auto const raw = sample_bytes(1000, false);
  std::vector<std::byte> small(10);
  EXPECT_THROW((void)compress(GetParam(), raw, small), invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Codecs,
                         CodecTest,
                         ::testing::Values(codec::NONE, codec::LZ4, codec::ZSTD),
                         [](auto const& param_info) {
                           return std::string(to_string(param_info.param));
                         });

TEST(CodecNames, ParseAndPrint) {
  EXPECT_EQ(parse_codec("LZ4"), codec::LZ4);
  EXPECT_EQ(parse_codec("zstd"), codec::ZSTD);
  EXPECT_EQ(parse_codec("None"), codec::NONE);
  EXPECT_THROW((void)parse_codec("snappy"), invalid_argument);
  EXPECT_EQ(to_string(codec::ZSTD), "zstd");
}

TEST(CodecChecksum, IsXxhash64AndSeesOneBit) {
  auto bytes        = sample_bytes(4096, false);
  auto const before = checksum64(bytes);
  EXPECT_EQ(checksum64(std::span<std::byte const>{}), 0x2D06800538D394C2ULL);  // XXH3("")
  bytes[1234] ^= std::byte{1};
  EXPECT_NE(before, checksum64(bytes));
}

}  // namespace
}  // namespace spillway
