/**
 * @file stream_view.hpp
 * @brief A backend-neutral, non-owning handle to an ordered queue of work.
 *
 * On the CPU backend work is synchronous and every stream is equivalent; the handle is carried so
 * that the CUDA backend, where it wraps a `cudaStream_t`, fits the same signatures.
 */
#pragma once

#include <cstdint>

namespace spillway {

/**
 * @brief A non-owning view of a stream. The default-constructed view is the default stream.
 * @note Copyable and trivially cheap. Never owns or destroys what it refers to.
 */
class stream_view {
 public:
  constexpr stream_view() noexcept = default;
  /** @brief Wraps a backend handle (a `cudaStream_t` on the CUDA backend). */
  constexpr explicit stream_view(void* handle) noexcept : handle_(handle) {}

  /** @return the backend handle; null for the default stream */
  [[nodiscard]] constexpr void* value() const noexcept { return handle_; }
  [[nodiscard]] constexpr bool is_default() const noexcept { return handle_ == nullptr; }

  /**
   * @brief Blocks until all work queued on the stream is done. A no-op on the CPU backend.
   * @note Defined by the memory layer, where the backends are.
   */
  void synchronize() const;

  friend constexpr bool operator==(stream_view, stream_view) noexcept = default;

 private:
  void* handle_ = nullptr;
};

/** @return the default stream */
constexpr stream_view default_stream() noexcept { return stream_view{}; }

}  // namespace spillway
