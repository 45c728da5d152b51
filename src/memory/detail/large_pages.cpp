#include "large_pages.hpp"

#include <cstdint>
#include <new>
#include <sys/mman.h>
#include <utility>
#include <vector>

namespace spillway::detail {
namespace {

[[nodiscard]] bool is_large(std::size_t bytes, std::size_t alignment) noexcept {
  return LARGE_BLOCKS_MAPPED && bytes >= LARGE_BLOCK_MIN_BYTES && alignment <= LARGE_PAGE_BYTES;
}

[[nodiscard]] std::size_t mapped_bytes(std::size_t bytes) noexcept {
  return (bytes + LARGE_PAGE_BYTES - 1) / LARGE_PAGE_BYTES * LARGE_PAGE_BYTES;
}

/// A fresh mapping of `size` (a multiple of LARGE_PAGE_BYTES) bytes, aligned to LARGE_PAGE_BYTES.
void* map_block(std::size_t size) {
  // Map one huge page more than needed, then unmap the unaligned head and the tail.
  void* const mapping = ::mmap(
    nullptr, size + LARGE_PAGE_BYTES, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (mapping == MAP_FAILED) {
    throw std::bad_alloc{};
  }
  auto const start   = reinterpret_cast<std::uintptr_t>(mapping);
  auto const aligned = (start + LARGE_PAGE_BYTES - 1) / LARGE_PAGE_BYTES * LARGE_PAGE_BYTES;
  if (aligned > start) {
    ::munmap(mapping, aligned - start);
  }
  std::size_t const tail = start + LARGE_PAGE_BYTES - aligned;
  if (tail > 0) {
    ::munmap(reinterpret_cast<void*>(aligned + size), tail);
  }
  // No MADV_HUGEPAGE: on virtual machines, fresh huge pages are often memory the host must
  // back first, which made an in-memory sort take 0.36 s or 0.75 s at random (0.49 s without).
  return reinterpret_cast<void*>(aligned);
}

void unmap_block(void* block, std::size_t size) noexcept { ::munmap(block, size); }

}  // namespace

void* allocate_host_block(std::size_t bytes, std::size_t alignment) {
  if (!is_large(bytes, alignment)) {
    return ::operator new (bytes, std::align_val_t{alignment});
  }
  return map_block(mapped_bytes(bytes));
}

void deallocate_host_block(void* pointer, std::size_t bytes, std::size_t alignment) noexcept {
  if (!is_large(bytes, alignment)) {
    ::operator delete (pointer, bytes, std::align_val_t{alignment});
    return;
  }
  unmap_block(pointer, mapped_bytes(bytes));
}

block_cache::~block_cache() {
  for (auto const& [size, block] : blocks_) {
    unmap_block(block, size);
  }
}

void* block_cache::allocate(std::size_t bytes, std::size_t alignment, std::size_t live_bytes) {
  if (!is_large(bytes, alignment)) {
    return allocate_host_block(bytes, alignment);
  }
  std::size_t const size = mapped_bytes(bytes);
  std::vector<std::pair<std::size_t, void*>> evicted;
  {
    std::scoped_lock const lock(mutex_);
    if (auto found = blocks_.lower_bound(size); found != blocks_.end()) {
      auto [cached_size, block] = *found;
      blocks_.erase(found);
      cached_ -= cached_size;
      if (cached_size > size) {
        evicted.emplace_back(cached_size - size, static_cast<std::byte*>(block) + size);
      }
      for (auto const& [extra, tail] : evicted) {
        unmap_block(tail, extra);
      }
      return block;
    }
    // Nothing cached is large enough: make room for a fresh mapping, largest blocks first.
    while (!blocks_.empty() && live_bytes + cached_ > capacity_) {
      auto const largest = std::prev(blocks_.end());
      evicted.emplace_back(largest->first, largest->second);
      cached_ -= largest->first;
      blocks_.erase(largest);
    }
  }
  for (auto const& [extra, block] : evicted) {
    unmap_block(block, extra);
  }
  return map_block(size);
}

void block_cache::deallocate(void* pointer,
                             std::size_t bytes,
                             std::size_t alignment,
                             std::size_t live_bytes) noexcept {
  if (!is_large(bytes, alignment)) {
    deallocate_host_block(pointer, bytes, alignment);
    return;
  }
  std::size_t const size = mapped_bytes(bytes);
  {
    std::scoped_lock const lock(mutex_);
    if (live_bytes <= capacity_ && cached_ + size <= capacity_ - live_bytes) {
      blocks_.emplace(size, pointer);
      cached_ += size;
      return;
    }
  }
  unmap_block(pointer, size);
}

std::size_t block_cache::cached_bytes() const {
  std::scoped_lock const lock(mutex_);
  return cached_;
}

}  // namespace spillway::detail
