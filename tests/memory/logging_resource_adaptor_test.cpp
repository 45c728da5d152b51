/**
 * @file logging_resource_adaptor_test.cpp
 * @brief The CSV allocation log and its replay.
 */
#include "memory/throwing_memory_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/logging_resource_adaptor.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace {

using ::testing::HasSubstr;

constexpr char const* HEADER = "thread,time_ns,action,pointer,bytes,alignment";

std::vector<std::string> split(std::string const& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream{text};
  for (std::string part; std::getline(stream, part, separator);) {
    parts.push_back(part);
  }
  return parts;
}

std::string this_thread_field() {
  return std::to_string(std::hash<std::thread::id>{}(std::this_thread::get_id()));
}

std::string pointer_field(void const* pointer) {
  return std::to_string(reinterpret_cast<std::uintptr_t>(pointer));
}

/// Replays `log` and returns the message of the `invalid_argument` it must throw.
std::string replay_error(std::string const& log, resource_ref resource) {
  std::istringstream input{log};
  try {
    static_cast<void>(replay_allocation_log(input, resource));
  } catch (invalid_argument const& error) {
    return error.what();
  }
  ADD_FAILURE() << "the log was accepted:\n" << log;
  return {};
}

TEST(LoggingResourceAdaptor, WritesTheHeaderAndOneLinePerEvent) {
  std::ostringstream log;
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  {
    logging_resource_adaptor logging{upstream, log};
    void* pointer = logging.allocate(100, 64);
    logging.deallocate(pointer, 100, 64);
    upstream.fail_next(1);
    EXPECT_THROW(static_cast<void>(logging.allocate(500, 128)), out_of_memory);

    auto const lines = split(log.str(), '\n');
    ASSERT_EQ(lines.size(), 4U) << log.str();
    EXPECT_EQ(lines[0], HEADER);
    std::vector<std::vector<std::string>> const expected{
      {this_thread_field(), "", "allocate", pointer_field(pointer), "100", "64"},
      {this_thread_field(), "", "free", pointer_field(pointer), "100", "64"},
      {this_thread_field(), "", "failure", "0", "500", "128"}};
    std::uint64_t previous_time = 0;
    for (std::size_t index = 0; index < expected.size(); ++index) {
      SCOPED_TRACE(lines[index + 1]);
      auto const fields = split(lines[index + 1], ',');
      ASSERT_EQ(fields.size(), 6U);
      for (std::size_t field = 0; field < 6; ++field) {
        if (field == 1) {
          continue;
        }  // the time, checked below
        EXPECT_EQ(fields[field], expected[index][field]) << "field " << field;
      }
      std::uint64_t const time = std::stoull(fields[1]);
      EXPECT_GE(time, previous_time);
      previous_time = time;
    }
  }
  EXPECT_EQ(split(log.str(), '\n').size(), 4U);  // destruction adds nothing
}

TEST(LoggingResourceAdaptor, KindAndUpstreamAreForwarded) {
  std::ostringstream log;
  host_memory_resource host;
  logging_resource_adaptor logging{host, log};
  EXPECT_EQ(logging.kind(), memory_kind::HOST);
  EXPECT_EQ(&logging.upstream().get(), &host);
}

TEST(LoggingResourceAdaptor, WritesToAFile) {
  std::string const path = ::testing::TempDir() + "spillway_logging_resource_adaptor_test_" +
                           std::to_string(::getpid()) + ".csv";
  host_memory_resource host;
  {
    logging_resource_adaptor logging{host, path};
    void* pointer = logging.allocate(64);
    logging.deallocate(pointer, 64);
  }
  std::ifstream file{path};
  std::stringstream contents;
  contents << file.rdbuf();
  auto const lines = split(contents.str(), '\n');
  ASSERT_EQ(lines.size(), 3U);
  EXPECT_EQ(lines[0], HEADER);
  EXPECT_THAT(lines[1], HasSubstr(",allocate,"));
  EXPECT_THAT(lines[2], HasSubstr(",free,"));
  std::remove(path.c_str());
}

