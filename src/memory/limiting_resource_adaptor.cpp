#include <spillway/core/error.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>

#include <string>

namespace spillway {

void* limiting_resource_adaptor::do_allocate(std::size_t bytes,
                                             std::size_t alignment,
                                             stream_view stream) {
  std::size_t allocated = allocated_.load(std::memory_order_relaxed);
  do {
    if (bytes > limit_ - allocated) {
      throw out_of_memory("limiting adaptor: limit reached: requested " + std::to_string(bytes) +
                            " bytes, available " + std::to_string(limit_ - allocated) +
                            " bytes, limit " + std::to_string(limit_) + " bytes",
                          bytes,
                          limit_ - allocated,
                          limit_);
    }
  } while (
    !allocated_.compare_exchange_weak(allocated, allocated + bytes, std::memory_order_relaxed));
  try {
    return upstream_.allocate(bytes, alignment, stream);
  } catch (...) {
    allocated_.fetch_sub(bytes, std::memory_order_relaxed);
    throw;
  }
}

void limiting_resource_adaptor::do_deallocate(void* pointer,
                                              std::size_t bytes,
                                              std::size_t alignment,
                                              stream_view stream) noexcept {
  upstream_.deallocate(pointer, bytes, alignment, stream);
  allocated_.fetch_sub(bytes, std::memory_order_relaxed);
}

}  // namespace spillway
