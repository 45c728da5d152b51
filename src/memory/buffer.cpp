#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>

#include <utility>

namespace spillway {

buffer::buffer(std::size_t bytes, stream_view stream, resource_ref resource)
  : data_(resource.allocate(bytes, DEFAULT_ALIGNMENT, stream)),
    size_(bytes),
    stream_(stream),
    resource_(&resource.get()),
    kind_(resource.kind()) {}

buffer::buffer(void const* source,
               memory_kind source_kind,
               std::size_t bytes,
               stream_view stream,
               resource_ref resource)
  : buffer(bytes, stream, resource) {
  copy_bytes(data_, kind_, source, source_kind, bytes, stream);
}

buffer::~buffer() { release_memory(); }

buffer::buffer(buffer&& other) noexcept
  : data_(std::exchange(other.data_, nullptr)),
    size_(std::exchange(other.size_, 0)),
    stream_(other.stream_),
    resource_(std::exchange(other.resource_, nullptr)),
    kind_(std::exchange(other.kind_, memory_kind::HOST)) {}

buffer& buffer::operator=(buffer&& other) noexcept {
  if (this != &other) {
    release_memory();
    data_     = std::exchange(other.data_, nullptr);
    size_     = std::exchange(other.size_, 0);
    stream_   = other.stream_;
    resource_ = std::exchange(other.resource_, nullptr);
    kind_     = std::exchange(other.kind_, memory_kind::HOST);
  }
  return *this;
}

void buffer::release_memory() noexcept {
  if (resource_ != nullptr) {
    resource_->deallocate(data_, size_, DEFAULT_ALIGNMENT, stream_);
  }
  data_     = nullptr;
  size_     = 0;
  resource_ = nullptr;
}

}  // namespace spillway
