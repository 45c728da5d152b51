/**
 * @file host_budget_resource.cpp
 * @brief Host memory counted in a spill store's host budget.
 */
#include <spillway/spill/host_budget_resource.hpp>
#include <spillway/spill/spill_store.hpp>

namespace spillway {

void* host_budget_resource::do_allocate(std::size_t bytes,
                                        std::size_t alignment,
                                        stream_view stream) {
  static_cast<void>(store_.reserve_caller_host(bytes));
  try {
    return upstream_.allocate(bytes, alignment, stream);
  } catch (...) {
    store_.release_caller_host(bytes);
    throw;
  }
}

void host_budget_resource::do_deallocate(void* pointer,
                                         std::size_t bytes,
                                         std::size_t alignment,
                                         stream_view stream) noexcept {
  upstream_.deallocate(pointer, bytes, alignment, stream);
  store_.release_caller_host(bytes);
}

}  // namespace spillway
