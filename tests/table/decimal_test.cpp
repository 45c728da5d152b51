#include <spillway/table/data_type.hpp>
#include <spillway/table/decimal.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

namespace spillway {
namespace {

__extension__ using int128 = __int128;

decimal128_storage make128(int128 value) {
  return decimal128_storage{static_cast<std::uint64_t>(value),
                            static_cast<std::int64_t>(value >> 64)};
}

/// A 256-bit value of `high` (sign-extended) times 2^128 plus `low`.
decimal256_storage make256(std::int64_t high, std::uint64_t low) {
  auto const fill = high < 0 ? ~std::uint64_t{0} : 0;
  return decimal256_storage{{low, 0, static_cast<std::uint64_t>(high), fill}};
}

TEST(Decimal, WideStorageOrdersAsItsIntegers) {
  int128 const big = int128{1} << 100;
  std::vector<int128> const ascending{
    -big, -big + 1, -(int128{1} << 64), -1, 0, 1, (int128{1} << 64) - 1, int128{1} << 64, big};
  for (std::size_t i = 0; i < ascending.size(); ++i) {
    for (std::size_t j = 0; j < ascending.size(); ++j) {
      EXPECT_EQ(make128(ascending[i]) < make128(ascending[j]), i < j) << i << " " << j;
      EXPECT_EQ(make128(ascending[i]) == make128(ascending[j]), i == j) << i << " " << j;
    }
  }
  std::vector<decimal256_storage> const wide{make256(-5, 0),
                                             make256(-1, ~std::uint64_t{0}),
                                             decimal256_storage{{0, 0, 0, 0}},
                                             decimal256_storage{{~std::uint64_t{0}, 0, 0, 0}},
                                             make256(1, 0),
                                             make256(std::int64_t{1} << 62, 0)};
  for (std::size_t i = 0; i < wide.size(); ++i) {
    for (std::size_t j = 0; j < wide.size(); ++j) {
      EXPECT_EQ(wide[i] < wide[j], i < j) << i << " " << j;
    }
  }
}

TEST(Decimal, TextHasExactlyScaleDigitsAfterThePoint) {
  data_type const money{type_id::DECIMAL128, 15, 2};
  decimal128_storage const negative = make128(-1234);
  EXPECT_EQ(decimal_to_string(money, &negative), "-12.34");
  decimal128_storage const five  = make128(5);
  decimal128_storage const minus = make128(-5);
  decimal128_storage const seven = make128(700);
  decimal128_storage const zero  = make128(0);
  EXPECT_EQ(decimal_to_string(money, &five), "0.05");
  EXPECT_EQ(decimal_to_string(money, &minus), "-0.05");
  EXPECT_EQ(decimal_to_string(money, &seven), "7.00");
  EXPECT_EQ(decimal_to_string(money, &zero), "0.00");
  std::int32_t const small = -42;
  EXPECT_EQ(decimal_to_string(data_type{type_id::DECIMAL32, 9, 0}, &small), "-42");
  EXPECT_EQ(decimal_to_string(data_type{type_id::DECIMAL32, 9, -3}, &small), "-42000");
  std::int64_t const wide64 = -999'999'999'999'999'999;
  EXPECT_EQ(decimal_to_string(data_type{type_id::DECIMAL64, 18, 18}, &wide64),
            "-0.999999999999999999");
  // Beyond 64 bits: 2^100 = 1267650600228229401496703205376.
  decimal128_storage const power = make128(int128{1} << 100);
  EXPECT_EQ(decimal_to_string(data_type{type_id::DECIMAL128, 38, 6}, &power),
            "1267650600228229401496703.205376");
  // The most negative 256-bit value: -2^255.
  decimal256_storage const lowest{{0, 0, 0, std::uint64_t{1} << 63}};
  EXPECT_EQ(
    decimal_to_string(data_type{type_id::DECIMAL256, 76, 0}, &lowest),
    std::string{"-57896044618658097711785492504343953926634992332820282019728792003956564819968"});
}

TEST(Decimal, ParsesWhatItWritesAndNothingItCannotHold) {
  data_type const money{type_id::DECIMAL128, 15, 2};
  decimal128_storage value{};
  ASSERT_TRUE(parse_decimal("-12.34", money, &value));
  EXPECT_EQ(value, make128(-1234));
  ASSERT_TRUE(parse_decimal("+.5", money, &value));
  EXPECT_EQ(value, make128(50));
  ASSERT_TRUE(parse_decimal("12.", money, &value));
  EXPECT_EQ(value, make128(1200));
  ASSERT_TRUE(parse_decimal("1.500", money, &value));  // extra zeros are exact
  EXPECT_EQ(value, make128(150));
  ASSERT_TRUE(parse_decimal("0000000000000000000001", money, &value));  // leading zeros
  EXPECT_EQ(value, make128(100));
  EXPECT_TRUE(parse_decimal("9999999999999.99", money, &value));
  EXPECT_FALSE(parse_decimal("99999999999999.99", money, &value)) << "16 digits";
  EXPECT_FALSE(parse_decimal("1.234", money, &value)) << "would round";
  for (char const* bad : {"", "-", ".", "+.", "1e5", "1.2.3", " 1", "1 ", "0x10", "--1", "1,5"}) {
    EXPECT_FALSE(parse_decimal(bad, money, &value)) << "'" << bad << "'";
  }
  std::int32_t narrow = 0;
  ASSERT_TRUE(parse_decimal("-999999999", data_type{type_id::DECIMAL32, 9, 0}, &narrow));
  EXPECT_EQ(narrow, -999'999'999);
  ASSERT_TRUE(parse_decimal("-42000", data_type{type_id::DECIMAL32, 9, -3}, &narrow));
  EXPECT_EQ(narrow, -42);
  EXPECT_FALSE(parse_decimal("42100", data_type{type_id::DECIMAL32, 9, -3}, &narrow));
  EXPECT_FALSE(parse_decimal("1", data_type{type_id::DECIMAL32, 10, 0}, &narrow))
    << "precision beyond the type";
  std::int64_t wide64 = 0;
  ASSERT_TRUE(
    parse_decimal("-0.999999999999999999", data_type{type_id::DECIMAL64, 18, 18}, &wide64));
  EXPECT_EQ(wide64, -999'999'999'999'999'999);
  // Round trips of 76-digit DECIMAL256 values, either sign.
  data_type const huge{type_id::DECIMAL256, 76, 30};
  std::string const digits(76, '9');
  for (std::string const& text : {digits.substr(0, 46) + "." + digits.substr(46),
                                  "-" + digits.substr(0, 46) + "." + digits.substr(46),
                                  std::string{"-0.000000000000000000000000000001"}}) {
    decimal256_storage parsed{};
    ASSERT_TRUE(parse_decimal(text, huge, &parsed)) << text;
    EXPECT_EQ(decimal_to_string(huge, &parsed), text);
  }
  decimal256_storage parsed{};
  EXPECT_FALSE(parse_decimal("1" + digits.substr(0, 46) + "." + digits.substr(46), huge, &parsed));
}

}  // namespace
}  // namespace spillway
