/**
 * @file shuffle_map_tasks_test.cpp
 * @brief The map tasks of `spillway shuffle` on a rank's device: once run, they leave the OOM
 * protocol, so that the rank's own task (writing the partitions) is never left waiting on them.
 */
#include "shuffle_tasks.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/runtime/device_environment.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdlib>
#include <future>
#include <new>
#include <optional>
#include <stdlib.h>  // setenv

namespace spillway::cli {
namespace {

/// A device whose first allocation by task 0 fails as a full device would (SPILLWAY_INJECT_OOM,
/// read when the environment is made).
class ShuffleMapTasks : public ::testing::Test {
 protected:
  void SetUp() override { ::setenv("SPILLWAY_INJECT_OOM", "task=0,kind=oom,skip=0,count=1", 1); }
  void TearDown() override { ::unsetenv("SPILLWAY_INJECT_OOM"); }
};

TEST_F(ShuffleMapTasks, ConcurrentTaskBlockedAfterTheMapsIsNotLeftWaitingOnTheIdleMapTasks) {
  device_environment_options options;
  options.device_memory = 1_MiB;
  options.host_memory   = 4_MiB;
  device_environment environment{options};
  device_task rank{environment, task_id{0}};
  task_context::thread_binding const binding{rank.context()};
  std::atomic<int> steps{0};
  {
    shuffle_map_tasks tasks{environment, 3, 1, 64_KiB, task_id{1}};
    int left = 6;
    tasks.run([&]() -> std::optional<map_work> {
      if (left == 0) {
        return std::nullopt;
      }
      --left;
      return map_work{1, 64_KiB, [&] {
                        buffer const step{64_KiB, environment.stream(), environment.device()};
                        ++steps;
                      }};
    });
    EXPECT_EQ(steps.load(), 6);
    EXPECT_THROW(tasks.run([]() -> std::optional<map_work> { return std::nullopt; }), logic_error);

    // The rank's task holds nothing and its allocation fails with nothing to spill: with nobody
    // else left to free memory, the protocol has it roll back (retry_oom, an out_of_memory)
    // rather than block until a map task frees memory, which none ever will.
    auto more = std::async(std::launch::async, [&] {
      task_context::thread_binding const also{rank.context()};
      buffer const wanted{64_KiB, environment.stream(), environment.device()};
    });
    if (more.wait_for(std::chrono::seconds(60)) != std::future_status::ready) {
      ADD_FAILURE() << "the rank's allocation still waits on the finished map tasks";
      std::_Exit(1);  // its thread waits for ever: nothing can join it
    }
    EXPECT_THROW(more.get(), out_of_memory);
  }
}

}  // namespace
}  // namespace spillway::cli
