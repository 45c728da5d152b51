// The RMM interop resources, both ways. The CPU tests use an RMM-conforming resource backed by host
// memory and spillway's emulated device; the CudaDevice tests use RMM's and spillway's CUDA
// resources and skip without a GPU.
#include "testing/cuda_testing.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/rmm_interop.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <numeric>
#include <rmm/cuda_stream_view.hpp>
#include <rmm/device_buffer.hpp>
#include <rmm/mr/cuda_async_memory_resource.hpp>
#include <string>
#include <vector>

namespace spillway {
namespace {

/// What the fake saw of the last call.
struct fake_calls {
  std::size_t allocations   = 0;
  std::size_t deallocations = 0;
  std::size_t outstanding   = 0;
  std::size_t last_bytes    = 0;
  std::size_t last_align    = 0;
  cudaStream_t last_stream  = nullptr;
};

/// An RMM device resource in host memory (the CPU cannot tell the difference), with a limit.
class fake_rmm_resource {
 public:
  fake_rmm_resource(fake_calls& calls, std::size_t limit) : calls_(&calls), limit_(limit) {}

  void* allocate(cuda::stream_ref stream, std::size_t bytes, std::size_t alignment = 256) {
    calls_->last_bytes  = bytes;
    calls_->last_align  = alignment;
    calls_->last_stream = stream.get();
    if (calls_->outstanding + bytes > limit_) {
      throw rmm::out_of_memory("fake: " + std::to_string(bytes) + " bytes over the limit");
    }
    ++calls_->allocations;
    calls_->outstanding += bytes;
    return std::aligned_alloc(alignment, (bytes + alignment - 1) / alignment * alignment);
  }
  void deallocate(cuda::stream_ref stream,
                  void* pointer,
                  std::size_t bytes,
                  std::size_t alignment = 256) noexcept {
    calls_->last_bytes  = bytes;
    calls_->last_align  = alignment;
    calls_->last_stream = stream.get();
    ++calls_->deallocations;
    calls_->outstanding -= bytes;
    std::free(pointer);
  }
  void* allocate_sync(std::size_t bytes, std::size_t alignment = 256) {
    return allocate(cuda::stream_ref{cudaStream_t{}}, bytes, alignment);
  }
  void deallocate_sync(void* pointer, std::size_t bytes, std::size_t alignment = 256) noexcept {
    deallocate(cuda::stream_ref{cudaStream_t{}}, pointer, bytes, alignment);
  }
  bool operator==(fake_rmm_resource const& other) const noexcept { return calls_ == other.calls_; }
  bool operator!=(fake_rmm_resource const& other) const noexcept { return !(*this == other); }
  friend void get_property(fake_rmm_resource const&, cuda::mr::device_accessible) noexcept {}

 private:
  fake_calls* calls_;
  std::size_t limit_;
};

static_assert(cuda::mr::resource<rmm_adaptor>);
static_assert(cuda::mr::resource_with<rmm_adaptor, cuda::mr::device_accessible>);

TEST(RmmInterop, DeviceResourceForwardsSizesAlignmentAndStream) {
  fake_calls calls;
  fake_rmm_resource fake{calls, 1_MiB};
  rmm_device_resource device{rmm::device_async_resource_ref{fake}};
  EXPECT_EQ(device.kind(), memory_kind::DEVICE);
  // A stream spillway passes reaches RMM as the same CUDA stream.
  auto* const handle = reinterpret_cast<cudaStream_t>(std::uintptr_t{0x1000});
  void* pointer      = device.allocate(1000, 512, stream_view{handle});
  ASSERT_NE(pointer, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pointer) % 512, 0U);
  EXPECT_EQ(calls.allocations, 1U);
  EXPECT_EQ(calls.last_bytes, 1000U);
  EXPECT_EQ(calls.last_align, 512U);
  EXPECT_EQ(calls.last_stream, handle);
  device.deallocate(pointer, 1000, 512, default_stream());
  EXPECT_EQ(calls.deallocations, 1U);
  EXPECT_EQ(calls.outstanding, 0U);
  EXPECT_EQ(calls.last_stream, nullptr);
}

TEST(RmmInterop, RmmOutOfMemoryBecomesSpillwayOutOfMemoryAndReachesSpillCallbacks) {
  fake_calls calls;
  fake_rmm_resource fake{calls, 1_MiB};
  rmm_device_resource device{rmm::device_async_resource_ref{fake}};
  try {
    (void)device.allocate(2_MiB);
    FAIL() << "allocated past the RMM resource's limit";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), 2_MiB);
    EXPECT_NE(std::string{error.what()}.find("over the limit"), std::string::npos) << error.what();
  }
  // A spill callback over the RMM resource frees what is held and the retry succeeds.
  void* held = device.allocate(768_KiB);
  failure_callback_resource_adaptor spilling{device, [&](std::size_t, std::size_t attempt) {
                                               if (held == nullptr || attempt > 1) {
                                                 return false;
                                               }
                                               device.deallocate(held, 768_KiB);
                                               held = nullptr;
                                               return true;
                                             }};
  void* fits = spilling.allocate(512_KiB);
  EXPECT_EQ(spilling.callback_calls(), 1U);
  EXPECT_EQ(held, nullptr);
  spilling.deallocate(fits, 512_KiB);
  EXPECT_EQ(calls.outstanding, 0U);
}

