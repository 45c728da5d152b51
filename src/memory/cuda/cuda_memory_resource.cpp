#include "memory/cuda/cuda_check.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

#include <cstdint>
#include <cuda_runtime_api.h>
#include <string>
#include <utility>

namespace spillway {
namespace {

using detail::cuda::check;
using detail::cuda::native;

[[noreturn]] void throw_unavailable() {
  throw not_supported("CUDA backend unavailable: " + cuda_unavailable_reason());
}

void require_device() {
  if (cuda_device_count() == 0) {
    throw_unavailable();
  }
}

}  // namespace

bool cuda_backend_available() noexcept { return true; }

int cuda_device_count() noexcept {
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    (void)cudaGetLastError();  // clear the sticky error of a machine without a driver
    return 0;
  }
  return count;
}

std::string cuda_unavailable_reason() {
  int count                = 0;
  cudaError_t const status = cudaGetDeviceCount(&count);
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    return std::string{"no usable CUDA driver or device ("} + cudaGetErrorName(status) + ": " +
           cudaGetErrorString(status) + ")";
  }
  return count == 0 ? "no CUDA device is visible" : "";
}

bool is_cuda_device_pointer(void const* pointer) noexcept {
  static bool const has_device = cuda_device_count() > 0;
  if (pointer == nullptr || !has_device) {
    return false;
  }
  cudaPointerAttributes attributes{};
  if (cudaPointerGetAttributes(&attributes, pointer) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return attributes.type == cudaMemoryTypeDevice || attributes.type == cudaMemoryTypeManaged;
}

bool cuda_copy_async_if_device(void* destination,
                               void const* source,
                               std::size_t bytes,
                               stream_view stream) {
  if (!is_cuda_device_pointer(destination) && !is_cuda_device_pointer(source)) {
    return false;
  }
  check(cudaMemcpyAsync(destination, source, bytes, cudaMemcpyDefault, native(stream)),
        "cudaMemcpyAsync");
  return true;
}

bool cuda_copy_if_device(void* destination,
                         void const* source,
                         std::size_t bytes,
                         stream_view stream) {
  if (!cuda_copy_async_if_device(destination, source, bytes, stream)) {
    return false;
  }
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return true;
}

bool cuda_fill_if_device(void* destination,
                         std::uint8_t value,
                         std::size_t bytes,
                         stream_view stream) {
  if (!is_cuda_device_pointer(destination)) {
    return false;
  }
  check(cudaMemsetAsync(destination, value, bytes, native(stream)), "cudaMemsetAsync");
  check(cudaStreamSynchronize(native(stream)), "cudaStreamSynchronize");
  return true;
}

cuda_memory_info cuda_device_memory() {
  require_device();
  cuda_memory_info info;
  check(cudaMemGetInfo(&info.free_bytes, &info.total_bytes), "cudaMemGetInfo");
  return info;
}

cuda_async_memory_resource::cuda_async_memory_resource() {
  require_device();
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  cudaMemPoolProps properties{};
  properties.allocType     = cudaMemAllocationTypePinned;
  properties.handleTypes   = cudaMemHandleTypeNone;
  properties.location.type = cudaMemLocationTypeDevice;
  properties.location.id   = device;
  cudaMemPool_t pool{};
  check(cudaMemPoolCreate(&pool, &properties), "cudaMemPoolCreate");
  std::uint64_t keep_all = UINT64_MAX;
  cudaError_t const status =
    cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep_all);
  if (status != cudaSuccess) {
    (void)cudaMemPoolDestroy(pool);
    check(status, "cudaMemPoolSetAttribute");
  }
  pool_ = pool;
}

cuda_async_memory_resource::~cuda_async_memory_resource() {
  // Returns at once; the pool's memory goes back once its last allocation is freed.
  (void)cudaMemPoolDestroy(static_cast<cudaMemPool_t>(pool_));
}

void* cuda_async_memory_resource::do_allocate(std::size_t bytes,
                                              std::size_t alignment,
                                              stream_view stream) {
  SPILLWAY_EXPECTS(is_power_of_two(alignment) && alignment <= 256,
                   "CUDA allocations are 256-byte aligned; alignment " + std::to_string(alignment) +
                     " cannot be served",
                   invalid_argument);
  if (bytes == 0) {
    return nullptr;
  }
  void* pointer = nullptr;
  cudaError_t const status =
    cudaMallocFromPoolAsync(&pointer, bytes, static_cast<cudaMemPool_t>(pool_), native(stream));
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    std::size_t free_bytes  = 0;
    std::size_t total_bytes = 0;
    (void)cudaMemGetInfo(&free_bytes, &total_bytes);
    throw out_of_memory("CUDA device out of memory: requested " + std::to_string(bytes) +
                          " bytes (" + format_bytes(bytes) + "), free " +
                          std::to_string(free_bytes) + " bytes, total " +
                          std::to_string(total_bytes) + " bytes",
                        bytes,
                        free_bytes,
                        total_bytes);
  }
  check(status, "cudaMallocFromPoolAsync");
  return pointer;
}

