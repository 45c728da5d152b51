/**
 * @file pool_memory_resource.hpp
 * @brief A sub-allocating pool over any upstream resource, with coalescing of free blocks.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <memory>
#include <optional>

namespace spillway {
namespace detail {
class pool_impl;
}

/**
 * @brief Takes large chunks from `upstream` and hands out pieces of them.
 *
 * Design: an address-ordered free list with best fit and immediate coalescing of neighbours (the
 * arena), fronted by per-thread-shard caches of small power-of-two blocks (up to
 * `SMALL_BLOCK_LIMIT`) so that the common small allocation takes one uncontended lock and a list
 * pop. When the arena cannot serve a request and the pool may not grow, every cache is flushed
 * into the arena (coalescing) and the request is tried again before `out_of_memory` is thrown.
 * The pool grows by doubling up to `maximum_size`; chunks go back upstream only at destruction.
 *
 * @note Thread-safe. Alignments above `DEFAULT_ALIGNMENT` are served but cost extra bookkeeping.
 */
class pool_memory_resource final : public memory_resource {
 public:
  /** @brief Blocks up to this size are cached per thread shard. */
  static constexpr std::size_t SMALL_BLOCK_LIMIT = 64 * 1024;

  /**
   * @param upstream where chunks come from; must outlive the pool
   * @param initial_size bytes taken from upstream at construction (may be 0)
   * @param maximum_size the most bytes the pool takes from upstream; unbounded when empty
   * @throws spillway::invalid_argument when initial_size > maximum_size
   * @throws spillway::out_of_memory when upstream cannot supply the initial size
   */
  explicit pool_memory_resource(resource_ref upstream,
                                std::size_t initial_size                = 0,
                                std::optional<std::size_t> maximum_size = std::nullopt);
  ~pool_memory_resource() override;

  /** @return bytes taken from upstream */
  [[nodiscard]] std::size_t pool_size() const;
  /** @return bytes handed out and not yet freed (after rounding) */
  [[nodiscard]] std::size_t allocated_bytes() const;
  /** @return the largest block the arena can hand out without growing (caches not counted) */
  [[nodiscard]] std::size_t largest_free_block() const;
  /** @return the number of separate free blocks in the arena (a measure of fragmentation) */
  [[nodiscard]] std::size_t free_block_count() const;
  /** @brief Moves every cached small block back into the arena, coalescing it. */
  void flush_caches();
  /** @return the upstream resource */
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  resource_ref upstream_;
  std::unique_ptr<detail::pool_impl> impl_;
};

}  // namespace spillway
