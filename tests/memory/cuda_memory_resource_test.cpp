#include "testing/cuda_testing.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <string>
#include <vector>

namespace spillway {
namespace {

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

TEST(CudaDevice, FreedMemoryStaysInTheResourcesPoolUntilTheResourceGoes) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream stream;
  std::size_t const bytes  = 256_MiB;
  std::size_t const before = cuda_device_memory().free_bytes;
  {
    cuda_async_memory_resource device;
    void* first = device.allocate(bytes, 256, stream.view());
    device.deallocate(first, bytes, 256, stream.view());
    stream.synchronize();  // where a pool of the default threshold gives its memory back
    std::size_t const held = cuda_device_memory().free_bytes;
    EXPECT_LE(held + bytes / 2, before) << "the freed memory went back to the driver";
    // Reused: the same size again takes nothing more from the driver.
    void* second = device.allocate(bytes, 256, stream.view());
    stream.synchronize();
    EXPECT_GE(cuda_device_memory().free_bytes + bytes / 2, held);
    device.deallocate(second, bytes, 256, stream.view());
    stream.synchronize();
  }
  EXPECT_GE(cuda_device_memory().free_bytes + bytes / 2, before) << "the pool kept its memory";
}

TEST(CudaBackend, HostAndEmulatedDeviceMemoryAreNotCudaDeviceMemory) {
  host_memory_resource host;
  emulated_device_memory_resource emulated{1_MiB};
  void* on_host     = host.allocate(64);
  void* on_emulated = emulated.allocate(64);
  EXPECT_FALSE(is_cuda_device_pointer(nullptr));
  EXPECT_FALSE(is_cuda_device_pointer(on_host));
  EXPECT_FALSE(is_cuda_device_pointer(on_emulated));
  // Emulated device memory is copied and filled by the CPU, in any build.
  fill_bytes(on_emulated, memory_kind::DEVICE, 0x5A, 64, default_stream());
  copy_bytes(on_host, memory_kind::HOST, on_emulated, memory_kind::DEVICE, 64, default_stream());
  EXPECT_EQ(static_cast<unsigned char*>(on_host)[63], 0x5A);
  host.deallocate(on_host, 64);
  emulated.deallocate(on_emulated, 64);
}

TEST(CudaDevice, CopyBytesAndFillBytesMoveDataThroughTheDevice) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream const stream;
  cuda_async_memory_resource device;
  pinned_host_memory_resource pinned;
  std::size_t const bytes = 3_MiB + 17;
  std::vector<std::uint8_t> source(bytes);
  std::iota(source.begin(), source.end(), std::uint8_t{7});
  void* first  = device.allocate(bytes, DEFAULT_ALIGNMENT, stream.view());
  void* second = device.allocate(bytes, DEFAULT_ALIGNMENT, stream.view());
  auto* staged = static_cast<std::uint8_t*>(pinned.allocate(bytes));
  EXPECT_TRUE(is_cuda_device_pointer(first));
  EXPECT_FALSE(is_cuda_device_pointer(staged));
  auto const before = copied_bytes();
  copy_bytes(first, memory_kind::DEVICE, source.data(), memory_kind::HOST, bytes, stream.view());
  copy_bytes(second, memory_kind::DEVICE, first, memory_kind::DEVICE, bytes, stream.view());
  copy_bytes(staged, memory_kind::PINNED_HOST, second, memory_kind::DEVICE, bytes, stream.view());
  EXPECT_EQ(std::vector<std::uint8_t>(staged, staged + bytes), source);
  auto const after = copied_bytes();
  EXPECT_EQ(after.between(memory_kind::HOST, memory_kind::DEVICE) -
              before.between(memory_kind::HOST, memory_kind::DEVICE),
            bytes);
  fill_bytes(second, memory_kind::DEVICE, 0xA5, bytes, stream.view());
  copy_bytes(staged, memory_kind::PINNED_HOST, second, memory_kind::DEVICE, bytes, stream.view());
  EXPECT_EQ(staged[0], 0xA5);
  EXPECT_EQ(staged[bytes - 1], 0xA5);
  pinned.deallocate(staged, bytes);
  device.deallocate(first, bytes, DEFAULT_ALIGNMENT, stream.view());
  device.deallocate(second, bytes, DEFAULT_ALIGNMENT, stream.view());
  stream.synchronize();
}

TEST(CudaDevice, AsyncCopiesThroughTwoPinnedWindowsWithFences) {
  // The spill store's double buffering: a window is refilled only after the fence of the copy
  // that last used it, while the other window's copy is in flight.
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream const stream;
  cuda_async_memory_resource device;
  pinned_host_memory_resource pinned;
  std::size_t const piece  = 1_MiB;
  std::size_t const pieces = 9;
  std::size_t const bytes  = piece * pieces - 5;
  void* on_device          = device.allocate(bytes, DEFAULT_ALIGNMENT, stream.view());
  std::array<std::uint8_t*, 2> windows{static_cast<std::uint8_t*>(pinned.allocate(piece)),
                                       static_cast<std::uint8_t*>(pinned.allocate(piece))};
  std::array<stream_fence, 2> fences;
  auto const value = [](std::size_t index) { return static_cast<std::uint8_t>(index * 31 + 3); };
  for (std::size_t index = 0, offset = 0; offset < bytes; ++index, offset += piece) {
    std::size_t const slot = index % 2;
    fences[slot].wait();
    std::size_t const size = std::min(piece, bytes - offset);
    std::fill_n(windows[slot], size, value(index));
    EXPECT_TRUE(copy_bytes_async(static_cast<std::uint8_t*>(on_device) + offset,
                                 memory_kind::DEVICE,
                                 windows[slot],
                                 memory_kind::PINNED_HOST,
                                 size,
                                 stream.view()));
    fences[slot].record(stream.view());
  }
  stream.synchronize();
  std::vector<std::uint8_t> back(bytes);
  copy_bytes(back.data(), memory_kind::HOST, on_device, memory_kind::DEVICE, bytes, stream.view());
  for (std::size_t offset = 0; offset < bytes; offset += piece) {
    ASSERT_EQ(back[offset], value(offset / piece)) << offset;
    ASSERT_EQ(back[std::min(offset + piece, bytes) - 1], value(offset / piece)) << offset;
  }
  pinned.deallocate(windows[0], piece);
  pinned.deallocate(windows[1], piece);
  device.deallocate(on_device, bytes, DEFAULT_ALIGNMENT, stream.view());
  stream.synchronize();
}

}  // namespace
}  // namespace spillway
