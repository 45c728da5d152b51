// The per-task event counter: each task's events counted by kind, every event passed on.
#include <spillway/core/events.hpp>
#include <spillway/core/task_event_counter.hpp>

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace spillway {
namespace {

event of(event_kind kind, std::uint64_t task) {
  event e{};
  e.kind = kind;
  e.task = task_id{task};
  return e;
}

TEST(TaskEventCounter, CountsEachTasksEventsByKindAndPassesThemOn) {
  event_log next;
  task_event_counter counter{&next};
  counter.record(of(event_kind::OOM_RETRY, 3));
  counter.record(of(event_kind::OOM_RETRY, 3));
  counter.record(of(event_kind::OOM_SPLIT, 3));
  counter.record(of(event_kind::OOM_RETRY, 4));
  counter.record(of(event_kind::OOM_SPILLED, 0));
  EXPECT_EQ(counter.count(task_id{3}, event_kind::OOM_RETRY), 2U);
  EXPECT_EQ(counter.count(task_id{3}, event_kind::OOM_SPLIT), 1U);
  EXPECT_EQ(counter.count(task_id{3}, event_kind::OOM_SPILLED), 0U);
  EXPECT_EQ(counter.count(task_id{4}, event_kind::OOM_RETRY), 1U);
  EXPECT_EQ(counter.count(task_id{0}, event_kind::OOM_SPILLED), 1U) << "no task: id 0";
  EXPECT_EQ(counter.count(task_id{5}, event_kind::OOM_RETRY), 0U) << "an unknown task";
  ASSERT_EQ(next.events().size(), 5U);
  EXPECT_EQ(next.count(event_kind::OOM_RETRY), 3U);
}

TEST(TaskEventCounter, WithoutANextSinkItOnlyCounts) {
  task_event_counter counter;
  counter.record(of(event_kind::SEMAPHORE_ACQUIRED, 1));
  EXPECT_EQ(counter.count(task_id{1}, event_kind::SEMAPHORE_ACQUIRED), 1U);
}

TEST(TaskEventCounter, ConcurrentTasksRecordingAtOnceLoseNoEvent) {
  task_event_counter counter;
  std::vector<std::thread> threads;
  for (std::uint64_t task = 1; task <= 4; ++task) {
    threads.emplace_back([&counter, task] {
      for (int round = 0; round < 5000; ++round) {
        counter.record(of(event_kind::OOM_RETRY, task));
        counter.record(of(event_kind::OOM_RETRY, 9));  // a task every thread records for
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  for (std::uint64_t task = 1; task <= 4; ++task) {
    EXPECT_EQ(counter.count(task_id{task}, event_kind::OOM_RETRY), 5000U);
  }
  EXPECT_EQ(counter.count(task_id{9}, event_kind::OOM_RETRY), 20000U);
}

}  // namespace
}  // namespace spillway
