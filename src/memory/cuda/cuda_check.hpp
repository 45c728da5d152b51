/**
 * @file cuda_check.hpp
 * @brief Error checks and launch shapes shared by the CUDA sources of every layer. Private; only
 * for sources built with the CUDA backend.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/stream_view.hpp>

#include <cstddef>
#include <cuda_runtime_api.h>
#include <string>

namespace spillway::detail::cuda {

/** @return the `cudaStream_t` inside `stream` (null: the legacy default stream) */
inline cudaStream_t native(stream_view stream) noexcept {
  return static_cast<cudaStream_t>(stream.value());
}

/** @throws spillway::logic_error naming `what` and the CUDA error when `status` is one */
inline void check(cudaError_t status, char const* what) {
  if (status != cudaSuccess) {
    (void)cudaGetLastError();
    throw logic_error(std::string{what} + " failed: " + cudaGetErrorName(status) + ": " +
                      cudaGetErrorString(status));
  }
}

/** @brief Checks the launch of the kernel just queued. */
inline void check_launch(char const* kernel) { check(cudaPeekAtLastError(), kernel); }

/** @brief Threads per block of the element-wise kernels. */
inline constexpr unsigned BLOCK = 256;

/** @return blocks of `BLOCK` threads for `items` items, at least 1, capped at 2^31 - 1 */
inline unsigned grid_for(std::size_t items) noexcept {
  std::size_t const blocks = (items + BLOCK - 1) / BLOCK;
  return static_cast<unsigned>(blocks == 0 ? 1 : (blocks > 0x7fffffffU ? 0x7fffffffU : blocks));
}

}  // namespace spillway::detail::cuda
