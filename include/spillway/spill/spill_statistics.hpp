/**
 * @file spill_statistics.hpp
 * @brief What the spill store has moved between tiers, how fast, how well it compressed, and what
 * sits on each tier now: the numbers the run report shows.
 */
#pragma once

#include <spillway/spill/spill_tier.hpp>

#include <array>
#include <chrono>
#include <cstddef>
#include <string>

namespace spillway {

/** @brief Moves of buffers from one tier to another. */
struct tier_transfer {
  std::size_t count        = 0;      ///< buffers moved
  std::size_t raw_bytes    = 0;      ///< their uncompressed (packed) size
  std::size_t stored_bytes = 0;      ///< their size on the destination tier (compressed or not)
  std::chrono::nanoseconds time{0};  ///< time spent moving them (copy, compression, I/O)
};

/** @brief A snapshot of a spill store's counters. */
struct spill_statistics {
  /** @brief `[from][to]`; DEVICE->DISK counts buffers staged on the host past its budget. */
  std::array<std::array<tier_transfer, NUM_SPILL_TIERS>, NUM_SPILL_TIERS> transfers{};
  std::array<std::size_t, NUM_SPILL_TIERS> bytes_on{};    ///< bytes held on each tier now
  std::array<std::size_t, NUM_SPILL_TIERS> buffers_on{};  ///< buffers on each tier now
  std::size_t write_errors = 0;  ///< disk writes that failed (their buffers stayed higher)
  std::size_t read_errors  = 0;  ///< disk reads that failed (missing, truncated, corrupt)
  /// Device-to-disk spills staged through one window of a smaller piece, the host tier having
  /// no room for the usual two (held by buffers that could not move at the time).
  std::size_t small_staging_spills = 0;
  /// Host memory the store's callers counted in its budget (`spill_store::reserve_caller_host`):
  /// the most they held at once.
  std::size_t caller_host_peak = 0;
  /// The most the store's host bytes and its callers' together ever went past the budget: a
  /// caller's allocation that no eviction could make room for, or a spill or read the store's own
  /// bytes left room for but its callers' did not. 0: the budget held.
  std::size_t host_over_budget_peak = 0;
  /// Host bytes the store's catalog takes beside the data (each entry, its places in the
  /// catalog, a table's pack metadata), counted in the host budget: now, and the most at once.
  /// A sort of a large input keeps tens of thousands of chunks.
  std::size_t bookkeeping_bytes = 0;
  std::size_t bookkeeping_peak  = 0;
  std::string last_error;  ///< the message of the last write or read error
  /// The message of the last error of the disk itself (full, failing, a corrupt block). Once the
  /// disk fails, later errors are often the host running out of room for what could not go to
  /// the disk, and `last_error` names those instead.
  std::string last_disk_error;

  /** @return moves from `from` to `to` */
  [[nodiscard]] tier_transfer const& between(spill_tier from, spill_tier to) const noexcept {
    return transfers[index_of(from)][index_of(to)];
  }
  /** @return raw bytes over stored bytes of everything written to disk (1 when nothing was) */
  [[nodiscard]] double disk_compression_ratio() const noexcept {
    std::size_t raw    = 0;
    std::size_t stored = 0;
    for (auto from : {spill_tier::DEVICE, spill_tier::HOST}) {
      raw += between(from, spill_tier::DISK).raw_bytes;
      stored += between(from, spill_tier::DISK).stored_bytes;
    }
    return stored == 0 ? 1.0 : static_cast<double>(raw) / static_cast<double>(stored);
  }
  /** @return raw over stored bytes of device-to-host moves (1 when none) */
  [[nodiscard]] double host_compression_ratio() const noexcept {
    auto const& moved = between(spill_tier::DEVICE, spill_tier::HOST);
    return moved.stored_bytes == 0
             ? 1.0
             : static_cast<double>(moved.raw_bytes) / static_cast<double>(moved.stored_bytes);
  }
};

}  // namespace spillway
