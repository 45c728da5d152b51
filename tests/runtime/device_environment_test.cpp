/**
 * Tests of `device_environment` and `device_task`, on the emulated device and (with a GPU) on
 * CUDA: a full device spills the store's buffers to make room, the host tier is counted, a task's
 * leases come from the environment's arbiter and its unpinned buffers spill through the arbiter's
 * hook. Also the choice of backend by name.
 */
#include "testing/cuda_testing.hpp"
#include "testing/parameter_printers.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/spill/spill_store.hpp>

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <vector>

namespace spillway {
namespace {

device_environment_options small_options(device_backend backend) {
  device_environment_options options;
  options.backend       = backend;
  options.device_memory = 1_MiB;
  options.host_memory   = 4_MiB;
  options.spill_root    = ::testing::TempDir();
  return options;
}

class DeviceEnvironment : public ::testing::TestWithParam<device_backend> {
 protected:
  void SetUp() override {
    if (GetParam() == device_backend::CUDA) {
      SPILLWAY_REQUIRE_CUDA_DEVICE();
    }
  }
  [[nodiscard]] device_environment_options options() const { return small_options(GetParam()); }
};

TEST_P(DeviceEnvironment, AFullDeviceSpillsTheStoreToMakeRoom) {
  device_environment environment{options()};
  auto const stream = environment.stream();
  std::vector<std::byte> pattern(600_KiB);
  for (std::size_t index = 0; index < pattern.size(); ++index) {
    pattern[index] = static_cast<std::byte>(index * 7);
  }
  auto spilled = environment.store().make_spillable(
    buffer{pattern.data(), memory_kind::HOST, pattern.size(), stream, environment.device()}, 0);
  EXPECT_EQ(spilled.tier(), spill_tier::DEVICE);
  EXPECT_EQ(environment.device_used_bytes(), 600_KiB);
  // 600 KiB more does not fit next to the first 600 KiB: the store must spill it.
  buffer second{600_KiB, stream, environment.device()};
  EXPECT_EQ(second.size(), 600_KiB);
  EXPECT_NE(spilled.tier(), spill_tier::DEVICE);
  EXPECT_GE(environment.host_tier().statistics().peak_bytes, 600_KiB);
  EXPECT_LE(environment.device_peak_bytes(), environment.device_memory());
  EXPECT_GE(environment.device_peak_bytes(), 600_KiB);
  second            = buffer{};
  auto const pinned = spilled.acquire();
  ASSERT_EQ(pinned.size(), pattern.size());
  buffer const on_host{
    pinned.data(), memory_kind::DEVICE, pinned.size(), stream, environment.host()};
  stream.synchronize();
  EXPECT_EQ(std::memcmp(on_host.data(), pattern.data(), pattern.size()), 0);
}

TEST_P(DeviceEnvironment, WithoutSpillableDataAnOversizedAllocationFails) {
  device_environment environment{options()};
  EXPECT_THROW((buffer{2_MiB, environment.stream(), environment.device()}), out_of_memory);
  EXPECT_EQ(environment.device_used_bytes(), 0U);
}

TEST_P(DeviceEnvironment, RejectsAHostBudgetBelowTheStoreMinimum) {
  auto too_small        = options();
  too_small.host_memory = 1_KiB;
  EXPECT_THROW(device_environment{too_small}, invalid_argument);
}

TEST_P(DeviceEnvironment, ATaskLeasesFromTheArbiterAndOwnsItsSpillableBuffers) {
  device_environment environment{options()};
  device_task task{environment, task_id{7}};
  EXPECT_EQ(task.context().id(), task_id{7});
  auto owned = environment.store().make_spillable(
    buffer{512_KiB, environment.stream(), environment.device()}, 0, task.context().id());
  auto const lease = task.context().request_lease(256_KiB);
  EXPECT_EQ(lease.bytes(), 256_KiB);
  EXPECT_EQ(environment.arbiter().total_statistics().grants, 1U);
  EXPECT_EQ(environment.store().spill_task(task.context().id(), 512_KiB), 512_KiB);
  EXPECT_NE(owned.tier(), spill_tier::DEVICE);
  EXPECT_EQ(environment.device_used_bytes(), 0U);
}

TEST(DeviceEnvironmentBookkeeping, TheHostCacheKeepsLessMappedAsTheStoresBookkeepingGrows) {
  // On the emulated device the host resource keeps freed blocks mapped up to the two budgets
  // (8 MiB here); the store's bookkeeping, counted in the host budget but on the heap, takes
  // from that: with more than 7 MiB of it, a freed 3 MiB block is not kept.
  auto options          = small_options(device_backend::EMULATED);
  options.device_memory = 4_MiB;
  device_environment environment{options};
  auto& host = dynamic_cast<host_memory_resource&>(environment.host().get());
  { buffer const freed{3_MiB, environment.stream(), environment.host()}; }
  if (host.cached_bytes() == 0) {
    GTEST_SKIP() << "this build's host resource keeps no freed blocks (sanitizers)";
  }
  std::vector<spillable_buffer> handles;
  for (std::size_t index = 0; index < 20000; ++index) {
    handles.push_back(environment.store().make_spillable(
      buffer{64, environment.stream(), environment.device()}, 0));
  }
  std::size_t const bookkeeping = environment.store().statistics().bookkeeping_bytes;
  EXPECT_GE(bookkeeping, 7_MiB);
  { buffer const freed{3_MiB, environment.stream(), environment.host()}; }
  EXPECT_EQ(host.cached_bytes(), 0U);
  handles.clear();
  EXPECT_EQ(environment.store().statistics().bookkeeping_bytes, 0U);
  // Without it, the cache keeps such a block again.
  { buffer const freed{3_MiB, environment.stream(), environment.host()}; }
  EXPECT_GE(host.cached_bytes(), 3_MiB);
}

TEST_P(DeviceEnvironment, TheDeviceAndTheHostTierAreOfTheBackendsKinds) {
  device_environment environment{options()};
  EXPECT_EQ(environment.backend(), GetParam());
  EXPECT_EQ(environment.device().kind(), memory_kind::DEVICE);
  bool const cuda = GetParam() == device_backend::CUDA;
  EXPECT_EQ(environment.host_tier().kind(), cuda ? memory_kind::PINNED_HOST : memory_kind::HOST);
  // The emulated device computes on the default stream; the GPU on a stream of its own.
  EXPECT_EQ(environment.stream() == default_stream(), !cuda);
  buffer const allocated{64_KiB, environment.stream(), environment.device()};
  EXPECT_EQ(is_cuda_device_pointer(allocated.data()), cuda);
}

INSTANTIATE_TEST_SUITE_P(Backends,
                         DeviceEnvironment,
                         ::testing::Values(device_backend::EMULATED, device_backend::CUDA),
                         [](auto const& test_info) {
                           return std::string{to_string(test_info.param)};
                         });

TEST(DeviceEnvironmentIo, TheStoreHasASpillIoThreadPerWorkerThreadThatItsHostBudgetHolds) {
  // More worker threads than this machine has cores: the count follows the pool, not the machine.
  auto const before = worker_threads();
  set_worker_threads(12);
  EXPECT_EQ(spill_io_threads(2_GiB, 4_MiB), 12U);   // the pool
  EXPECT_EQ(spill_io_threads(256_MiB, 4_MiB), 4U);  // the budget: 16 pieces a thread
  EXPECT_EQ(spill_io_threads(4_MiB, 4_MiB), 2U);    // never below a write and a read
  device_environment_options options = small_options(device_backend::EMULATED);
  options.host_memory                = 1_GiB;
  {
    device_environment environment{options};
    EXPECT_EQ(environment.store().io_threads(), 12U);
  }
  set_worker_threads(1);
  EXPECT_EQ(spill_io_threads(2_GiB, 4_MiB), 2U);
  set_worker_threads(before);
}

TEST(DeviceBackend, NamesResolveAndAutoFollowsTheMachine) {
  EXPECT_EQ(resolve_device_backend("cpu"), device_backend::EMULATED);
  bool const gpu = cuda_device_count() > 0;
  EXPECT_EQ(resolve_device_backend("auto"), gpu ? device_backend::CUDA : device_backend::EMULATED);
  if (gpu) {
    EXPECT_EQ(resolve_device_backend("cuda"), device_backend::CUDA);
  } else {
    EXPECT_THROW((void)resolve_device_backend("cuda"), not_supported);
  }
  EXPECT_THROW((void)resolve_device_backend("gpu"), invalid_argument);
  EXPECT_EQ(to_string(device_backend::EMULATED), "cpu");
  EXPECT_EQ(to_string(device_backend::CUDA), "cuda");
}

TEST(DeviceBackend, ACudaEnvironmentWithoutAGpuSaysWhy) {
  if (cuda_device_count() > 0) {
    GTEST_SKIP() << "a GPU is present";
  }
  try {
    device_environment environment{small_options(device_backend::CUDA)};
    FAIL() << "a CUDA environment was made without a GPU";
  } catch (not_supported const& error) {
    EXPECT_NE(std::string{error.what()}.find("CUDA"), std::string::npos) << error.what();
  }
}

TEST(DeviceBackend, ACudaDeviceLargerThanTheGpusFreeMemoryIsRejected) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  auto const info = cuda_device_memory();
  if (info.total_bytes - info.free_bytes < 2_MiB) {
    GTEST_SKIP() << "no used memory on the GPU to ask for";
  }
  // More than is free, less than the whole GPU: the check is against free memory.
  auto options          = small_options(device_backend::CUDA);
  options.device_memory = info.free_bytes + (info.total_bytes - info.free_bytes) / 2;
  try {
    device_environment environment{options};
    FAIL() << "a device larger than the GPU was accepted";
  } catch (invalid_argument const& error) {
    EXPECT_NE(std::string{error.what()}.find("free of"), std::string::npos) << error.what();
  }
}

}  // namespace
}  // namespace spillway
