#include "detail/large_pages.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>

#include <algorithm>
#include <new>
#include <string>

namespace spillway {

namespace {

/// What a device of `capacity` bytes keeps of its freed blocks.
std::size_t cache_limit(std::size_t capacity) noexcept {
  return capacity >= emulated_device_memory_resource::MAX_CACHED_BYTES / 2
           ? emulated_device_memory_resource::MAX_CACHED_BYTES
           : 2 * capacity;
}

}  // namespace

emulated_device_memory_resource::emulated_device_memory_resource(std::size_t capacity)
  : capacity_(capacity), cache_(std::make_shared<detail::block_cache>(cache_limit(capacity))) {}

emulated_device_memory_resource::emulated_device_memory_resource(std::size_t capacity,
                                                                 host_memory_resource& host)
  : capacity_(capacity), cache_(host.cache_) {
  SPILLWAY_EXPECTS(cache_ != nullptr,
                   "an emulated device shares the cache of a host resource that has one",
                   invalid_argument);
  // What both would have kept apart, at most MAX_CACHED_BYTES (a limit already above it stays).
  cache_->raise_limit(cache_limit(capacity), MAX_CACHED_BYTES);
}

emulated_device_memory_resource::~emulated_device_memory_resource() = default;

std::size_t emulated_device_memory_resource::cached_bytes() const { return cache_->cached_bytes(); }

void* emulated_device_memory_resource::do_allocate(std::size_t bytes,
                                                   std::size_t alignment,
                                                   stream_view) {
  SPILLWAY_EXPECTS(is_power_of_two(alignment),
                   "alignment must be a power of two: " + std::to_string(alignment),
                   invalid_argument);
  if (bytes == 0) {
    return nullptr;
  }
  std::size_t used = used_.load(std::memory_order_relaxed);
  do {
    if (bytes > capacity_ - used) {
      throw out_of_memory("emulated device out of memory: requested " + std::to_string(bytes) +
                            " bytes, available " + std::to_string(capacity_ - used) +
                            " bytes, capacity " + std::to_string(capacity_) + " bytes",
                          bytes,
                          capacity_ - used,
                          capacity_);
    }
  } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
  std::size_t const now = used + bytes;
  std::size_t peak      = peak_.load(std::memory_order_relaxed);
  while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
  }
  try {
    return cache_->allocate(bytes, alignment);
  } catch (std::bad_alloc const&) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    throw out_of_memory("emulated device: host memory behind it is exhausted: requested " +
                          std::to_string(bytes) + " bytes",
                        bytes);
  }
}

void emulated_device_memory_resource::do_deallocate(void* pointer,
                                                    std::size_t bytes,
                                                    std::size_t alignment,
                                                    stream_view) noexcept {
  if (pointer == nullptr) {
    return;
  }
  cache_->deallocate(pointer, bytes, alignment);
  used_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace spillway
