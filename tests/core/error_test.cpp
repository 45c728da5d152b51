#include <spillway/core/error.hpp>

#include <gtest/gtest.h>

#include <string>

namespace spillway {
namespace {

TEST(Error, ExpectsPassesWhenConditionHolds) {
  EXPECT_NO_THROW(SPILLWAY_EXPECTS(1 + 1 == 2, "arithmetic"));
}

TEST(Error, ExpectsThrowsLogicErrorByDefaultWithSiteAndMessage) {
  try {
    SPILLWAY_EXPECTS(1 + 1 == 3, "arithmetic is broken");
    FAIL() << "expected a throw";
  } catch (logic_error const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("arithmetic is broken"), std::string::npos) << what;
    EXPECT_NE(what.find("error_test.cpp:"), std::string::npos) << what;
  }
}

TEST(Error, ExpectsThrowsTheRequestedType) {
  EXPECT_THROW(SPILLWAY_EXPECTS(false, "bad input", invalid_argument), invalid_argument);
  EXPECT_THROW(SPILLWAY_EXPECTS(false, "bad file", io_error), io_error);
  EXPECT_THROW(SPILLWAY_EXPECTS(false, "bad bytes", corruption_error), io_error);
  EXPECT_THROW(SPILLWAY_FAIL("no backend", not_supported), std::logic_error);
}

TEST(Error, ComparisonChecksPrintBothOperandsAtTheEnd) {
  std::size_t const bytes = 300;
  std::size_t const limit = 256;
  try {
    SPILLWAY_EXPECTS_LE(bytes, limit, "request over limit", invalid_argument);
    FAIL() << "expected a throw";
  } catch (invalid_argument const& error) {
    std::string const what = error.what();
    EXPECT_NE(what.find("request over limit"), std::string::npos) << what;
    EXPECT_NE(what.find("bytes <= limit (300 vs 256)"), std::string::npos) << what;
  }
  EXPECT_NO_THROW(SPILLWAY_EXPECTS_EQ(limit, 256U, "", invalid_argument));
  EXPECT_THROW(SPILLWAY_EXPECTS_LT(limit, limit, "", invalid_argument), invalid_argument);
}

TEST(Error, OutOfMemoryIsABadAllocWithSizes) {
  out_of_memory const error{"device full: requested 10 bytes", 10, 4, 100};
  std::bad_alloc const& base = error;
  EXPECT_STREQ(base.what(), "device full: requested 10 bytes");
  EXPECT_EQ(error.requested_bytes(), 10U);
  EXPECT_EQ(error.available_bytes(), 4U);
  EXPECT_EQ(error.capacity_bytes(), 100U);
}

TEST(Error, SourceSiteNamesFileLineAndFunction) {
  source_site const site = SPILLWAY_HERE;
  std::string const text = site.to_string();
  EXPECT_EQ(text.find('/'), std::string::npos) << text;
  EXPECT_NE(text.find("error_test.cpp:" + std::to_string(site.line)), std::string::npos) << text;
}

}  // namespace
}  // namespace spillway
