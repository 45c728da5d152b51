/**
 * @file arrow_memory_pool.cpp
 * @brief The Arrow memory pool over a spillway resource.
 */
#include "io/arrow/arrow_memory_pool.hpp"

#include <spillway/core/error.hpp>

#include <algorithm>
#include <cstring>
#include <exception>
#include <string>

namespace spillway::detail {
namespace {

/// Zero-byte allocations all point here, as Arrow's own pools do; it is never freed.
alignas(64) std::uint8_t zero_size_area[64];

std::size_t alignment_of(int64_t alignment) noexcept {
  return std::max<std::size_t>(static_cast<std::size_t>(alignment), alignof(std::max_align_t));
}

}  // namespace

arrow::Status arrow_memory_pool::Allocate(int64_t size, int64_t alignment, uint8_t** out) {
  if (size < 0) {
    return arrow::Status::Invalid("negative allocation size ", size);
  }
  if (size == 0) {
    *out = zero_size_area;
    return arrow::Status::OK();
  }
  try {
    *out = static_cast<uint8_t*>(
      resource_.allocate(static_cast<std::size_t>(size), alignment_of(alignment)));
  } catch (std::exception const& error) {
    return arrow::Status::OutOfMemory(
      "spillway resource refused ", size, " bytes for Arrow: ", error.what());
  }
  int64_t const now = bytes_allocated_.fetch_add(size) + size;
  int64_t previous  = max_memory_.load();
  while (now > previous && !max_memory_.compare_exchange_weak(previous, now)) {
  }
  total_bytes_.fetch_add(size);
  num_allocations_.fetch_add(1);
  return arrow::Status::OK();
}

arrow::Status arrow_memory_pool::Reallocate(int64_t old_size,
                                            int64_t new_size,
                                            int64_t alignment,
                                            uint8_t** pointer) {
  if (*pointer != zero_size_area && old_size > 0 && new_size > 0) {
    try {
      int64_t const size = allocated_size(*pointer, old_size);
      if (new_size <= size && new_size >= size / 2) {
        if (size != old_size || new_size != size) {
          std::scoped_lock const lock(kept_mutex_);
          if (kept_.emplace(*pointer, size).second) {
            kept_count_.fetch_add(1);
          }
        }
        return arrow::Status::OK();
      }
    } catch (std::exception const&) {
      // No room to keep the size aside (Arrow expects a status, never an exception): the bytes
      // move instead. An entry already kept for the block stays until it is freed.
    }
  }
  uint8_t* fresh = nullptr;
  ARROW_RETURN_NOT_OK(Allocate(new_size, alignment, &fresh));
  if (old_size > 0 && new_size > 0) {
    std::memcpy(fresh, *pointer, static_cast<std::size_t>(std::min(old_size, new_size)));
  }
  Free(*pointer, old_size, alignment);
  *pointer = fresh;
  return arrow::Status::OK();
}

void arrow_memory_pool::Free(uint8_t* buffer, int64_t size, int64_t alignment) {
  if (buffer == zero_size_area || size == 0) {
    return;
  }
  int64_t const allocated = take_allocated_size(buffer, size);
  resource_.deallocate(buffer, static_cast<std::size_t>(allocated), alignment_of(alignment));
  bytes_allocated_.fetch_sub(allocated);
}

int64_t arrow_memory_pool::allocated_size(uint8_t* block, int64_t size) {
  if (kept_count_.load() == 0) {
    return size;
  }
  std::scoped_lock const lock(kept_mutex_);
  auto const found = kept_.find(block);
  return found == kept_.end() ? size : found->second;
}

int64_t arrow_memory_pool::take_allocated_size(uint8_t* block, int64_t size) noexcept {
  if (kept_count_.load() == 0) {
    return size;
  }
  std::scoped_lock const lock(kept_mutex_);  // (std::mutex::lock throws only on misuse)
  auto const found = kept_.find(block);
  if (found == kept_.end()) {
    return size;
  }
  int64_t const allocated = found->second;
  kept_.erase(found);
  kept_count_.fetch_sub(1);
  return allocated;
}

}  // namespace spillway::detail
