/**
 * @file memory_resource.hpp
 * @brief The interface every allocator in spillway implements.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_kind.hpp>

#include <cstddef>

namespace spillway {

/** @brief The alignment of every allocation that does not ask for more: a cache line, and Arrow's.
 */
inline constexpr std::size_t DEFAULT_ALIGNMENT = 64;

/**
 * @brief Allocates and frees memory of one kind, ordered on a stream.
 *
 * The public functions are non-virtual and forward to the private `do_*` hooks, as in
 * `std::pmr::memory_resource` and RMM.
 *
 * @note Implementations are thread-safe unless they say otherwise. A resource is not copyable:
 * pass it by `resource_ref`.
 */
class memory_resource {
 public:
  memory_resource()                                  = default;
  virtual ~memory_resource()                         = default;
  memory_resource(memory_resource const&)            = delete;
  memory_resource& operator=(memory_resource const&) = delete;
  memory_resource(memory_resource&&)                 = delete;
  memory_resource& operator=(memory_resource&&)      = delete;

  /**
   * @brief Allocates `bytes` bytes aligned to `alignment`.
   * @param bytes the size; zero returns a valid, unique, non-dereferenceable pointer or null
   * @param alignment a power of two
   * @param stream the stream the memory is used on
   * @return the memory
   * @throws spillway::out_of_memory when the request cannot be satisfied, naming the sizes
   */
  [[nodiscard]] void* allocate(std::size_t bytes,
                               std::size_t alignment = DEFAULT_ALIGNMENT,
                               stream_view stream    = default_stream()) {
    return do_allocate(bytes, alignment, stream);
  }

  /** @brief Allocates with the default alignment on `stream`. */
  [[nodiscard]] void* allocate(std::size_t bytes, stream_view stream) {
    return do_allocate(bytes, DEFAULT_ALIGNMENT, stream);
  }

  /**
   * @brief Frees memory from `allocate` with the same `bytes` and `alignment`.
   * @note Never throws; stream-ordered: the memory may be reused by later work on `stream`.
   */
  void deallocate(void* pointer,
                  std::size_t bytes,
                  std::size_t alignment = DEFAULT_ALIGNMENT,
                  stream_view stream    = default_stream()) noexcept {
    do_deallocate(pointer, bytes, alignment, stream);
  }

  /** @brief Frees with the default alignment on `stream`. */
  void deallocate(void* pointer, std::size_t bytes, stream_view stream) noexcept {
    do_deallocate(pointer, bytes, DEFAULT_ALIGNMENT, stream);
  }

  /** @return true when memory from one can be freed by the other */
  [[nodiscard]] bool is_equal(memory_resource const& other) const noexcept {
    return this == &other || do_is_equal(other);
  }

  /** @return the kind of memory this resource hands out */
  [[nodiscard]] memory_kind kind() const noexcept { return do_kind(); }

 private:
  virtual void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) = 0;
  virtual void do_deallocate(void* pointer,
                             std::size_t bytes,
                             std::size_t alignment,
                             stream_view stream) noexcept                                 = 0;
  [[nodiscard]] virtual bool do_is_equal(memory_resource const& other) const noexcept {
    return this == &other;
  }
  [[nodiscard]] virtual memory_kind do_kind() const noexcept = 0;
};

}  // namespace spillway
