/**
 * @file tracking_resource_adaptor_test.cpp
 * @brief Outstanding allocations in order with their tags, the leak report and its logging.
 */
#include "memory/throwing_memory_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/tracking_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/// Sets the log level for a test's life and restores the previous one.
class log_level_guard {
 public:
  explicit log_level_guard(log_level level) : previous_(get_log_level()) { set_log_level(level); }
  ~log_level_guard() { set_log_level(previous_); }
  log_level_guard(log_level_guard const&)            = delete;
  log_level_guard& operator=(log_level_guard const&) = delete;
  log_level_guard(log_level_guard&&)                 = delete;
  log_level_guard& operator=(log_level_guard&&)      = delete;

 private:
  log_level previous_;
};

std::string pointer_text(void const* pointer) {
  std::ostringstream out;
  out << pointer;
  return out.str();
}

TEST(TrackingResourceAdaptor, OutstandingInAllocationOrderWithTags) {
  host_memory_resource host;
  tracking_resource_adaptor tracking{host};
  void* untagged = tracking.allocate(10);
  void* sort     = nullptr;
  void* gather   = nullptr;
  void* sort_too = nullptr;
  {
    scoped_allocation_tag outer{"sort"};
    EXPECT_EQ(scoped_allocation_tag::current(), "sort");
    sort = tracking.allocate(20);
    {
      scoped_allocation_tag inner{"gather"};
      EXPECT_EQ(scoped_allocation_tag::current(), "gather");
      gather = tracking.allocate(30);
    }
    EXPECT_EQ(scoped_allocation_tag::current(), "sort");
    sort_too = tracking.allocate(40);
  }
  EXPECT_EQ(scoped_allocation_tag::current(), "");
  void* last = tracking.allocate(50);

  auto const records = tracking.outstanding();
  ASSERT_EQ(records.size(), 5U);
  std::vector<std::pair<void*, std::string>> const expected{
    {untagged, ""}, {sort, "sort"}, {gather, "gather"}, {sort_too, "sort"}, {last, ""}};
  for (std::size_t index = 0; index < records.size(); ++index) {
    SCOPED_TRACE(index);
    EXPECT_EQ(records[index].pointer, expected[index].first);
    EXPECT_EQ(records[index].tag, expected[index].second);
    EXPECT_EQ(records[index].sequence, index);
    EXPECT_EQ(records[index].bytes, 10 * (index + 1));
    EXPECT_EQ(records[index].alignment, DEFAULT_ALIGNMENT);
  }
  EXPECT_EQ(tracking.outstanding_bytes(), 150U);

  tracking.deallocate(sort, 20);
  tracking.deallocate(last, 50);
  auto const rest = tracking.outstanding();
  ASSERT_EQ(rest.size(), 3U);
  EXPECT_EQ(rest[0].sequence, 0U);
  EXPECT_EQ(rest[1].sequence, 2U);
  EXPECT_EQ(rest[2].sequence, 3U);
  EXPECT_EQ(tracking.outstanding_bytes(), 80U);

  tracking.deallocate(untagged, 10);
  tracking.deallocate(gather, 30);
  tracking.deallocate(sort_too, 40);
  EXPECT_TRUE(tracking.outstanding().empty());
  EXPECT_EQ(tracking.outstanding_bytes(), 0U);
  EXPECT_EQ(tracking.unknown_frees(), 0U);
}

TEST(TrackingResourceAdaptor, ConcurrentOtherThreadIsUnaffectedByATag) {
  host_memory_resource host;
  tracking_resource_adaptor tracking{host};
  scoped_allocation_tag tag{"main"};
  void* mine = tracking.allocate(8);
  std::string seen_by_other;
  void* theirs = nullptr;
  std::thread other{[&] {
    seen_by_other = scoped_allocation_tag::current();
    theirs        = tracking.allocate(16);
    scoped_allocation_tag own{"worker"};
    void* tagged = tracking.allocate(32);
    tracking.deallocate(tagged, 32);
  }};
  other.join();
  EXPECT_EQ(seen_by_other, "");
  EXPECT_EQ(scoped_allocation_tag::current(), "main");  // the worker's tag did not leak here
  auto const records = tracking.outstanding();
  ASSERT_EQ(records.size(), 2U);
  EXPECT_EQ(records[0].pointer, mine);
  EXPECT_EQ(records[0].tag, "main");
  EXPECT_EQ(records[1].pointer, theirs);
  EXPECT_EQ(records[1].tag, "");
  tracking.deallocate(mine, 8);
  tracking.deallocate(theirs, 16);
}

TEST(TrackingResourceAdaptor, LeakReportListsLargestFirst) {
  host_memory_resource host;
  tracking_resource_adaptor tracking{host, "leaky"};
  EXPECT_EQ(tracking.leak_report(), "");
  void* small = nullptr;
  void* big   = nullptr;
  void* freed = tracking.allocate(5000);
  {
    scoped_allocation_tag tag{"small"};
    small = tracking.allocate(100);
  }
  {
    scoped_allocation_tag tag{"big"};
    big = tracking.allocate(300);
  }
  tracking.deallocate(freed, 5000);
  std::string const expected = "memory leak in resource 'leaky': 2 allocation(s) never freed, " +
                               std::string{"400 bytes (400 B)"} + "\n  #2 300 bytes at " +
                               pointer_text(big) + " tag 'big'" + "\n  #1 100 bytes at " +
                               pointer_text(small) + " tag 'small'";
  EXPECT_EQ(tracking.leak_report(), expected);
  tracking.deallocate(small, 100);
  tracking.deallocate(big, 300);
  EXPECT_EQ(tracking.leak_report(), "");
}

