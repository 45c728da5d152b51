/**
 * @file host_memory_resource.hpp
 * @brief Pageable host memory with any power-of-two alignment.
 */
#pragma once

#include <spillway/memory/memory_resource.hpp>

#include <cstddef>
#include <memory>

namespace spillway {
namespace detail {
class block_cache;
}  // namespace detail

class emulated_device_memory_resource;

/**
 * @brief Allocates host memory with `::operator new(bytes, std::align_val_t)`; with a cache,
 * blocks of 64 KiB and more are mapped on their own and, once freed, kept (up to the cache's
 * size, raised by an emulated device that shares the cache) and handed out again, so that a
 * spill tier's reused memory is not cleared by the kernel for every buffer.
 * @note Thread-safe. Instances without a cache are all equal (any of them frees what another
 * allocated); one with a cache is equal to itself only.
 */
class host_memory_resource final : public memory_resource {
 public:
  /** @param cache_bytes the most bytes of freed blocks kept for reuse; 0: no cache */
  explicit host_memory_resource(std::size_t cache_bytes = 0);
  ~host_memory_resource() override;
  host_memory_resource(host_memory_resource const&)            = delete;
  host_memory_resource& operator=(host_memory_resource const&) = delete;

  /** @return bytes of freed blocks kept for reuse */
  [[nodiscard]] std::size_t cached_bytes() const;
  /**
   * @brief Bounds what the cache keeps by a memory budget: from now on, the large blocks handed
   * out (by this resource and any emulated device sharing its cache) and the freed blocks kept
   * together stay within `bytes` as long as the blocks handed out do; the cache unmaps blocks
   * first. Without a cache, nothing changes.
   */
  void set_mapped_ceiling(std::size_t bytes);

 private:
  friend class emulated_device_memory_resource;  // shares the cache

  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] bool do_is_equal(memory_resource const& other) const noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::HOST; }

  std::shared_ptr<detail::block_cache> cache_;  ///< null: no cache
};

}  // namespace spillway
