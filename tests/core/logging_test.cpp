#include <spillway/core/logging.hpp>

#include <gtest/gtest.h>

#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

class LoggingTest : public ::testing::Test {
 protected:
  void SetUp() override { previous_ = get_log_level(); }
  void TearDown() override { set_log_level(previous_); }

 private:
  log_level previous_ = log_level::WARN;
};

TEST_F(LoggingTest, ObserverSeesLinesAtOrAboveTheLevel) {
  set_log_level(log_level::WARN);
  std::vector<std::pair<log_level, std::string>> seen;
  {
    scoped_log_observer observer{[&](log_level level, std::string_view message) {
      seen.emplace_back(level, std::string{message});
    }};
    log(log_level::INFO, "quiet detail");
    log(log_level::WARN, "whole-device fallback for task 7");
    log(log_level::ERROR, "disk full");
  }
  log(log_level::ERROR, "after the observer is gone");
  ASSERT_EQ(seen.size(), 2U);
  EXPECT_EQ(seen[0].first, log_level::WARN);
  EXPECT_EQ(seen[0].second, "whole-device fallback for task 7");
  EXPECT_EQ(seen[1].first, log_level::ERROR);
}

TEST_F(LoggingTest, LevelNames) {
  EXPECT_EQ(to_string(log_level::TRACE), "trace");
  EXPECT_EQ(to_string(log_level::WARN), "warn");
  EXPECT_EQ(to_string(log_level::OFF), "off");
}

TEST_F(LoggingTest, ConcurrentLoggingDeliversEveryLine) {
  set_log_level(log_level::ERROR);
  std::size_t count = 0;
  scoped_log_observer observer{[&](log_level, std::string_view) { ++count; }};
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([] {
      for (int i = 0; i < 50; ++i) {
        log(log_level::TRACE, "filtered");
        log(log_level::ERROR, "kept");
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  EXPECT_EQ(count, 200U);
}

}  // namespace
}  // namespace spillway