TEST(RmmInterop, AdaptorAllocatesThroughSpillwayResources) {
  emulated_device_memory_resource emulated{64_MiB};
  statistics_resource_adaptor counted{emulated};
  rmm_adaptor adaptor{counted};
  rmm::device_async_resource_ref ref{adaptor};
  cuda::stream_ref const stream{cudaStream_t{}};
  void* pointer = ref.allocate(stream, 10_KiB, 256);
  ASSERT_NE(pointer, nullptr);
  EXPECT_EQ(reinterpret_cast<std::uintptr_t>(pointer) % 256, 0U);
  EXPECT_EQ(counted.statistics().current_bytes, 10_KiB);
  EXPECT_EQ(emulated.used_bytes(), 10_KiB);
  ref.deallocate(stream, pointer, 10_KiB, 256);
  EXPECT_EQ(counted.statistics().current_bytes, 0U);
  void* synced = adaptor.allocate_sync(1_KiB);
  EXPECT_EQ(counted.statistics().total_count, 2U);
  adaptor.deallocate_sync(synced, 1_KiB);
  EXPECT_EQ(emulated.used_bytes(), 0U);
}

TEST(RmmInterop, AdaptorReportsSpillwayOutOfMemoryAsRmmOutOfMemory) {
  emulated_device_memory_resource emulated{64_MiB};
  limiting_resource_adaptor limited{emulated, 1_MiB};
  rmm_adaptor adaptor{limited};
  rmm::device_async_resource_ref ref{adaptor};
  EXPECT_THROW((void)ref.allocate(cuda::stream_ref{cudaStream_t{}}, 2_MiB, 256),
               rmm::out_of_memory);
  EXPECT_EQ(emulated.used_bytes(), 0U);
}

TEST(RmmInterop, AdaptorWrapsDeviceResourcesOnly) {
  host_memory_resource host;
  EXPECT_THROW(rmm_adaptor{host}, invalid_argument);
}

TEST(RmmInterop, ResourcesCompareByWhatTheyAllocateFrom) {
  emulated_device_memory_resource first{1_MiB};
  emulated_device_memory_resource second{1_MiB};
  EXPECT_TRUE(rmm_adaptor{first} == rmm_adaptor{first});
  EXPECT_TRUE(rmm_adaptor{first} != rmm_adaptor{second});
  fake_calls calls;
  fake_calls other_calls;
  fake_rmm_resource fake{calls, 1_MiB};
  fake_rmm_resource other{other_calls, 1_MiB};
  rmm_device_resource over_fake{rmm::device_async_resource_ref{fake}};
  rmm_device_resource over_fake_again{rmm::device_async_resource_ref{fake}};
  rmm_device_resource over_other{rmm::device_async_resource_ref{other}};
  EXPECT_TRUE(over_fake.is_equal(over_fake_again));
  EXPECT_FALSE(over_fake.is_equal(over_other));
  EXPECT_FALSE(over_fake.is_equal(first));
}

TEST(RmmInterop, RoundTripThroughRmmKeepsSpillwayAccounting) {
  // spillway resource -> RMM resource -> spillway resource: what an engine gets when it hands
  // spillway's tracked device to cuDF and cuDF's resource back to spillway's operators.
  emulated_device_memory_resource emulated{4_MiB};
  statistics_resource_adaptor counted{emulated};
  rmm_adaptor adaptor{counted};
  rmm_device_resource device{rmm::device_async_resource_ref{adaptor}};
  std::vector<std::uint8_t> source(100'000);
  std::iota(source.begin(), source.end(), std::uint8_t{3});
  {
    buffer data(source.size(), default_stream(), device);
    copy_bytes(data.data(),
               memory_kind::DEVICE,
               source.data(),
               memory_kind::HOST,
               source.size(),
               default_stream());
    std::vector<std::uint8_t> back(source.size());
    copy_bytes(back.data(),
               memory_kind::HOST,
               data.data(),
               memory_kind::DEVICE,
               back.size(),
               default_stream());
    EXPECT_EQ(back, source);
    EXPECT_EQ(counted.statistics().current_bytes, source.size());
    EXPECT_THROW(buffer(8_MiB, default_stream(), device), out_of_memory);
  }
  EXPECT_EQ(counted.statistics().current_bytes, 0U);
}

TEST(CudaDevice, RmmCudaAsyncResourceServesSpillwayCopies) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream const stream;
  rmm::mr::cuda_async_memory_resource rmm_device;
  rmm_device_resource device{rmm::device_async_resource_ref{rmm_device}};
  std::size_t const bytes = 5_MiB + 3;
  std::vector<std::uint8_t> source(bytes);
  std::iota(source.begin(), source.end(), std::uint8_t{11});
  std::vector<std::uint8_t> back(bytes);
  {
    buffer data(bytes, stream.view(), device);
    EXPECT_TRUE(is_cuda_device_pointer(data.data()));
    copy_bytes(
      data.data(), memory_kind::DEVICE, source.data(), memory_kind::HOST, bytes, stream.view());
    copy_bytes(
      back.data(), memory_kind::HOST, data.data(), memory_kind::DEVICE, bytes, stream.view());
  }
  stream.synchronize();
  EXPECT_EQ(back, source);
}

TEST(CudaDevice, RmmDeviceBufferCountsAgainstSpillwayResources) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_stream const stream;
  cuda_async_memory_resource device;
  statistics_resource_adaptor counted{device};
  limiting_resource_adaptor limited{counted, 64_MiB};
  rmm_adaptor adaptor{limited};
  {
    rmm::device_buffer data(
      3_MiB, rmm::cuda_stream_view{static_cast<cudaStream_t>(stream.view().value())}, adaptor);
    EXPECT_TRUE(is_cuda_device_pointer(data.data()));
    EXPECT_EQ(counted.statistics().current_bytes, 3_MiB);
    EXPECT_THROW(
      rmm::device_buffer(
        128_MiB, rmm::cuda_stream_view{static_cast<cudaStream_t>(stream.view().value())}, adaptor),
      rmm::out_of_memory);
  }
  stream.synchronize();
  EXPECT_EQ(counted.statistics().current_bytes, 0U);
}

}  // namespace
}  // namespace spillway
