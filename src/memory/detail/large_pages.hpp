/**
 * @file large_pages.hpp
 * @brief Host memory behind the CPU backend's resources: large blocks mapped on their own, and
 * a cache that hands freed large blocks out again.
 */
#pragma once

#include <cstddef>
#include <map>
#include <mutex>

namespace spillway::detail {

/// Large blocks are mapped in multiples of this size, aligned to it.
inline constexpr std::size_t LARGE_PAGE_BYTES = std::size_t{2} << 20;
/// Blocks of at least this many bytes are mapped on their own (and cached by `block_cache`).
/// Under AddressSanitizer every block comes from `operator new`, so that overflows and uses
/// after free are still caught.
inline constexpr std::size_t LARGE_BLOCK_MIN_BYTES = std::size_t{4} << 20;

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
 * @brief `bytes` of host memory aligned to `alignment` (a power of two).
 * @throws std::bad_alloc when the memory is not there
 */
[[nodiscard]] void* allocate_host_block(std::size_t bytes, std::size_t alignment);

/** Frees a block of `allocate_host_block(bytes, alignment)`. */
void deallocate_host_block(void* pointer, std::size_t bytes, std::size_t alignment) noexcept;

/**
 * @brief Keeps freed large blocks mapped and hands them out again, so that memory used once is
 * not cleared by the kernel on every reuse (a real device's memory is not either).
 *
 * The cache never holds more than `capacity` minus the bytes live in its owner: an emulated
 * device of capacity C keeps at most C bytes of host memory, live and cached together. A larger
 * cached block serves a smaller request by unmapping its tail. Blocks below
 * LARGE_BLOCK_MIN_BYTES go straight to `allocate_host_block`.
 * @note Thread-safe.
 */
class block_cache {
 public:
  /** @param capacity the most bytes live and cached together */
  explicit block_cache(std::size_t capacity) noexcept : capacity_(capacity) {}
  ~block_cache();
  block_cache(block_cache const&)            = delete;
  block_cache& operator=(block_cache const&) = delete;

  /**
   * @param live_bytes the owner's live bytes, this block included
   * @throws std::bad_alloc when the memory is not there
   */
  [[nodiscard]] void* allocate(std::size_t bytes, std::size_t alignment, std::size_t live_bytes);
  /** @param live_bytes the owner's live bytes once this block is freed */
  void deallocate(void* pointer,
                  std::size_t bytes,
                  std::size_t alignment,
                  std::size_t live_bytes) noexcept;
  /** @return bytes of freed blocks held for reuse */
  [[nodiscard]] std::size_t cached_bytes() const;

 private:
  std::size_t const capacity_;
  mutable std::mutex mutex_;
  std::multimap<std::size_t, void*> blocks_;  ///< mapped size -> block
  std::size_t cached_ = 0;
};

}  // namespace spillway::detail
