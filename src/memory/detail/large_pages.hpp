/**
 * @file large_pages.hpp
 * @brief Host memory behind the CPU backend's resources: large blocks mapped on their own, and
 * a cache that hands freed large blocks out again.
 */
#pragma once

#include "small_blocks.hpp"

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>

namespace spillway::detail {

/// Large blocks are mapped in multiples of this size.
inline constexpr std::size_t LARGE_BLOCK_GRANULE = std::size_t{64} << 10;
/// Blocks of at least this many bytes (and alignments of at most a page) are mapped on their
/// own and may be cached. Under AddressSanitizer every block comes from `operator new`, so that
/// overflows and uses after free are still caught. 64 KiB: a sort's chunks hold columns of
/// 100-200 KiB, which glibc returned to the kernel and took back cleared, chunk after chunk
/// (100M all-equal keys: 435k -> 164k page faults, 1.76 -> 1.48 s).
inline constexpr std::size_t LARGE_BLOCK_MIN_BYTES = std::size_t{64} << 10;
/// The largest alignment a mapped block has (the page size).
inline constexpr std::size_t LARGE_BLOCK_ALIGNMENT = 4096;

#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool LARGE_BLOCKS_MAPPED = false;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
inline constexpr bool LARGE_BLOCKS_MAPPED = false;
#else
inline constexpr bool LARGE_BLOCKS_MAPPED = true;
#endif
#else
inline constexpr bool LARGE_BLOCKS_MAPPED = true;
#endif

/**
 * @brief Keeps freed large blocks mapped, up to `limit` bytes, and hands them out again, so that
 * memory used once is not cleared by the kernel on every reuse (a device's memory is not either).
 *
 * A request takes the smallest cached block that fits unless it is much larger (a short tail is
 * unmapped); else the largest smaller block grows to the request (`mremap`: its pages stay, only
 * the growth is fresh); else, rather than fresh pages, it takes the head of the much larger block
 * and the rest stays cached as a block of its own. When a freed block does not fit under the
 * limit, the largest cached blocks are unmapped first; blocks under 256 KiB
 * may hold only an eighth of the limit (past it they are unmapped at once), so that many of them
 * never push out the large ones. Blocks below LARGE_BLOCK_MIN_BYTES are cut from slabs that are
 * large blocks of the cache (`small_block_pool`); those aligned to more than SMALL_SLOT_ALIGNMENT
 * (or a page, for large ones) come from `operator new`.
 * @note Thread-safe.
 */
class block_cache {
 public:
  /** @param limit the most bytes of freed blocks kept */
  explicit block_cache(std::size_t limit);
  ~block_cache();
  block_cache(block_cache const&)            = delete;
  block_cache& operator=(block_cache const&) = delete;

  /** @throws std::bad_alloc when the memory is not there */
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment);
  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) noexcept;
  /** @return bytes of freed blocks held for reuse */
  [[nodiscard]] std::size_t cached_bytes() const;
  [[nodiscard]] std::size_t limit() const;
  /** @brief Keeps `bytes` more from now on, up to `cap` (a limit already above it stays). */
  void raise_limit(std::size_t bytes, std::size_t cap);
  /**
   * @brief From now on, large blocks handed out and cached blocks together stay within `bytes`
   * as long as the blocks handed out do: cached blocks are unmapped first, so that the cache
   * never takes memory beyond what its users' budgets allow.
   */
  void set_mapped_ceiling(std::size_t bytes);
  /** @return bytes of large blocks handed out now (slabs of small blocks included) */
  [[nodiscard]] std::size_t live_bytes() const;
  /** @return bytes of the slabs that small blocks are cut from */
  [[nodiscard]] std::size_t slab_bytes() const;

 private:
  /// Drops a cached block from the books (the caller holds the lock; the block stays mapped).
  void forget(std::multimap<std::size_t, void*>::iterator block) noexcept;
  /// Caches a mapped block, or unmaps it (the caller holds the lock).
  void keep(void* pointer, std::size_t size) noexcept;
  /// The most bytes the cache may hold now: its limit, less what the ceiling leaves (the
  /// caller holds the lock).
  [[nodiscard]] std::size_t room() const noexcept;
  /// Unmaps the largest cached blocks until the cache holds no more than room() (the caller
  /// holds the lock).
  void trim() noexcept;

  [[nodiscard]] void* allocate_large(std::size_t bytes);
  void deallocate_large(void* pointer, std::size_t bytes) noexcept;

  mutable std::mutex mutex_;
  std::size_t limit_;                                   ///< guarded by mutex_
  std::size_t ceiling_ = static_cast<std::size_t>(-1);  ///< live plus cached; guarded by mutex_
  std::size_t live_    = 0;  ///< large blocks handed out (mapped sizes); guarded by mutex_
  std::multimap<std::size_t, void*> blocks_;  ///< mapped size -> block
  std::size_t cached_       = 0;
  std::size_t cached_small_ = 0;  ///< of cached_, in blocks under SMALL_BLOCK_BYTES
  /// Small blocks; made last and reset first (its slabs come back to the cache).
  std::unique_ptr<small_block_pool> small_;
};

}  // namespace spillway::detail
