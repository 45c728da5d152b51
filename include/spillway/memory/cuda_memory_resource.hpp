/**
 * @file cuda_memory_resource.hpp
 * @brief The CUDA backend's device and pinned host resources, and an owning CUDA stream.
 *
 * Declared in every build so that code can name them; built only when SPILLWAY_ENABLE_CUDA is
 * on (`cuda_backend_available()` says whether it was). Without the backend, or without a GPU,
 * constructing one throws `not_supported` naming the reason. The header does not include CUDA
 * headers: streams travel as `stream_view` (a `cudaStream_t` inside).
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resource.hpp>

#include <cstddef>
#include <cstdint>
#include <string>

namespace spillway {

/** @return true when this build contains the CUDA backend */
bool cuda_backend_available() noexcept;

/**
 * @return the number of CUDA devices visible to the process (0 without the backend, without a
 * driver or without a GPU)
 */
int cuda_device_count() noexcept;

/** @return why CUDA cannot be used here ("" when it can): no backend, no driver, no device */
std::string cuda_unavailable_reason();

/**
 * @return true when `pointer` is memory of a CUDA device (cudaMalloc, cudaMallocAsync or
 * managed), which the CPU must not dereference; false for host, pinned host and emulated device
 * memory, for null, and in a build or on a machine without CUDA
 * @note Cheap once CUDA is up (a pointer-attribute query); the device count is read once.
 */
bool is_cuda_device_pointer(void const* pointer) noexcept;

/**
 * @brief Copies `bytes` with cudaMemcpyAsync on `stream` and waits for it, when either pointer is
 * device memory (`is_cuda_device_pointer`).
 * @return false, copying nothing, when neither is (the caller copies on the CPU)
 * @throws spillway::logic_error when the CUDA copy fails
 */
bool cuda_copy_if_device(void* destination,
                         void const* source,
                         std::size_t bytes,
                         stream_view stream);

/**
 * @brief `cuda_copy_if_device` without the wait: the copy is only queued on `stream`.
 * @return false, copying nothing, when neither pointer is device memory
 * @throws spillway::logic_error when CUDA refuses the copy
 */
bool cuda_copy_async_if_device(void* destination,
                               void const* source,
                               std::size_t bytes,
                               stream_view stream);

/**
 * @brief Sets `bytes` bytes to `value` with cudaMemsetAsync on `stream` and waits for it, when
 * `destination` is device memory.
 * @return false, writing nothing, when it is not
 */
bool cuda_fill_if_device(void* destination,
                         std::uint8_t value,
                         std::size_t bytes,
                         stream_view stream);

/** @brief Bytes free and in total on the current device, from cudaMemGetInfo. */
struct cuda_memory_info {
  std::size_t free_bytes  = 0;
  std::size_t total_bytes = 0;
};

/** @return the current device's memory, @throws not_supported without a usable device */
cuda_memory_info cuda_device_memory();

/**
 * @brief Stream-ordered device memory (cudaMallocFromPoolAsync / cudaFreeAsync on the given
 * stream) from a memory pool of its own on the current device.
 *
 * Freed memory stays in the pool for the next allocation (its release threshold is the maximum;
 * a pool's default gives it back to the driver at every synchronization, and an out-of-core sort
 * frees and allocates batches all the time), and goes back to the driver when the resource is
 * destroyed, once every allocation from it is freed. Limits are the caller's, e.g. a
 * `limiting_resource_adaptor`. The process's default pool is left alone.
 * @note Thread-safe. An allocation that fails throws `out_of_memory` naming the requested bytes
 * and the device's free and total bytes.
 */
class cuda_async_memory_resource final : public memory_resource {
 public:
  /** @throws not_supported when CUDA cannot be used here, naming why */
  cuda_async_memory_resource();
  ~cuda_async_memory_resource() override;
  cuda_async_memory_resource(cuda_async_memory_resource const&)            = delete;
  cuda_async_memory_resource& operator=(cuda_async_memory_resource const&) = delete;
  cuda_async_memory_resource(cuda_async_memory_resource&&)                 = delete;
  cuda_async_memory_resource& operator=(cuda_async_memory_resource&&)      = delete;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::DEVICE; }

  void* pool_ = nullptr;  ///< the cudaMemPool_t
};

/**
 * @brief Page-locked host memory (cudaHostAlloc), the fast staging area for device copies and
 * the host tier of the spill store on the CUDA backend.
 */
class pinned_host_memory_resource final : public memory_resource {
 public:
  /** @throws not_supported when CUDA cannot be used here, naming why */
  pinned_host_memory_resource();

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::PINNED_HOST; }
};

/**
 * @brief Owns a non-blocking CUDA stream; `view()` is what operators take.
 * @note Move-only. Destroying it synchronizes the stream first.
 */
class cuda_stream {
 public:
  /** @throws not_supported when CUDA cannot be used here */
  cuda_stream();
  ~cuda_stream();
  cuda_stream(cuda_stream&& other) noexcept;
  cuda_stream& operator=(cuda_stream&& other) noexcept;
  cuda_stream(cuda_stream const&)            = delete;
  cuda_stream& operator=(cuda_stream const&) = delete;

  [[nodiscard]] stream_view view() const noexcept { return stream_view{handle_}; }
  /** @brief Waits for everything queued on the stream. */
  void synchronize() const;

 private:
  void* handle_ = nullptr;
};

}  // namespace spillway
