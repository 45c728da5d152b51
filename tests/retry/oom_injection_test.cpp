/**
 * @file oom_injection_test.cpp
 * @brief Injected failures by spec text (parse, print) and through the retry adaptor, by API and
 * by the SPILLWAY_INJECT_OOM environment variable: kinds, skip/count, task filter.
 */
#include "lease/watchdog.hpp"
#include "retry/oom_test_device.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/oom_injection.hpp>

#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t CAPACITY = 1 << 20;

bool contains(std::string const& text, std::string const& part) {
  return text.find(part) != std::string::npos;
}

bool same(oom_injection const& lhs, oom_injection const& rhs) {
  return lhs.task == rhs.task && lhs.kind == rhs.kind && lhs.skip == rhs.skip &&
         lhs.count == rhs.count;
}

/// What one allocation through `resource` did: "ok", "retry", "split" or "oom".
std::string outcome_of(memory_resource& resource, std::size_t bytes) {
  try {
    test::device_allocation const allocation{resource, bytes};
    return "ok";
  } catch (retry_oom const&) {
    return "retry";
  } catch (split_and_retry_oom const&) {
    return "split";
  } catch (out_of_memory const&) {
    return "oom";
  }
}

std::vector<std::string> outcomes_of(memory_resource& resource, std::size_t count) {
  std::vector<std::string> result;
  for (std::size_t index = 0; index < count; ++index) {
    result.push_back(outcome_of(resource, 64));
  }
  return result;
}

using outcomes = std::vector<std::string>;

TEST(OomInjection, ParseDefaults) {
  auto const injection = parse_oom_injection("");
  EXPECT_FALSE(injection.task.has_value());
  EXPECT_EQ(injection.kind, injected_oom_kind::RETRY);
  EXPECT_EQ(injection.skip, 0U);
  EXPECT_EQ(injection.count, 1U);
}

TEST(OomInjection, ParseEveryField) {
  auto const injection = parse_oom_injection("task=7,kind=split,skip=3,count=2");
  ASSERT_TRUE(injection.task.has_value());
  EXPECT_EQ(*injection.task, task_id{7});
  EXPECT_EQ(injection.kind, injected_oom_kind::SPLIT);
  EXPECT_EQ(injection.skip, 3U);
  EXPECT_EQ(injection.count, 2U);
}

TEST(OomInjection, ParseAcceptsAnyOrderEmptyFieldsAndEveryTask) {
  auto const injection = parse_oom_injection("count=4,,kind=oom,task=*,");
  EXPECT_FALSE(injection.task.has_value());
  EXPECT_EQ(injection.kind, injected_oom_kind::OOM);
  EXPECT_EQ(injection.count, 4U);
  EXPECT_EQ(parse_oom_injection("kind=retry").kind, injected_oom_kind::RETRY);
}

TEST(OomInjection, ParseRejectsEachBadFieldNamingIt) {
  struct bad_spec {
    char const* text;
    std::vector<std::string> named;
  };
  std::vector<bad_spec> const cases{
    {"kind=explode", {"kind", "explode"}},
    {"skip=-1", {"skip", "-1"}},
    {"skip=", {"skip"}},
    {"skip=12x", {"skip", "12x"}},
    {"count=many", {"count", "many"}},
    {"count=99999999999999999999999", {"count"}},
    {"task=abc", {"task", "abc"}},
    {"task=", {"task"}},
    {"speed=3", {"speed", "unknown field"}},
    {"kind", {"kind", "key=value"}},
  };
  for (auto const& spec : cases) {
    try {
      static_cast<void>(parse_oom_injection(spec.text));
      ADD_FAILURE() << "'" << spec.text << "' was accepted";
    } catch (invalid_argument const& error) {
      for (auto const& part : spec.named) {
        EXPECT_TRUE(contains(error.what(), part)) << spec.text << ": " << error.what();
      }
      EXPECT_TRUE(contains(error.what(), spec.text)) << "the message quotes the spec";
    }
  }
}

