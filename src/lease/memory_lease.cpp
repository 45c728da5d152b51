#include <spillway/core/error.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/memory_lease.hpp>

#include <utility>

namespace spillway {

memory_lease::memory_lease(memory_lease&& other) noexcept
  : arbiter_(std::exchange(other.arbiter_, nullptr)),
    task_(other.task_),
    bytes_(std::exchange(other.bytes_, 0)),
    epoch_(other.epoch_),
    is_base_(other.is_base_) {}

memory_lease& memory_lease::operator=(memory_lease&& other) noexcept {
  if (this != &other) {
    close();
    arbiter_ = std::exchange(other.arbiter_, nullptr);
    task_    = other.task_;
    bytes_   = std::exchange(other.bytes_, 0);
    epoch_   = other.epoch_;
    is_base_ = other.is_base_;
  }
  return *this;
}

void memory_lease::close() noexcept {
  if (arbiter_ != nullptr) {
    arbiter_->release(task_, bytes_, epoch_, is_base_);
  }
  arbiter_ = nullptr;
  bytes_   = 0;
}

void memory_lease::shrink(std::size_t bytes) {
  SPILLWAY_EXPECTS_LE(
    bytes, bytes_, "cannot shrink a lease by more than it holds", invalid_argument);
  if (arbiter_ != nullptr && bytes > 0) {
    arbiter_->release(task_, bytes, epoch_, is_base_);
  }
  bytes_ -= bytes;
}

}  // namespace spillway