void cuda_async_memory_resource::do_deallocate(void* pointer,
                                               std::size_t,
                                               std::size_t,
                                               stream_view stream) noexcept {
  if (pointer != nullptr) {
    (void)cudaFreeAsync(pointer, native(stream));
  }
}

pinned_host_memory_resource::pinned_host_memory_resource() { require_device(); }

void* pinned_host_memory_resource::do_allocate(std::size_t bytes,
                                               std::size_t alignment,
                                               stream_view) {
  SPILLWAY_EXPECTS(is_power_of_two(alignment) && alignment <= 256,
                   "pinned allocations are page aligned; alignment " + std::to_string(alignment) +
                     " cannot be served",
                   invalid_argument);
  if (bytes == 0) {
    return nullptr;
  }
  void* pointer            = nullptr;
  cudaError_t const status = cudaHostAlloc(&pointer, bytes, cudaHostAllocDefault);
  if (status == cudaErrorMemoryAllocation) {
    (void)cudaGetLastError();
    throw out_of_memory("pinned host allocation failed: requested " + std::to_string(bytes) +
                          " bytes (" + format_bytes(bytes) + ")",
                        bytes);
  }
  check(status, "cudaHostAlloc");
  return pointer;
}

void pinned_host_memory_resource::do_deallocate(void* pointer,
                                                std::size_t,
                                                std::size_t,
                                                stream_view) noexcept {
  if (pointer != nullptr) {
    (void)cudaFreeHost(pointer);
  }
}

cuda_stream::cuda_stream() {
  require_device();
  cudaStream_t stream = nullptr;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreateWithFlags");
  handle_ = stream;
}

cuda_stream::~cuda_stream() {
  if (handle_ != nullptr) {
    (void)cudaStreamSynchronize(static_cast<cudaStream_t>(handle_));
    (void)cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
  }
}

cuda_stream::cuda_stream(cuda_stream&& other) noexcept
  : handle_(std::exchange(other.handle_, nullptr)) {}

cuda_stream& cuda_stream::operator=(cuda_stream&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) {
      (void)cudaStreamSynchronize(static_cast<cudaStream_t>(handle_));
      (void)cudaStreamDestroy(static_cast<cudaStream_t>(handle_));
    }
    handle_ = std::exchange(other.handle_, nullptr);
  }
  return *this;
}

void stream_view::synchronize() const {
  // Without a device nothing was queued: the CPU backend runs every operation synchronously.
  if (cuda_device_count() == 0) {
    return;
  }
  check(cudaStreamSynchronize(native(*this)), "cudaStreamSynchronize");
}

stream_fence::~stream_fence() {
  if (handle_ != nullptr) {
    (void)cudaEventSynchronize(static_cast<cudaEvent_t>(handle_));
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
  }
}

stream_fence::stream_fence(stream_fence&& other) noexcept
  : handle_(std::exchange(other.handle_, nullptr)),
    recorded_(std::exchange(other.recorded_, false)) {}

stream_fence& stream_fence::operator=(stream_fence&& other) noexcept {
  if (this != &other) {
    if (handle_ != nullptr) {
      (void)cudaEventSynchronize(static_cast<cudaEvent_t>(handle_));
      (void)cudaEventDestroy(static_cast<cudaEvent_t>(handle_));
    }
    handle_   = std::exchange(other.handle_, nullptr);
    recorded_ = std::exchange(other.recorded_, false);
  }
  return *this;
}

void stream_fence::record(stream_view stream) {
  // Without a device nothing was queued: there is nothing to mark.
  static bool const has_device = cuda_device_count() > 0;
  if (!has_device) {
    return;
  }
  if (handle_ == nullptr) {
    cudaEvent_t event = nullptr;
    check(cudaEventCreateWithFlags(&event, cudaEventDisableTiming), "cudaEventCreateWithFlags");
    handle_ = event;
  }
  check(cudaEventRecord(static_cast<cudaEvent_t>(handle_), native(stream)), "cudaEventRecord");
  recorded_ = true;
}

void stream_fence::wait() {
  if (!recorded_) {
    return;
  }
  recorded_ = false;
  check(cudaEventSynchronize(static_cast<cudaEvent_t>(handle_)), "cudaEventSynchronize");
}

void cuda_stream::synchronize() const {
  check(cudaStreamSynchronize(static_cast<cudaStream_t>(handle_)), "cudaStreamSynchronize");
}

}  // namespace spillway