TEST(LoggingResourceAdaptor, UnopenableFileThrowsIoError) {
  host_memory_resource host;
  std::string const path = "/nonexistent-spillway-directory/allocations.csv";
  try {
    logging_resource_adaptor logging{host, path};
    FAIL() << "opened " << path;
  } catch (io_error const& error) {
    EXPECT_THAT(error.what(), HasSubstr(path));
  }
}

TEST(LoggingResourceAdaptor, ReplayReproducesCountsAndPeak) {
  std::ostringstream log;
  host_memory_resource host;
  test::throwing_memory_resource failing{host};
  {
    logging_resource_adaptor logging{failing, log};
    void* a = logging.allocate(100);
    void* b = logging.allocate(200);
    logging.deallocate(a, 100);
    void* c = logging.allocate(300);  // 500 outstanding: the peak
    failing.fail_next(1);
    EXPECT_THROW(static_cast<void>(logging.allocate(10000)), out_of_memory);  // logged failure
    logging.deallocate(b, 200);
    logging.deallocate(c, 300);
    void* d = logging.allocate(50, 256);  // never freed in the log
    logging.deallocate(d, 50, 256);       // freed here, but after the copy of the log below
  }
  // Drop the last line, the free of d, as if the process had ended before it.
  auto lines = split(log.str(), '\n');
  ASSERT_EQ(lines.size(), 10U) << log.str();
  EXPECT_THAT(lines.back(), HasSubstr(",free,"));
  lines.pop_back();
  std::string text;
  for (auto const& line : lines) {
    text += line + "\n";
  }

  statistics_resource_adaptor target{host};
  std::istringstream input{text};
  auto const result = replay_allocation_log(input, target);
  EXPECT_EQ(result.allocations, 4U);
  EXPECT_EQ(result.frees, 3U);
  EXPECT_EQ(result.failures, 0U);  // a logged failure is not replayed
  EXPECT_EQ(result.peak_bytes, 500U);
  auto const stats = target.statistics();
  EXPECT_EQ(stats.total_count, 4U);
  EXPECT_EQ(stats.total_bytes, 650U);
  EXPECT_EQ(stats.peak_bytes, 500U);
  EXPECT_EQ(stats.current_bytes, 0U);  // what the log left outstanding is freed at the end
  EXPECT_EQ(stats.current_count, 0U);
}

TEST(LoggingResourceAdaptor, ReplayCountsFailuresOfASmallerResource) {
  std::string const log = std::string{HEADER} +
                          "\n"
                          "1,10,allocate,4096,200,64\n"
                          "1,20,allocate,8192,300,64\n"  // 500 > the limit of 450
                          "1,30,free,8192,300,64\n"      // its free has nothing to free
                          "1,35,failure,0,64,3\n"        // a failure for a bad alignment
                          "1,40,free,4096,200,64\n"
                          "1,50,allocate,4096,450,64\n"
                          "1,60,free,4096,450,64\n";
  host_memory_resource host;
  limiting_resource_adaptor limited{host, 450};
  std::istringstream input{log};
  auto const result = replay_allocation_log(input, limited);
  EXPECT_EQ(result.allocations, 2U);
  EXPECT_EQ(result.failures, 1U);
  EXPECT_EQ(result.frees, 2U);
  EXPECT_EQ(result.peak_bytes, 450U);
  EXPECT_EQ(limited.allocated_bytes(), 0U);
}

TEST(LoggingResourceAdaptor, ReplayOfZeroByteAllocationsMatchesTheLog) {
  // Zero-byte allocations are all logged at pointer 0; each free must still match one.
  std::ostringstream log;
  host_memory_resource host;
  {
    logging_resource_adaptor logging{host, log};
    void* first  = logging.allocate(0);
    void* second = logging.allocate(0);
    logging.deallocate(first, 0);
    logging.deallocate(second, 0);
  }
  statistics_resource_adaptor target{host};
  std::istringstream input{log.str()};
  auto const result = replay_allocation_log(input, target);
  EXPECT_EQ(result.allocations, 2U);
  EXPECT_EQ(result.frees, 2U);
  EXPECT_EQ(target.statistics().total_count, 2U);
  EXPECT_EQ(target.statistics().current_count, 0U);
}