TEST(TrackingResourceAdaptor, DestructionLogsTheLeakReportAtWarn) {
  log_level_guard level{log_level::WARN};
  std::vector<std::pair<log_level, std::string>> lines;
  scoped_log_observer observer{[&lines](log_level severity, std::string_view message) {
    lines.emplace_back(severity, std::string{message});
  }};
  host_memory_resource host;
  void* leaked = nullptr;
  std::string report;
  {
    tracking_resource_adaptor tracking{host, "destroyed"};
    scoped_allocation_tag tag{"forgotten"};
    leaked = tracking.allocate(777);
    report = tracking.leak_report();
  }
  ASSERT_EQ(lines.size(), 1U);
  EXPECT_EQ(lines[0].first, log_level::WARN);
  EXPECT_EQ(lines[0].second, report);
  EXPECT_NE(report.find("memory leak in resource 'destroyed': 1 allocation(s) never freed, 777 "
                        "bytes"),
            std::string::npos)
    << report;
  EXPECT_NE(report.find("tag 'forgotten'"), std::string::npos) << report;
  host.deallocate(leaked, 777);  // the test's own leak, freed where it came from

  // A clean adaptor logs nothing.
  {
    tracking_resource_adaptor tracking{host, "clean"};
    void* pointer = tracking.allocate(64);
    tracking.deallocate(pointer, 64);
  }
  EXPECT_EQ(lines.size(), 1U);
}

TEST(TrackingResourceAdaptor, UnknownFreesAreCountedAndForwarded) {
  host_memory_resource host;
  tracking_resource_adaptor tracking{host};
  void* known   = tracking.allocate(64);
  void* foreign = host.allocate(128);
  tracking.deallocate(foreign, 128);  // never handed out by the adaptor; freed upstream anyway
  EXPECT_EQ(tracking.unknown_frees(), 1U);
  ASSERT_EQ(tracking.outstanding().size(), 1U);
  EXPECT_EQ(tracking.outstanding()[0].pointer, known);
  EXPECT_EQ(tracking.outstanding_bytes(), 64U);
  tracking.deallocate(known, 64);
  EXPECT_EQ(tracking.unknown_frees(), 1U);
  EXPECT_EQ(tracking.outstanding_bytes(), 0U);
}

TEST(TrackingResourceAdaptor, ThrowingUpstreamRecordsNothing) {
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  tracking_resource_adaptor tracking{upstream};
  upstream.fail_next(1);
  EXPECT_THROW(static_cast<void>(tracking.allocate(256)), out_of_memory);
  EXPECT_TRUE(tracking.outstanding().empty());
  EXPECT_EQ(tracking.outstanding_bytes(), 0U);
  void* pointer = tracking.allocate(256);
  ASSERT_EQ(tracking.outstanding().size(), 1U);
  EXPECT_EQ(tracking.outstanding()[0].sequence, 0U);  // the failure took no sequence number
  tracking.deallocate(pointer, 256);
}

TEST(TrackingResourceAdaptor, ConcurrentThreadsKeepTheirOwnTags) {
  constexpr std::size_t THREADS = 8;
  constexpr std::size_t BLOCKS  = 100;
  host_memory_resource host;
  tracking_resource_adaptor tracking{host};
  std::vector<std::vector<void*>> kept(THREADS);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&tracking, thread, &mine = kept[thread]] {
      scoped_allocation_tag tag{"thread " + std::to_string(thread)};
      for (std::size_t block = 0; block < BLOCKS; ++block) {
        void* pointer = tracking.allocate(thread + 1);
        if (block % 2 == 0) {
          tracking.deallocate(pointer, thread + 1);
        } else {
          mine.push_back(pointer);
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  auto const records = tracking.outstanding();
  ASSERT_EQ(records.size(), THREADS * BLOCKS / 2);
  std::map<std::string, std::size_t> per_tag;
  for (std::size_t index = 0; index < records.size(); ++index) {
    if (index > 0) {
      EXPECT_LT(records[index - 1].sequence, records[index].sequence);
    }
    ++per_tag[records[index].tag];
    // Each thread allocates (thread + 1) bytes: the tag and the size must agree.
    EXPECT_EQ(records[index].tag, "thread " + std::to_string(records[index].bytes - 1));
  }
  EXPECT_EQ(per_tag.size(), THREADS);
  for (auto const& [tag, count] : per_tag) {
    EXPECT_EQ(count, BLOCKS / 2) << tag;
  }
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    for (void* pointer : kept[thread]) {
      tracking.deallocate(pointer, thread + 1);
    }
  }
  EXPECT_EQ(tracking.outstanding_bytes(), 0U);
  // Every thread keeps its last block, so the last sequence number handed out is outstanding.
  EXPECT_EQ(records.back().sequence, THREADS * BLOCKS - 1);
}

}  // namespace
}  // namespace spillway
