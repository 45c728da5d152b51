/**
 * @file small_blocks.hpp
 * @brief Small blocks of the CPU backend's resources, cut from slabs that are large blocks of
 * the same cache, so that their memory is mapped, reused and given back with it.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace spillway::detail {

/// Every slot of a slab is aligned to this (slabs are page-aligned; slot sizes are multiples).
inline constexpr std::size_t SMALL_SLOT_ALIGNMENT = 256;

/**
 * @brief Hands out blocks under LARGE_BLOCK_MIN_BYTES from slabs of one slot size each; a slab
 * whose slots are all free again goes back to where it came from, unless it is the only slab of
 * its size with a free slot (at most one empty slab per size stays).
 *
 * Why not `operator new`: glibc keeps the pages of freed chunks that are not at the top of a
 * heap. A sort's many small chunk columns (device memory on the CPU backend, counted in its
 * budget) left 240-270 MiB of free but resident heap beside 14-40 MiB in use when a TPC-H
 * lineitem sort peaked, outside every budget; trimming the heap bounded it but cleared pages
 * that were taken again at once (10-20% slower). Slabs are large blocks of the block cache: a
 * freed slab is cached mapped within the cache's limit and ceiling, or unmapped.
 *
 * Slot sizes: multiples of SMALL_SLOT_ALIGNMENT, four per doubling (a block wastes at most a
 * fifth of its slot above 1 KiB). A slab holds at least 8 slots and is at least 256 KiB.
 * @note Thread-safe.
 */
class small_block_pool {
 public:
  using map_function   = std::function<void*(std::size_t bytes)>;
  using unmap_function = std::function<void(void* block, std::size_t bytes)>;

  /** @param map gives a slab (page-aligned; throws std::bad_alloc); @param unmap takes it back */
  small_block_pool(map_function map, unmap_function unmap)
    : map_(std::move(map)), unmap_(std::move(unmap)) {}
  /** @brief Gives back every slab; blocks still out become invalid. */
  ~small_block_pool();
  small_block_pool(small_block_pool const&)            = delete;
  small_block_pool& operator=(small_block_pool const&) = delete;

  /** @return the slot size that serves `bytes` */
  [[nodiscard]] static std::size_t slot_bytes(std::size_t bytes) noexcept;
  /** @return the size of a slab of slots of `slot` bytes */
  [[nodiscard]] static std::size_t slab_bytes(std::size_t slot) noexcept;

  /** @throws std::bad_alloc when no slab can be had */
  [[nodiscard]] void* allocate(std::size_t bytes);
  /** @param bytes what `allocate` was given for `pointer` */
  void deallocate(void* pointer, std::size_t bytes) noexcept;

  /** @return bytes of the slabs held now */
  [[nodiscard]] std::size_t slab_bytes_held() const;

 private:
  struct slab {
    std::byte* base     = nullptr;
    std::uint32_t slot  = 0;  ///< bytes per slot
    std::uint32_t slots = 0;  ///< slots in the slab
    std::uint32_t used  = 0;  ///< slots handed out
    std::uint32_t fresh = 0;  ///< slots below this were handed out at least once
    std::uint32_t free  = 0;  ///< the first freed slot (its first word holds the next), or slots
    bool listed         = false;  ///< in its size's list of slabs with a free slot
  };

  mutable std::mutex mutex_;
  map_function const map_;
  unmap_function const unmap_;
  std::map<std::uintptr_t, slab> slabs_;  ///< by base address
  /// slot size -> bases of its slabs with a free slot
  std::unordered_map<std::size_t, std::vector<std::uintptr_t>> open_;
  std::size_t held_ = 0;
};

}  // namespace spillway::detail
