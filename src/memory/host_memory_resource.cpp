#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <new>
#include <string>

namespace spillway {

void* host_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment, stream_view) {
  SPILLWAY_EXPECTS(is_power_of_two(alignment),
                   "alignment must be a power of two: " + std::to_string(alignment),
                   invalid_argument);
  if (bytes == 0) {
    return nullptr;
  }
  try {
    return ::operator new (bytes, std::align_val_t{alignment});
  } catch (std::bad_alloc const&) {
    throw out_of_memory("host allocation failed: requested " + format_bytes(bytes), bytes);
  }
}

void host_memory_resource::do_deallocate(void* pointer,
                                         std::size_t bytes,
                                         std::size_t alignment,
                                         stream_view) noexcept {
  if (pointer == nullptr) {
    return;
  }
  ::operator delete (pointer, bytes, std::align_val_t{alignment});
}

bool host_memory_resource::do_is_equal(memory_resource const& other) const noexcept {
  return dynamic_cast<host_memory_resource const*>(&other) != nullptr;
}

}  // namespace spillway
