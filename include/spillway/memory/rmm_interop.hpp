/**
 * @file rmm_interop.hpp
 * @brief Resources that let spillway and RMM (the allocator of cuDF and the RAPIDS libraries)
 * share device memory, in both directions.
 *
 * - `rmm_device_resource`: a spillway resource over an RMM device resource. An engine that
 *   already owns an RMM pool hands it to spillway's operators, adaptors and spill store.
 * - `rmm_adaptor`: an RMM resource over a spillway resource. cuDF calls given
 *   `rmm::device_async_resource_ref{adaptor}` allocate through spillway's limits, tracking,
 *   failure callbacks (spilling) and validation.
 *
 * Header-only, so that the library itself does not depend on RMM: include it in code built with
 * RMM's headers (the `spillway::rmm_interop` CMake target adds them when the build found librmm,
 * and defines SPILLWAY_HAS_RMM). Out-of-memory errors are translated each way:
 * `rmm::out_of_memory` becomes `spillway::out_of_memory` (which the retry framework acts on), and
 * back.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_kind.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <cuda/stream_ref>
#include <cuda_runtime_api.h>
#include <new>
#include <rmm/aligned.hpp>
#include <rmm/error.hpp>
#include <rmm/resource_ref.hpp>
#include <string>

namespace spillway {

namespace detail {

/** @return `stream` as the CUDA stream it wraps (null: the default stream) */
[[nodiscard]] inline ::cuda::stream_ref to_cuda_stream(stream_view stream) noexcept {
  return ::cuda::stream_ref{static_cast<cudaStream_t>(stream.value())};
}

/** @return `stream` as a spillway stream view */
[[nodiscard]] inline stream_view to_stream_view(::cuda::stream_ref stream) noexcept {
  return stream_view{static_cast<void*>(stream.get())};
}

}  // namespace detail

/**
 * @brief A spillway device resource that allocates from an RMM device resource.
 *
 * Allocations are stream-ordered on the stream spillway passes (the CUDA stream inside the
 * `stream_view`). An RMM out-of-memory error becomes `spillway::out_of_memory`, naming the
 * request, so that spill callbacks and `with_retry` handle it like any other.
 * @note Thread-safe when the upstream is. The upstream must outlive this resource.
 */
class rmm_device_resource final : public memory_resource {
 public:
  /** @param upstream where the memory comes from, e.g. an rmm::mr::cuda_async_memory_resource */
  explicit rmm_device_resource(rmm::device_async_resource_ref upstream) noexcept
    : upstream_(upstream) {}

  /** @return the RMM resource this allocates from */
  [[nodiscard]] rmm::device_async_resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    try {
      return upstream_.allocate(detail::to_cuda_stream(stream), bytes, alignment);
    } catch (rmm::bad_alloc const& error) {  // rmm::out_of_memory included
      throw out_of_memory("rmm_device_resource: the RMM resource could not allocate " +
                            std::to_string(bytes) + " bytes: " + error.what(),
                          bytes);
    }
  }

  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    upstream_.deallocate(detail::to_cuda_stream(stream), pointer, bytes, alignment);
  }

  [[nodiscard]] bool do_is_equal(memory_resource const& other) const noexcept override {
    auto const* same = dynamic_cast<rmm_device_resource const*>(&other);
    return same != nullptr && same->upstream_ == upstream_;
  }

  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::DEVICE; }

  rmm::device_async_resource_ref upstream_;
};

/**
 * @brief An RMM device resource (it satisfies `cuda::mr::resource` with the `device_accessible`
 * property) that allocates from a spillway resource.
 *
 * Wrap a spillway device resource (for example a `tracking_resource_adaptor` over a
 * `failure_callback_resource_adaptor` that spills) and pass
 * `rmm::device_async_resource_ref{adaptor}` to cuDF: its allocations then count against
 * spillway's budgets and trigger its spilling. `spillway::out_of_memory` leaves as
 * `rmm::out_of_memory` (what cuDF-based engines catch to retry); other errors pass unchanged.
 * @note Copyable, like RMM's resources; every copy refers to the same spillway resource, which
 * must outlive them. Thread-safe when that resource is.
 */
class rmm_adaptor {
 public:
  /**
   * @param resource a resource of device kind
   * @throws spillway::invalid_argument when `resource` hands out memory of a host kind: RMM's
   * device resources promise device-accessible memory
   */
  explicit rmm_adaptor(resource_ref resource) : resource_(resource) {
    SPILLWAY_EXPECTS(resource.kind() == memory_kind::DEVICE,
                     "rmm_adaptor: wraps device resources, not " +
                       std::string{to_string(resource.kind())} + " ones",
                     invalid_argument);
  }

  /** @return the spillway resource this allocates from */
  [[nodiscard]] resource_ref resource() const noexcept { return resource_; }

  /** @brief Stream-ordered allocation on `stream`. @throws rmm::out_of_memory when out of memory */
  [[nodiscard]] void* allocate(::cuda::stream_ref stream,
                               std::size_t bytes,
                               std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) {
    try {
      return resource_.allocate(bytes, alignment, detail::to_stream_view(stream));
    } catch (out_of_memory const& error) {
      throw rmm::out_of_memory(error.what());
    }
  }

  /** @brief Stream-ordered free on `stream`. */
  void deallocate(::cuda::stream_ref stream,
                  void* pointer,
                  std::size_t bytes,
                  std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) noexcept {
    resource_.deallocate(pointer, bytes, alignment, detail::to_stream_view(stream));
  }

  /** @brief Memory usable on any stream once this returns (allocated on the default stream). */
  [[nodiscard]] void* allocate_sync(std::size_t bytes,
                                    std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) {
    void* const pointer = allocate(::cuda::stream_ref{cudaStream_t{}}, bytes, alignment);
    default_stream().synchronize();
    return pointer;
  }

  /** @brief Frees memory no stream uses any more. */
  void deallocate_sync(void* pointer,
                       std::size_t bytes,
                       std::size_t alignment = rmm::CUDA_ALLOCATION_ALIGNMENT) noexcept {
    deallocate(::cuda::stream_ref{cudaStream_t{}}, pointer, bytes, alignment);
  }

  /** @brief Adaptors are equal when memory from one can go back to the other. */
  [[nodiscard]] bool operator==(rmm_adaptor const& other) const noexcept {
    return resource_ == other.resource_;
  }
  [[nodiscard]] bool operator!=(rmm_adaptor const& other) const noexcept {
    return !(*this == other);
  }

  /// The memory is device memory (RMM's property query).
  friend void get_property(rmm_adaptor const&, ::cuda::mr::device_accessible) noexcept {}

 private:
  resource_ref resource_;
};

}  // namespace spillway