TEST(OomInjection, ToStringRoundTrips) {
  EXPECT_EQ(to_string(oom_injection{}), "task=*,kind=retry,skip=0,count=1");
  std::vector<oom_injection> const injections{
    oom_injection{},
    oom_injection{task_id{12}, injected_oom_kind::SPLIT, 5, 3},
    oom_injection{std::nullopt, injected_oom_kind::OOM, 0, 100},
  };
  for (auto const& injection : injections) {
    auto const text = to_string(injection);
    EXPECT_TRUE(same(parse_oom_injection(text), injection)) << text;
  }
  EXPECT_EQ(to_string(parse_oom_injection("kind=oom,task=3")), "task=3,kind=oom,skip=0,count=1");
}

TEST(OomInjection, ApiFailsTheChosenAllocationsOfTheChosenTaskOnly) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{1}};
  task_context b{d.arbiter, task_id{2}};
  d.adaptor.testing_inject_oom(oom_injection{task_id{1}, injected_oom_kind::RETRY, 2, 2});
  {
    task_context::thread_binding const binding{b};
    EXPECT_EQ(outcomes_of(d.adaptor, 5), outcomes(5, "ok")) << "other tasks are not counted";
  }
  EXPECT_EQ(outcomes_of(d.adaptor, 3), outcomes(3, "ok")) << "nor allocations outside tasks";
  {
    task_context::thread_binding const binding{a};
    EXPECT_EQ(outcomes_of(d.adaptor, 5), (outcomes{"ok", "ok", "retry", "retry", "ok"}));
  }
  EXPECT_EQ(d.adaptor.injected_failures(), 2U);
  EXPECT_EQ(d.device.used_bytes(), 0U) << "an injected failure allocates nothing";
  // Each injected failure is an event naming the task.
  EXPECT_EQ(d.events.count(event_kind::OOM_INJECTED), 2U);
  for (auto const& e : d.events.events()) {
    if (e.kind == event_kind::OOM_INJECTED) {
      EXPECT_EQ(e.task, task_id{1});
    }
  }
}

TEST(OomInjection, InjectedRetryOomNamesTheTaskAndTheRequest) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{5}};
  d.adaptor.testing_inject_oom(oom_injection{});
  task_context::thread_binding const binding{a};
  try {
    test::device_allocation const allocation{d.adaptor, 4321};
    FAIL() << "the injected failure did not happen";
  } catch (retry_oom const& error) {
    EXPECT_EQ(error.task(), task_id{5});
    EXPECT_EQ(error.requested_bytes(), 4321U);
    EXPECT_TRUE(contains(error.what(), "task 5")) << error.what();
    EXPECT_TRUE(contains(error.what(), "4321")) << error.what();
  }
}

TEST(OomInjection, SplitKindThrowsSplitAndRetryOom) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{1}};
  d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::SPLIT, 1, 1});
  task_context::thread_binding const binding{a};
  EXPECT_EQ(outcomes_of(d.adaptor, 3), (outcomes{"ok", "split", "ok"}));
}

TEST(OomInjection, OomKindRunsTheWholeFailurePath) {
  test::run_with_watchdog([] {
    test::oom_test_device d{CAPACITY};
    task_context a{d.arbiter, task_id{1}};
    oom_coordinator::registration const registered{d.coordinator, a};
    task_context::thread_binding const binding{a};
    test::device_allocation const held{d.adaptor, 100};  // unspillable: A rolls back at once
    d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::OOM, 0, 1});
    try {
      test::device_allocation const allocation{d.adaptor, 256};
      FAIL() << "the injected failure did not happen";
    } catch (retry_oom const& error) {
      EXPECT_EQ(error.requested_bytes(), 256U);
      EXPECT_EQ(error.capacity_bytes(), CAPACITY);
    }
    EXPECT_EQ(d.coordinator.statistics().failures, 1U);
    EXPECT_EQ(d.coordinator.statistics().retries, 1U);

    // A spill that frees memory resolves the next injected failure: the allocation succeeds.
    d.coordinator.set_spill_function([](std::size_t bytes) { return bytes; });
    d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::OOM, 0, 1});
    test::device_allocation const allocation{d.adaptor, 256};
    EXPECT_EQ(allocation.bytes(), 256U);
    EXPECT_EQ(d.coordinator.statistics().spills, 1U);
    EXPECT_EQ(d.adaptor.injected_failures(), 2U);
  });
}

