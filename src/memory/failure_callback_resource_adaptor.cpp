#include <spillway/core/error.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>

namespace spillway {

void* failure_callback_resource_adaptor::do_allocate(std::size_t bytes,
                                                     std::size_t alignment,
                                                     stream_view stream) {
  for (std::size_t attempt = 1;; ++attempt) {
    try {
      return upstream_.allocate(bytes, alignment, stream);
    } catch (out_of_memory const&) {
      callback_calls_.fetch_add(1, std::memory_order_relaxed);
      if (!callback_(bytes, attempt)) {
        throw;
      }
    }
  }
}

void failure_callback_resource_adaptor::do_deallocate(void* pointer,
                                                      std::size_t bytes,
                                                      std::size_t alignment,
                                                      stream_view stream) noexcept {
  upstream_.deallocate(pointer, bytes, alignment, stream);
}

}  // namespace spillway
