/**
 * @file host_memory_resource.hpp
 * @brief Pageable host memory with any power-of-two alignment.
 */
#pragma once

#include <spillway/memory/memory_resource.hpp>

namespace spillway {

/**
 * @brief Allocates host memory with `::operator new(bytes, std::align_val_t)`.
 * @note Stateless and thread-safe; all instances are equal.
 */
class host_memory_resource final : public memory_resource {
 public:
  host_memory_resource() = default;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] bool do_is_equal(memory_resource const& other) const noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::HOST; }
};

}  // namespace spillway
