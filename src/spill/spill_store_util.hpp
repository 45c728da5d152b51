/**
 * @file spill_store_util.hpp
 * @brief Byte views and timing shared by the parts of `spill_store_impl` (spill layer only).
 */
#pragma once

#include <spillway/memory/buffer.hpp>

#include <chrono>
#include <cstddef>
#include <span>

namespace spillway::detail {

using clock_type = std::chrono::steady_clock;

inline std::span<std::byte const> bytes_of(buffer const& data, std::size_t size) noexcept {
  return {static_cast<std::byte const*>(data.data()), size};
}

inline std::span<std::byte> bytes_of(buffer& data) noexcept {
  return {static_cast<std::byte*>(data.data()), data.size()};
}

inline std::byte const* at(void const* data, std::size_t offset) noexcept {
  return static_cast<std::byte const*>(data) + offset;
}

inline std::byte* at(void* data, std::size_t offset) noexcept {
  return static_cast<std::byte*>(data) + offset;
}

inline std::chrono::nanoseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start);
}

}  // namespace spillway::detail
