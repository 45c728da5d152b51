/**
 * @file codec_advisor_test.cpp
 * @brief The spill store's choice between compressed and raw disk blocks, from synthetic costs.
 */
#include "spill/codec_advisor.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace spillway {
namespace {

using detail::codec_advisor;
using std::chrono::microseconds;
using std::chrono::nanoseconds;

constexpr std::size_t BLOCK = 4096;

/// Nanoseconds for `bytes` at `ns_per_byte`.
nanoseconds at(double ns_per_byte, std::size_t bytes = BLOCK) {
  return nanoseconds{static_cast<std::int64_t>(ns_per_byte * static_cast<double>(bytes))};
}

/// How many blocks in a row `advisor` writes raw untried.
std::size_t untried_run(codec_advisor& advisor) {
  std::size_t count = 0;
  while (!advisor.try_next()) {
    ++count;
  }
  return count;
}

TEST(CodecAdvisor, KeepsWhatShrinksEnoughUntilTheDiskIsMeasured) {
  codec_advisor advisor{1.5, true};
  EXPECT_TRUE(advisor.try_next());
  EXPECT_TRUE(advisor.keep(BLOCK, BLOCK / 2, at(50.0)));  // however slow the codec
  EXPECT_TRUE(advisor.try_next());
  EXPECT_FALSE(advisor.keep(BLOCK, BLOCK * 3 / 4, at(0.1)));  // 1.33x: below the ratio
}

TEST(CodecAdvisor, AFastDiskGetsRawBlocksASlowOneCompressedOnes) {
  codec_advisor fast{1.5, true};
  fast.wrote(BLOCK, at(0.2));                          // a page cache: 5 GB/s
  EXPECT_FALSE(fast.keep(BLOCK, BLOCK / 2, at(1.5)));  // LZ4 at ~700 MB/s, 2x

  codec_advisor slow{1.5, true};
  slow.wrote(BLOCK, at(5.0));  // 200 MB/s
  EXPECT_TRUE(slow.keep(BLOCK, BLOCK / 2, at(1.5)));
}

TEST(CodecAdvisor, WeighsReadsAndDecompressionOnceMeasured) {
  // Writes and reads at 1 ns/byte: compressing 2x saves 1 ns per raw byte.
  codec_advisor advisor{1.5, true};
  advisor.wrote(BLOCK, at(1.0));
  advisor.read(BLOCK, at(1.0));
  // Decompression not yet measured: taken to cost what compression does.
  EXPECT_FALSE(advisor.keep(BLOCK, BLOCK / 2, at(0.6)));  // 0.6 + 0.6 > 1
  codec_advisor measured{1.5, true};
  measured.wrote(BLOCK, at(1.0));
  measured.read(BLOCK, at(1.0));
  measured.decompressed(BLOCK, at(0.2));
  EXPECT_TRUE(measured.keep(BLOCK, BLOCK / 2, at(0.6)));  // 0.6 + 0.2 < 1
  measured.decompressed(BLOCK, at(2.0));                  // now about 0.65
  EXPECT_FALSE(measured.keep(BLOCK, BLOCK / 2, at(0.6)));
  // Reads turn slow (data no longer cached): the codec pays again.
  codec_advisor reread{1.5, true};
  reread.wrote(BLOCK, at(1.0));
  reread.decompressed(BLOCK, at(0.6));
  for (int block = 0; block < 20; ++block) {
    reread.read(BLOCK, at(4.0));
  }
  EXPECT_TRUE(reread.keep(BLOCK, BLOCK / 2, at(0.6)));
}

TEST(CodecAdvisor, RawBlocksSkipTheCodecForDoublingRunsUpToTheCap) {
  codec_advisor advisor{1.5, true};
  advisor.wrote(BLOCK, at(0.2));
  std::size_t expected = 1;
  for (int attempt = 0; attempt < 9; ++attempt) {
    EXPECT_FALSE(advisor.keep(BLOCK, BLOCK / 2, at(1.5)));
    EXPECT_EQ(untried_run(advisor), expected) << "attempt " << attempt;
    expected = std::min<std::size_t>(2 * expected, codec_advisor::MAX_SKIP);
  }
  // A block kept resets the runs.
  advisor.wrote(BLOCK, at(1000.0));
  EXPECT_TRUE(advisor.keep(BLOCK, BLOCK / 2, at(1.5)));
  EXPECT_EQ(untried_run(advisor), 0U);
  EXPECT_FALSE(advisor.keep(BLOCK, BLOCK, at(0.1)));  // does not shrink
  EXPECT_EQ(untried_run(advisor), 1U);
}

TEST(CodecAdvisor, FollowsTheDiskAsItChanges) {
  codec_advisor advisor{1.5, true};
  advisor.wrote(BLOCK, at(5.0));
  EXPECT_TRUE(advisor.keep(BLOCK, BLOCK / 2, at(1.5)));
  // Writes turn fast (a moving average: a few blocks to follow).
  for (int block = 0; block < 20; ++block) {
    advisor.wrote(BLOCK, at(0.2));
  }
  EXPECT_FALSE(advisor.keep(BLOCK, BLOCK / 2, at(1.5)));
}

TEST(CodecAdvisor, WithoutCostsTheRatioAloneDecides) {
  codec_advisor advisor{1.5, false};
  advisor.wrote(BLOCK, at(0.01));
  EXPECT_TRUE(advisor.keep(BLOCK, BLOCK / 2, at(100.0)));
  EXPECT_FALSE(advisor.keep(BLOCK, BLOCK, at(0.1)));
  codec_advisor every{1.0, false};
  EXPECT_TRUE(every.keep(BLOCK, BLOCK - 1, at(1.0)));
  EXPECT_TRUE(every.keep(BLOCK, 0, nanoseconds{0}));  // an empty payload never divides by zero
}

}  // namespace
}  // namespace spillway
