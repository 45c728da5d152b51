#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>

#include <string>
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

buffer::buffer(std::shared_ptr<buffer const> owner, void* data, std::size_t bytes)
  : data_(data), size_(bytes), owner_(std::move(owner)) {
  SPILLWAY_EXPECTS(owner_ != nullptr, "a buffer slice needs its allocation", invalid_argument);
  auto const* const first = static_cast<std::byte const*>(owner_->data());
  auto const* const begin = static_cast<std::byte const*>(data);
  auto const* const end   = first + owner_->size();
  SPILLWAY_EXPECTS(
    (data == nullptr && bytes == 0) ||
      (begin >= first && begin <= end && bytes <= static_cast<std::size_t>(end - begin)),
    "a buffer slice of " + std::to_string(bytes) + " bytes is not inside its allocation of " +
      std::to_string(owner_->size()),
    invalid_argument);
  stream_   = owner_->stream();
  resource_ = owner_->resource();
  kind_     = owner_->kind();
}

buffer::~buffer() { release_memory(); }

buffer::buffer(buffer&& other) noexcept
  : data_(std::exchange(other.data_, nullptr)),
    size_(std::exchange(other.size_, 0)),
    stream_(other.stream_),
    resource_(std::exchange(other.resource_, nullptr)),
    kind_(std::exchange(other.kind_, memory_kind::HOST)),
    owner_(std::move(other.owner_)) {}

buffer& buffer::operator=(buffer&& other) noexcept {
  if (this != &other) {
    release_memory();
    data_     = std::exchange(other.data_, nullptr);
    size_     = std::exchange(other.size_, 0);
    stream_   = other.stream_;
    resource_ = std::exchange(other.resource_, nullptr);
    kind_     = std::exchange(other.kind_, memory_kind::HOST);
    owner_    = std::move(other.owner_);
  }
  return *this;
}

void buffer::release_memory() noexcept {
  if (owner_ != nullptr) {
    owner_.reset();  // the allocation goes with its last slice
  } else if (resource_ != nullptr) {
    resource_->deallocate(data_, size_, DEFAULT_ALIGNMENT, stream_);
  }
  data_     = nullptr;
  size_     = 0;
  resource_ = nullptr;
}

}  // namespace spillway
