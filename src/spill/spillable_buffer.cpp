#include "spill/spill_store_impl.hpp"

#include <spillway/core/error.hpp>
#include <spillway/spill/spillable_buffer.hpp>

namespace spillway {

pinned_buffer::pinned_buffer(pinned_buffer&& other) noexcept
  : store_(std::exchange(other.store_, nullptr)),
    id_(other.id_),
    data_(other.data_),
    size_(other.size_) {}

pinned_buffer& pinned_buffer::operator=(pinned_buffer&& other) noexcept {
  if (this != &other) {
    reset();
    store_ = std::exchange(other.store_, nullptr);
    id_    = other.id_;
    data_  = other.data_;
    size_  = other.size_;
  }
  return *this;
}

pinned_buffer::~pinned_buffer() { reset(); }

void pinned_buffer::reset() noexcept {
  if (store_ != nullptr) {
    std::exchange(store_, nullptr)->unpin(id_);
    data_ = nullptr;
  }
}

spillable_buffer::spillable_buffer(spillable_buffer&& other) noexcept
  : store_(std::exchange(other.store_, nullptr)), id_(other.id_), size_(other.size_) {}

spillable_buffer& spillable_buffer::operator=(spillable_buffer&& other) noexcept {
  if (this != &other) {
    release();
    store_ = std::exchange(other.store_, nullptr);
    id_    = other.id_;
    size_  = other.size_;
  }
  return *this;
}

spillable_buffer::~spillable_buffer() { release(); }

pinned_buffer spillable_buffer::acquire() const {
  SPILLWAY_EXPECTS(store_ != nullptr, "acquire of an empty spillable_buffer", logic_error);
  auto acquired = store_->acquire(id_);
  return pinned_buffer{store_, id_, acquired.data, acquired.size};
}

spill_tier spillable_buffer::tier() const {
  SPILLWAY_EXPECTS(store_ != nullptr, "tier of an empty spillable_buffer", logic_error);
  return store_->tier_of(id_);
}

buffer spillable_buffer::take_if_resident() {
  SPILLWAY_EXPECTS(store_ != nullptr, "take_if_resident of an empty spillable_buffer", logic_error);
  auto taken = store_->take_resident_buffer(id_);
  if (!taken) {
    return buffer{};
  }
  store_ = nullptr;
  return std::move(*taken);
}

void spillable_buffer::release() noexcept {
  if (store_ != nullptr) {
    std::exchange(store_, nullptr)->release(id_);
  }
}

}  // namespace spillway