TEST(LoggingResourceAdaptor, MalformedLogThrowsInvalidArgumentNamingTheLine) {
  host_memory_resource host;
  statistics_resource_adaptor target{host};
  std::string const good = std::string{HEADER} + "\n1,10,allocate,4096,200,64\n";

  EXPECT_THAT(replay_error(good + "not a log line\n", target),
              HasSubstr("malformed allocation log line 3: 'not a log line'"));
  EXPECT_THAT(replay_error(good + "1,20,allocate,4096,200\n", target), HasSubstr("line 3"));
  EXPECT_THAT(replay_error(good + "1,20,allocate,abc,200,64\n", target),
              HasSubstr("malformed number in allocation log line 3"));
  EXPECT_THAT(replay_error(good + "1,20,allocate,8192,64x,64\n", target),
              HasSubstr("malformed number in allocation log line 3"));
  EXPECT_THAT(replay_error(good + "1,20,allocate,8192,-64,64\n", target),
              HasSubstr("malformed number in allocation log line 3"));
  EXPECT_THAT(replay_error(good + "1,20,allocate,8192,64,48\n", target),
              HasSubstr("malformed allocation log line 3: alignment 48 is not a power of two"));
  EXPECT_THAT(replay_error(good + "1,20,steal,8192,64,64\n", target),
              HasSubstr("unknown action 'steal' in allocation log line 3"));
  // Each replay allocated line 2 before it failed, and gave the memory back.
  EXPECT_EQ(target.statistics().total_count, 7U);
  EXPECT_EQ(target.statistics().current_bytes, 0U);
  EXPECT_EQ(target.statistics().current_count, 0U);
}

TEST(LoggingResourceAdaptor, ConcurrentLinesAreWholeAndReplayable) {
  constexpr std::size_t THREADS    = 8;
  constexpr std::size_t ITERATIONS = 300;
  std::ostringstream log;
  host_memory_resource host;
  {
    logging_resource_adaptor logging{host, log};
    std::vector<std::thread> threads;
    for (std::size_t thread = 0; thread < THREADS; ++thread) {
      threads.emplace_back([&logging, thread] {
        std::vector<std::pair<void*, std::size_t>> held;
        for (std::size_t iteration = 0; iteration < ITERATIONS; ++iteration) {
          std::size_t const bytes = 64 * (1 + (thread + iteration) % 5);
          held.emplace_back(logging.allocate(bytes), bytes);
          if (held.size() > 2) {
            logging.deallocate(held.front().first, held.front().second);
            held.erase(held.begin());
          }
        }
        for (auto const& [pointer, bytes] : held) {
          logging.deallocate(pointer, bytes);
        }
      });
    }
    for (auto& thread : threads) {
      thread.join();
    }
  }
  auto const lines = split(log.str(), '\n');
  ASSERT_EQ(lines.size(), 1 + 2 * THREADS * ITERATIONS);
  std::size_t allocations = 0;
  std::size_t frees       = 0;
  for (std::size_t index = 1; index < lines.size(); ++index) {
    auto const fields = split(lines[index], ',');
    ASSERT_EQ(fields.size(), 6U) << lines[index];
    if (fields[2] == "allocate") {
      ++allocations;
    } else if (fields[2] == "free") {
      ++frees;
    }
  }
  EXPECT_EQ(allocations, THREADS * ITERATIONS);
  EXPECT_EQ(frees, THREADS * ITERATIONS);

  // A free is logged before the memory goes back, so a reused address is never freed early.
  statistics_resource_adaptor target{host};
  std::istringstream input{log.str()};
  auto const result = replay_allocation_log(input, target);
  EXPECT_EQ(result.allocations, THREADS * ITERATIONS);
  EXPECT_EQ(result.frees, THREADS * ITERATIONS);
  EXPECT_EQ(result.failures, 0U);
  EXPECT_LE(result.peak_bytes, THREADS * 3 * 320);
  EXPECT_EQ(target.statistics().current_count, 0U);
}

}  // namespace
}  // namespace spillway
