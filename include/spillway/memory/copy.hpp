/**
 * @file copy.hpp
 * @brief The one place where bytes move between memory kinds.
 *
 * Every copy of payload between device, pinned host and host memory goes through `copy_bytes`, so
 * that the CUDA backend can make it asynchronous on the given stream and so that bytes moved can
 * be counted per pair of kinds.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_kind.hpp>

#include <array>
#include <cstddef>
#include <cstdint>

namespace spillway {

/**
 * @brief Copies `bytes` from `source` (of `source_kind`) to `destination` (of `destination_kind`)
 * ordered on `stream`. On the CPU backend it is a memcpy that completes before returning. When
 * either side is memory of a CUDA device it is a cudaMemcpyAsync on `stream`, also complete
 * before returning.
 * @throws spillway::invalid_argument for DISK, which is not addressable memory
 */
void copy_bytes(void* destination,
                memory_kind destination_kind,
                void const* source,
                memory_kind source_kind,
                std::size_t bytes,
                stream_view stream);

/**
 * @brief `copy_bytes` without the wait: when either side is memory of a CUDA device the copy is
 * only queued on `stream` (cudaMemcpyAsync), and both ranges must stay valid and untouched until
 * the stream or a `stream_fence` recorded after it is waited for. It runs at the copy engine's
 * speed, beside the CPU, when the host side is pinned (pageable host memory makes CUDA stage it
 * and the call returns later). On the CPU backend, and for emulated device memory, a memcpy
 * complete before returning, as `copy_bytes`.
 * @return true when the copy was queued on `stream` (wait before touching either side), false
 * when it is complete
 * @throws spillway::invalid_argument for DISK
 */
bool copy_bytes_async(void* destination,
                      memory_kind destination_kind,
                      void const* source,
                      memory_kind source_kind,
                      std::size_t bytes,
                      stream_view stream);

/**
 * @brief A point in a stream's queued work (a CUDA event without timing): `record` marks what is
 * queued on the stream so far, `wait` blocks until that is done. Double buffering with
 * `copy_bytes_async` takes one per staging buffer: a buffer is refilled only after the copy that
 * last used it is complete, while the copy from the other one goes on.
 * @note Move-only; not thread-safe. On the CPU backend, or without a CUDA device, nothing is ever
 * queued and both calls return at once.
 */
class stream_fence {
 public:
  stream_fence() noexcept = default;
  ~stream_fence();
  stream_fence(stream_fence&& other) noexcept;
  stream_fence& operator=(stream_fence&& other) noexcept;
  stream_fence(stream_fence const&)            = delete;
  stream_fence& operator=(stream_fence const&) = delete;

  /** @brief Marks everything queued on `stream` so far. @throws spillway::logic_error when CUDA
   * fails */
  void record(stream_view stream);
  /** @brief Waits for the marked work; at once when nothing is marked. Marks nothing after. */
  void wait();

 private:
  void* handle_  = nullptr;  ///< a cudaEvent_t, made at the first record on a machine with a GPU
  bool recorded_ = false;
};

/**
 * @brief Sets `bytes` bytes at `destination` (of `kind`) to `value`, ordered on `stream` and
 * complete before returning: a memset, or a cudaMemsetAsync for memory of a CUDA device.
 * @throws spillway::invalid_argument for DISK
 */
void fill_bytes(
  void* destination, memory_kind kind, std::uint8_t value, std::size_t bytes, stream_view stream);

/** @brief Bytes copied so far by `copy_bytes`, per (source kind, destination kind). */
struct copy_counters {
  std::array<std::array<std::size_t, 4>, 4> bytes{};  ///< [source][destination]
  /** @return bytes copied from `source` to `destination` */
  [[nodiscard]] std::size_t between(memory_kind source, memory_kind destination) const noexcept {
    return bytes[static_cast<std::size_t>(source)][static_cast<std::size_t>(destination)];
  }
};

/** @return the process-wide counters of `copy_bytes` */
copy_counters copied_bytes() noexcept;

}  // namespace spillway
