/**
 * @file memory_kind.hpp
 * @brief Where bytes live, ordered from the most to the least preferred place to compute on them.
 */
#pragma once

#include <cstdint>
#include <string_view>

namespace spillway {

/**
 * @brief The kind of memory a resource serves or a buffer lives in.
 *
 * Ordered by preference for computation: DEVICE < PINNED_HOST < HOST < DISK. Spilling moves a
 * buffer to a greater kind, unspilling to a lesser one.
 */
enum class memory_kind : std::uint8_t {
  DEVICE      = 0,  ///< accelerator memory; host memory with a hard capacity on the CPU backend
  PINNED_HOST = 1,  ///< page-locked host memory, the fast staging area for device copies
  HOST        = 2,  ///< pageable host memory
  DISK        = 3,  ///< files in the spill directory
};

/** @return "device", "pinned_host", "host" or "disk" */
constexpr std::string_view to_string(memory_kind kind) noexcept {
  switch (kind) {
    case memory_kind::DEVICE:
      return "device";
    case memory_kind::PINNED_HOST:
      return "pinned_host";
    case memory_kind::HOST:
      return "host";
    case memory_kind::DISK:
      return "disk";
  }
  return "unknown";
}

/** @return true when the CPU can read and write the memory directly */
constexpr bool is_host_accessible(memory_kind kind, bool device_is_emulated) noexcept {
  return kind == memory_kind::HOST || kind == memory_kind::PINNED_HOST ||
         (kind == memory_kind::DEVICE && device_is_emulated);
}

}  // namespace spillway
