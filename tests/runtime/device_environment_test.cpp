/**
 * Tests of `device_environment` and `device_task`: a full device spills the store's buffers to
 * make room, the host tier is counted, a task's leases come from the environment's arbiter and
 * its unpinned buffers spill through the arbiter's hook.
 */
#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/runtime/device_environment.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace spillway {
namespace {

device_environment_options small_options() {
  device_environment_options options;
  options.device_memory = 1_MiB;
  options.host_memory   = 4_MiB;
  options.spill_root    = ::testing::TempDir();
  return options;
}

TEST(DeviceEnvironment, AFullDeviceSpillsTheStoreToMakeRoom) {
  device_environment environment{small_options()};
  std::vector<std::byte> pattern(600_KiB);
  for (std::size_t index = 0; index < pattern.size(); ++index) {
    pattern[index] = static_cast<std::byte>(index * 7);
  }
  auto spilled = environment.store().make_spillable(
    buffer{
      pattern.data(), memory_kind::HOST, pattern.size(), default_stream(), environment.device()},
    0);
  EXPECT_EQ(spilled.tier(), spill_tier::DEVICE);
  // 600 KiB more does not fit next to the first 600 KiB: the store must spill it.
  buffer second{600_KiB, default_stream(), environment.device()};
  EXPECT_EQ(second.size(), 600_KiB);
  EXPECT_NE(spilled.tier(), spill_tier::DEVICE);
  EXPECT_GE(environment.host_tier().statistics().peak_bytes, 600_KiB);
  EXPECT_LE(environment.raw_device().peak_bytes(), environment.device_memory());
  second            = buffer{};
  auto const pinned = spilled.acquire();
  ASSERT_EQ(pinned.size(), pattern.size());
  EXPECT_EQ(std::memcmp(pinned.data(), pattern.data(), pattern.size()), 0);
}

TEST(DeviceEnvironment, WithoutSpillableDataAnOversizedAllocationFails) {
  device_environment environment{small_options()};
  EXPECT_THROW((buffer{2_MiB, default_stream(), environment.device()}), out_of_memory);
}

TEST(DeviceEnvironment, RejectsAHostBudgetBelowTheStoreMinimum) {
  auto options        = small_options();
  options.host_memory = 1_KiB;
  EXPECT_THROW(device_environment{options}, invalid_argument);
}

TEST(DeviceEnvironment, ATaskLeasesFromTheArbiterAndOwnsItsSpillableBuffers) {
  device_environment environment{small_options()};
  device_task task{environment, task_id{7}};
  EXPECT_EQ(task.context().id(), task_id{7});
  auto owned = environment.store().make_spillable(
    buffer{512_KiB, default_stream(), environment.device()}, 0, task.context().id());
  auto const lease = task.context().request_lease(256_KiB);
  EXPECT_EQ(lease.bytes(), 256_KiB);
  EXPECT_EQ(environment.arbiter().total_statistics().grants, 1U);
  EXPECT_EQ(environment.store().spill_task(task.context().id(), 512_KiB), 512_KiB);
  EXPECT_NE(owned.tier(), spill_tier::DEVICE);
  EXPECT_EQ(environment.raw_device().used_bytes(), 0U);
}

}  // namespace
}  // namespace spillway
