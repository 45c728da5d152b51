/**
 * @file spill_tier.hpp
 * @brief The tiers a spillable buffer lives on, fastest first.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spillway {

/** @brief Where a spillable buffer's bytes are: ordered from fastest to slowest. */
enum class spill_tier : std::uint8_t {
  DEVICE,  ///< in the device resource, usable by operators
  HOST,    ///< in the host resource, possibly compressed with the host codec
  DISK,    ///< in a spill file, compressed with the disk codec and checksummed
};

/** @brief The number of tiers, for arrays indexed by tier. */
inline constexpr std::size_t NUM_SPILL_TIERS = 3;

/** @return "device", "host" or "disk" */
constexpr std::string_view to_string(spill_tier tier) noexcept {
  switch (tier) {
    case spill_tier::DEVICE:
      return "device";
    case spill_tier::HOST:
      return "host";
    case spill_tier::DISK:
      return "disk";
  }
  return "unknown";
}

/** @return the index of `tier` in arrays of `NUM_SPILL_TIERS` */
constexpr std::size_t index_of(spill_tier tier) noexcept { return static_cast<std::size_t>(tier); }

}  // namespace spillway
