#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <gtest/gtest.h>

namespace spillway {
namespace {

TEST(Units, LiteralsAreBinary) {
  EXPECT_EQ(1_KiB, 1024U);
  EXPECT_EQ(64_MiB, 64U * 1024 * 1024);
  EXPECT_EQ(2_GiB, 2ULL * 1024 * 1024 * 1024);
}

TEST(Units, AlignUpAndPowerOfTwo) {
  EXPECT_EQ(align_up(0, 64), 0U);
  EXPECT_EQ(align_up(1, 64), 64U);
  EXPECT_EQ(align_up(64, 64), 64U);
  EXPECT_EQ(align_up(65, 64), 128U);
  EXPECT_TRUE(is_power_of_two(1));
  EXPECT_TRUE(is_power_of_two(4096));
  EXPECT_FALSE(is_power_of_two(0));
  EXPECT_FALSE(is_power_of_two(96));
}

TEST(Units, FormatBytes) {
  EXPECT_EQ(format_bytes(512), "512 B");
  EXPECT_EQ(format_bytes(1536), "1.50 KiB");
  EXPECT_EQ(format_bytes(64_MiB), "64.00 MiB");
  EXPECT_EQ(format_bytes(3_GiB), "3.00 GiB");
}

TEST(Units, ParseBytesAcceptsBinaryAndDecimalSuffixes) {
  EXPECT_EQ(parse_bytes("4096"), 4096U);
  EXPECT_EQ(parse_bytes("512MiB"), 512_MiB);
  EXPECT_EQ(parse_bytes("2GiB"), 2_GiB);
  EXPECT_EQ(parse_bytes("2g"), 2_GiB);
  EXPECT_EQ(parse_bytes("64k"), 64_KiB);
  EXPECT_EQ(parse_bytes("1.5 GB"), 1500000000U);
  EXPECT_EQ(parse_bytes(" 10 MB "), 10000000U);
  EXPECT_EQ(parse_bytes("0.5KiB"), 512U);
}

TEST(Units, ParseBytesRejectsGarbageNamingTheText) {
  for (char const* text : {"", "MiB", "12 parsecs", "1.2.3", "-5", "5 MiB extra"}) {
    try {
      (void)parse_bytes(text);
      FAIL() << "accepted '" << text << "'";
    } catch (invalid_argument const& error) {
      EXPECT_NE(std::string{error.what()}.find(std::string{"'"} + text + "'"), std::string::npos)
        << error.what();
    }
  }
}

}  // namespace
}  // namespace spillway