TEST(OomInjection, OomKindOutsideTasksLeavesTheUpstreamFailure) {
  test::oom_test_device d{CAPACITY};
  d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::OOM, 0, 1});
  try {
    test::device_allocation const allocation{d.adaptor, 300};
    FAIL() << "the injected failure did not happen";
  } catch (out_of_memory const& error) {
    EXPECT_TRUE(contains(error.what(), "injected")) << error.what();
    EXPECT_TRUE(contains(error.what(), "300")) << error.what();
  }
  EXPECT_EQ(outcome_of(d.adaptor, 300), "ok");
}

TEST(OomInjection, TurningInjectionOffAndOnRestartsTheCount) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{1}};
  task_context::thread_binding const binding{a};
  d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::RETRY, 1, 1});
  EXPECT_EQ(outcomes_of(d.adaptor, 2), (outcomes{"ok", "retry"}));
  d.adaptor.testing_inject_oom(std::nullopt);
  EXPECT_EQ(outcomes_of(d.adaptor, 3), outcomes(3, "ok"));
  d.adaptor.testing_inject_oom(oom_injection{std::nullopt, injected_oom_kind::RETRY, 1, 1});
  EXPECT_EQ(outcomes_of(d.adaptor, 2), (outcomes{"ok", "retry"}));
}

/// Sets an environment variable for the life of the object.
class scoped_environment {
 public:
  scoped_environment(char const* name, char const* value) : name_(name) {
    ::setenv(name, value, 1);
  }
  ~scoped_environment() { ::unsetenv(name_); }
  scoped_environment(scoped_environment const&)            = delete;
  scoped_environment& operator=(scoped_environment const&) = delete;

 private:
  char const* name_;
};

TEST(OomInjection, EnvironmentVariableInjectsIntoAdaptorsBuiltWhileItIsSet) {
  std::vector<std::string> warnings;
  std::mutex mutex;
  scoped_log_observer const observer{[&](log_level level, std::string_view message) {
    std::lock_guard lock{mutex};
    if (level == log_level::WARN) {
      warnings.emplace_back(message);
    }
  }};
  std::optional<test::oom_test_device> d;
  {
    scoped_environment const environment{"SPILLWAY_INJECT_OOM", "task=1,kind=split,skip=1,count=2"};
    d.emplace(CAPACITY);
  }
  test::oom_test_device later{CAPACITY};  // built after the variable is gone: no injection
  task_context a{d->arbiter, task_id{1}};
  task_context b{d->arbiter, task_id{2}};
  {
    task_context::thread_binding const binding{b};
    EXPECT_EQ(outcomes_of(d->adaptor, 3), outcomes(3, "ok"));
  }
  task_context::thread_binding const binding{a};
  EXPECT_EQ(outcomes_of(d->adaptor, 4), (outcomes{"ok", "split", "split", "ok"}));
  EXPECT_EQ(outcomes_of(later.adaptor, 4), outcomes(4, "ok"));
  std::lock_guard lock{mutex};
  ASSERT_EQ(warnings.size(), 1U);
  EXPECT_TRUE(contains(warnings[0], "task=1,kind=split,skip=1,count=2")) << warnings[0];
}

TEST(OomInjection, EnvironmentVariableOfEachKind) {
  for (std::string const kind : {"retry", "split", "oom"}) {
    std::optional<test::oom_test_device> d;
    {
      std::string const spec = "kind=" + kind + ",skip=0,count=1";
      scoped_environment const environment{"SPILLWAY_INJECT_OOM", spec.c_str()};
      d.emplace(CAPACITY);
    }
    task_context a{d->arbiter, task_id{1}};
    task_context::thread_binding const binding{a};
    // oom: the failure path finds an unregistered task and lets the upstream failure stand.
    EXPECT_EQ(outcome_of(d->adaptor, 64), kind) << kind;
    EXPECT_EQ(outcome_of(d->adaptor, 64), "ok") << kind;
  }
}

TEST(OomInjection, BadEnvironmentVariableFailsTheAdaptorNamingTheField) {
  scoped_environment const environment{"SPILLWAY_INJECT_OOM", "kind=boom"};
  try {
    test::oom_test_device const d{CAPACITY};
    FAIL() << "a bad SPILLWAY_INJECT_OOM was accepted";
  } catch (invalid_argument const& error) {
    EXPECT_TRUE(contains(error.what(), "kind")) << error.what();
    EXPECT_TRUE(contains(error.what(), "boom")) << error.what();
  }
}

}  // namespace
}  // namespace spillway
