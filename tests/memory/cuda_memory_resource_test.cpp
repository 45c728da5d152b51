#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace spillway {
namespace {

/// Tests that need a GPU skip with the reason when there is none; the rest runs everywhere.
#define SPILLWAY_REQUIRE_CUDA_DEVICE()                                      \
  do {                                                                      \
    if (cuda_device_count() == 0) {                                         \
      GTEST_SKIP() << "needs a CUDA device: " << cuda_unavailable_reason(); \
    }                                                                       \
  } while (0)

TEST(CudaBackend, AvailabilityAndReasonAgree) {
  std::string const reason = cuda_unavailable_reason();
  if (!cuda_backend_available()) {
    EXPECT_EQ(cuda_device_count(), 0);
    EXPECT_NE(reason.find("no CUDA backend"), std::string::npos) << reason;
  } else if (cuda_device_count() == 0) {
    EXPECT_FALSE(reason.empty());
  } else {
    EXPECT_EQ(reason, "");
  }
}

TEST(CudaBackend, WithoutADeviceEveryConstructorSaysWhy) {
  if (cuda_device_count() > 0) {
    GTEST_SKIP() << "a CUDA device is present; CudaDevice tests cover it";
  }
  std::string const reason = cuda_unavailable_reason();
  auto const expect_reason = [&](auto&& make) {
    try {
      make();
      FAIL() << "constructed without a usable CUDA device";
    } catch (not_supported const& error) {
      EXPECT_NE(std::string{error.what()}.find(reason), std::string::npos) << error.what();
    }
  };
  expect_reason([] { cuda_async_memory_resource resource; });
  expect_reason([] { pinned_host_memory_resource resource; });
  expect_reason([] { cuda_stream stream; });
  expect_reason([] { (void)cuda_device_memory(); });
}

TEST(CudaDevice, AsyncResourceAllocatesOnAStreamAndReportsDeviceKind) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream const stream;
  cuda_async_memory_resource device;
  statistics_resource_adaptor counted{device};
  EXPECT_EQ(device.kind(), memory_kind::DEVICE);
  std::vector<void*> blocks;
  for (std::size_t bytes : {1_B, 256_B, 1_MiB, 64_MiB}) {
    void* pointer = counted.allocate(bytes, DEFAULT_ALIGNMENT, stream.view());
    ASSERT_NE(pointer, nullptr);
    EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pointer) % 256, 0U);
    counted.deallocate(pointer, bytes, DEFAULT_ALIGNMENT, stream.view());
  }
  stream.synchronize();
  EXPECT_EQ(counted.statistics().current_bytes, 0U);
  EXPECT_EQ(counted.statistics().total_count, 4U);
}

TEST(CudaDevice, AllocationBeyondTheDeviceIsOutOfMemoryWithSizes) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_async_memory_resource device;
  cuda_memory_info const info = cuda_device_memory();
  std::size_t const too_much  = info.total_bytes * 2;
  try {
    (void)device.allocate(too_much);
    FAIL() << "allocated twice the device";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), too_much);
    EXPECT_EQ(error.capacity_bytes(), info.total_bytes);
    EXPECT_NE(std::string{error.what()}.find(std::to_string(too_much)), std::string::npos);
  }
}

TEST(CudaDevice, PinnedHostMemoryIsWritableFromTheHost) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  pinned_host_memory_resource pinned;
  EXPECT_EQ(pinned.kind(), memory_kind::PINNED_HOST);
  auto* bytes = static_cast<unsigned char*>(pinned.allocate(4096));
  for (std::size_t index = 0; index < 4096; ++index) {
    bytes[index] = static_cast<unsigned char>(index);
  }
  EXPECT_EQ(bytes[4095], static_cast<unsigned char>(4095 % 256));
  pinned.deallocate(bytes, 4096);
}

TEST(CudaDevice, DeviceMemoryInfoIsConsistent) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_memory_info const info = cuda_device_memory();
  EXPECT_GT(info.total_bytes, 0U);
  EXPECT_LE(info.free_bytes, info.total_bytes);
}

}  // namespace
}  // namespace spillway
