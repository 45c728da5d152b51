// The CUDA declarations of a build without the CUDA backend: every constructor says why.
#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

namespace spillway {
namespace {

[[noreturn]] void throw_unavailable() {
  throw not_supported("CUDA backend unavailable: " + cuda_unavailable_reason());
}

}  // namespace

bool cuda_backend_available() noexcept { return false; }
int cuda_device_count() noexcept { return 0; }
std::string cuda_unavailable_reason() {
  return "this build has no CUDA backend (configure with -DSPILLWAY_ENABLE_CUDA=ON and a CUDA "
         "toolkit)";
}
cuda_memory_info cuda_device_memory() { throw_unavailable(); }
bool is_cuda_device_pointer(void const*) noexcept { return false; }
// The CPU backend runs every operation synchronously on the calling thread.
void stream_view::synchronize() const {}
bool cuda_copy_if_device(void*, void const*, std::size_t, stream_view) { return false; }
bool cuda_copy_async_if_device(void*, void const*, std::size_t, stream_view) { return false; }
bool cuda_fill_if_device(void*, std::uint8_t, std::size_t, stream_view) { return false; }

// Nothing is ever queued: a fence has nothing to wait for.
stream_fence::~stream_fence() = default;
stream_fence::stream_fence(stream_fence&& other) noexcept
  : handle_(other.handle_), recorded_(other.recorded_) {
  other.handle_   = nullptr;
  other.recorded_ = false;
}
stream_fence& stream_fence::operator=(stream_fence&& other) noexcept {
  handle_         = other.handle_;
  recorded_       = other.recorded_;
  other.handle_   = nullptr;
  other.recorded_ = false;
  return *this;
}
void stream_fence::record(stream_view) {}
void stream_fence::wait() {}

cuda_async_memory_resource::cuda_async_memory_resource() { throw_unavailable(); }
cuda_async_memory_resource::~cuda_async_memory_resource() = default;
void* cuda_async_memory_resource::do_allocate(std::size_t, std::size_t, stream_view) {
  throw_unavailable();
}
void cuda_async_memory_resource::do_deallocate(void*,
                                               std::size_t,
                                               std::size_t,
                                               stream_view) noexcept {}

pinned_host_memory_resource::pinned_host_memory_resource() { throw_unavailable(); }
void* pinned_host_memory_resource::do_allocate(std::size_t, std::size_t, stream_view) {
  throw_unavailable();
}
void pinned_host_memory_resource::do_deallocate(void*,
                                                std::size_t,
                                                std::size_t,
                                                stream_view) noexcept {}

cuda_stream::cuda_stream() { throw_unavailable(); }
cuda_stream::~cuda_stream() = default;
cuda_stream::cuda_stream(cuda_stream&& other) noexcept : handle_(other.handle_) {
  other.handle_ = nullptr;
}
cuda_stream& cuda_stream::operator=(cuda_stream&& other) noexcept {
  handle_       = other.handle_;
  other.handle_ = nullptr;
  return *this;
}
void cuda_stream::synchronize() const { throw_unavailable(); }

}  // namespace spillway
