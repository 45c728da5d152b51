#include "large_pages.hpp"

#include <algorithm>
#include <cstddef>
#include <iterator>
#include <new>
#include <sys/mman.h>

namespace spillway::detail {
namespace {

/// A cached block serves a request of at least 1 / (1 + 1 / MAX_CUT_FRACTION) of its size
/// before a smaller block is grown for it.
constexpr std::size_t MAX_CUT_FRACTION = 4;
/// Blocks under this size (chunks of a few thousand rows, one column each) may hold at most
/// 1/SMALL_BLOCKS_SHARE of the cache: evicting the largest blocks first, many of them would
/// push out the batches and merge outputs that a sort reuses.
constexpr std::size_t SMALL_BLOCK_BYTES  = std::size_t{256} << 10;
constexpr std::size_t SMALL_BLOCKS_SHARE = 8;

#if defined(__SANITIZE_THREAD__)
constexpr bool REMAP_BLOCKS = false;
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
constexpr bool REMAP_BLOCKS = false;
#else
constexpr bool REMAP_BLOCKS = true;
#endif
#else
constexpr bool REMAP_BLOCKS = true;
#endif

[[nodiscard]] bool is_large(std::size_t bytes, std::size_t alignment) noexcept {
  return LARGE_BLOCKS_MAPPED && bytes >= LARGE_BLOCK_MIN_BYTES &&
         alignment <= LARGE_BLOCK_ALIGNMENT;
}

[[nodiscard]] bool is_pooled(std::size_t bytes, std::size_t alignment) noexcept {
  return LARGE_BLOCKS_MAPPED && bytes < LARGE_BLOCK_MIN_BYTES && alignment <= SMALL_SLOT_ALIGNMENT;
}

[[nodiscard]] std::size_t mapped_bytes(std::size_t bytes) noexcept {
  return (bytes + LARGE_BLOCK_GRANULE - 1) / LARGE_BLOCK_GRANULE * LARGE_BLOCK_GRANULE;
}

void* map_block(std::size_t size) {
  void* const block =
    ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (block == MAP_FAILED) {
    throw std::bad_alloc{};
  }
  // No MADV_HUGEPAGE: on virtual machines, fresh huge pages are often memory the host must
  // back first, which made an in-memory sort take 0.36 s or 0.75 s at random (0.49 s without).
  return block;
}

void unmap_block(void* block, std::size_t size) noexcept { ::munmap(block, size); }

/// A block of `size` bytes from what the cache found (`block`, of `found_size` bytes; null: none).
void* take_block(void* block, std::size_t found_size, std::size_t size) {
  if (block == nullptr) {
    return map_block(size);
  }
  if (found_size < size) {
    // Grown in place or moved: the block's pages stay mapped, only the growth is fresh. A run
    // of requests in sizes the cache does not hold so clears no more pages than it must.
    // ThreadSanitizer does not see mremap: the addresses a moved block leaves, and those it
    // grows into, would keep what other threads did there under an earlier mapping.
    void* const grown =
      REMAP_BLOCKS ? ::mremap(block, found_size, size, MREMAP_MAYMOVE) : MAP_FAILED;
    if (grown != MAP_FAILED) {
      return grown;
    }
    unmap_block(block, found_size);
    return map_block(size);
  }
  if (found_size > size) {  // a close fit: its short tail goes back to the kernel
    unmap_block(static_cast<std::byte*>(block) + size, found_size - size);
  }
  return block;
}

}  // namespace

block_cache::block_cache(std::size_t limit)
  : limit_(limit),
    small_(std::make_unique<small_block_pool>(
      [this](std::size_t bytes) { return allocate_large(bytes); },
      [this](void* block, std::size_t bytes) { deallocate_large(block, bytes); })) {}

block_cache::~block_cache() {
  small_.reset();  // its slabs come back into blocks_
  for (auto const& [size, block] : blocks_) {
    unmap_block(block, size);
  }
}

void* block_cache::allocate(std::size_t bytes, std::size_t alignment) {
  if (is_large(bytes, alignment)) {
    return allocate_large(bytes);
  }
  if (is_pooled(bytes, alignment)) {
    return small_->allocate(bytes);
  }
  return ::operator new (bytes, std::align_val_t{alignment});
}

void* block_cache::allocate_large(std::size_t bytes) {
  std::size_t const size = mapped_bytes(bytes);
  void* block            = nullptr;
  std::size_t found_size = 0;
  {
    std::scoped_lock const lock(mutex_);
    // The smallest cached block that fits, unless it is much larger (cutting a large block down
    // for a small request would take pages that a large request reuses later); else the largest
    // smaller one, grown to the size; else, rather than fresh pages, the head of the much larger
    // block, whose tail stays cached (still mapped: a large block freed before many smaller
    // requests, such as a sort's records before its output batches, serves them).
    auto found = blocks_.lower_bound(size);
    bool const fits_close =
      found != blocks_.end() && found->first - size <= size / MAX_CUT_FRACTION;
    if (!fits_close) {
      // (A request over the limit is never cached when freed: it takes none of the blocks.)
      auto const smaller =
        found == blocks_.begin() || size > limit_ ? blocks_.end() : std::prev(found);
      if (smaller != blocks_.end()) {
        found = smaller;
      }
    }
    if (found != blocks_.end()) {
      found_size = found->first;
      block      = found->second;
      forget(found);
    }
    live_ += size;
    if (found_size > size && !fits_close) {
      keep(static_cast<std::byte*>(block) + size, found_size - size);  // split
      found_size = size;
    }
    trim();  // the block's new pages come out of the cache's room
  }
  try {
    return take_block(block, found_size, size);
  } catch (...) {  // no memory for fresh pages: the block was never handed out
    std::scoped_lock const lock(mutex_);
    live_ -= size;
    throw;
  }
}

void block_cache::deallocate(void* pointer, std::size_t bytes, std::size_t alignment) noexcept {
  if (is_large(bytes, alignment)) {
    deallocate_large(pointer, bytes);
  } else if (is_pooled(bytes, alignment)) {
    small_->deallocate(pointer, bytes);
  } else {
    ::operator delete (pointer, bytes, std::align_val_t{alignment});
  }
}

void block_cache::deallocate_large(void* pointer, std::size_t bytes) noexcept {
  std::size_t const size = mapped_bytes(bytes);
  std::scoped_lock const lock(mutex_);
  live_ -= size;
  keep(pointer, size);
}

void block_cache::forget(std::multimap<std::size_t, void*>::iterator block) noexcept {
  cached_ -= block->first;
  if (block->first < SMALL_BLOCK_BYTES) {
    cached_small_ -= block->first;
  }
  blocks_.erase(block);
}

std::size_t block_cache::room() const noexcept {
  return std::min(limit_, ceiling_ > live_ ? ceiling_ - live_ : 0);
}

void block_cache::trim() noexcept {
  std::size_t const most = room();
  while (cached_ > most) {
    auto const largest = std::prev(blocks_.end());
    unmap_block(largest->second, largest->first);
    forget(largest);
  }
}

void block_cache::keep(void* pointer, std::size_t size) noexcept {
  std::size_t const most = room();
  if (size > most) {
    unmap_block(pointer, size);
    return;
  }
  bool const small = size < SMALL_BLOCK_BYTES;
  if (small && cached_small_ + size > limit_ / SMALL_BLOCKS_SHARE) {
    // Small blocks never push large ones out: past their share they go back at once.
    unmap_block(pointer, size);
    return;
  }
  while (cached_ + size > most) {
    auto const largest = std::prev(blocks_.end());
    unmap_block(largest->second, largest->first);
    forget(largest);
  }
  try {
    blocks_.emplace(size, pointer);
    cached_ += size;
    if (small) {
      cached_small_ += size;
    }
  } catch (...) {  // no memory for the map's node: give the block back instead
    unmap_block(pointer, size);
  }
}

std::size_t block_cache::slab_bytes() const { return small_->slab_bytes_held(); }

std::size_t block_cache::limit() const {
  std::scoped_lock const lock(mutex_);
  return limit_;
}

void block_cache::raise_limit(std::size_t bytes, std::size_t cap) {
  std::scoped_lock const lock(mutex_);
  if (limit_ < cap) {
    limit_ += std::min(bytes, cap - limit_);
  }
}

void block_cache::set_mapped_ceiling(std::size_t bytes) {
  std::scoped_lock const lock(mutex_);
  ceiling_ = bytes;
  trim();
}

std::size_t block_cache::live_bytes() const {
  std::scoped_lock const lock(mutex_);
  return live_;
}

std::size_t block_cache::cached_bytes() const {
  std::scoped_lock const lock(mutex_);
  return cached_;
}

}  // namespace spillway::detail
