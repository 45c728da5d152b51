#include "detail/large_pages.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <new>
#include <string>

namespace spillway {

host_memory_resource::host_memory_resource(std::size_t cache_bytes)
  : cache_(cache_bytes > 0 ? std::make_shared<detail::block_cache>(cache_bytes) : nullptr) {}

host_memory_resource::~host_memory_resource() = default;

std::size_t host_memory_resource::cached_bytes() const {
  return cache_ ? cache_->cached_bytes() : 0;
}

void host_memory_resource::set_mapped_ceiling(std::size_t bytes) {
  if (cache_) {
    cache_->set_mapped_ceiling(bytes);
  }
}

void* host_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment, stream_view) {
  SPILLWAY_EXPECTS(is_power_of_two(alignment),
                   "alignment must be a power of two: " + std::to_string(alignment),
                   invalid_argument);
  if (bytes == 0) {
    return nullptr;
  }
  try {
    return cache_ ? cache_->allocate(bytes, alignment)
                  : ::operator new (bytes, std::align_val_t{alignment});
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
  if (cache_) {
    cache_->deallocate(pointer, bytes, alignment);
  } else {
    ::operator delete (pointer, bytes, std::align_val_t{alignment});
  }
}

bool host_memory_resource::do_is_equal(memory_resource const& other) const noexcept {
  // Blocks of a cache are mapped: only a resource without one frees what another without one
  // allocated.
  auto const* host = dynamic_cast<host_memory_resource const*>(&other);
  return host != nullptr && !cache_ && !host->cache_;
}

}  // namespace spillway
