#include "small_blocks.hpp"

#include <algorithm>
#include <bit>
#include <cstring>
#include <iterator>
#include <new>

namespace spillway::detail {
namespace {

constexpr std::size_t MIN_SLAB_BYTES = std::size_t{256} << 10;
constexpr std::size_t MIN_SLAB_SLOTS = 8;

}  // namespace

small_block_pool::~small_block_pool() {
  for (auto const& [base, s] : slabs_) {
    unmap_(s.base, slab_bytes(s.slot));
  }
}

std::size_t small_block_pool::slot_bytes(std::size_t bytes) noexcept {
  bytes = std::max(bytes, SMALL_SLOT_ALIGNMENT);
  // Four sizes per doubling: the step is a quarter of the power of two below `bytes`.
  std::size_t const below = std::bit_floor(bytes - 1);
  std::size_t const step  = std::max(SMALL_SLOT_ALIGNMENT, below / 4);
  return (bytes + step - 1) / step * step;
}

std::size_t small_block_pool::slab_bytes(std::size_t slot) noexcept {
  return std::max(MIN_SLAB_BYTES, slot * MIN_SLAB_SLOTS);
}

void* small_block_pool::allocate(std::size_t bytes) {
  std::size_t const slot = slot_bytes(bytes);
  std::scoped_lock const lock(mutex_);
  auto& open = open_[slot];
  if (open.empty()) {
    std::size_t const size = slab_bytes(slot);
    auto* const base       = static_cast<std::byte*>(map_(size));
    slab fresh_slab;
    fresh_slab.base  = base;
    fresh_slab.slot  = static_cast<std::uint32_t>(slot);
    fresh_slab.slots = static_cast<std::uint32_t>(size / slot);
    fresh_slab.free  = fresh_slab.slots;
    try {
      open.reserve(open.size() + 1);
      slabs_.emplace(reinterpret_cast<std::uintptr_t>(base), fresh_slab);
    } catch (...) {
      unmap_(base, size);
      throw;
    }
    held_ += size;
    open.push_back(reinterpret_cast<std::uintptr_t>(base));
    slabs_.at(open.back()).listed = true;
  }
  auto& s = slabs_.at(open.back());
  std::byte* block;
  if (s.free < s.slots) {  // a freed slot: its first word names the next
    block = s.base + std::size_t{s.free} * s.slot;
    std::memcpy(&s.free, block, sizeof(s.free));
  } else {  // a slot never handed out (its pages may not be touched yet)
    block = s.base + std::size_t{s.fresh} * s.slot;
    ++s.fresh;
  }
  ++s.used;
  if (s.used == s.slots) {
    s.listed = false;
    open.pop_back();
  }
  return block;
}

void small_block_pool::deallocate(void* pointer, std::size_t bytes) noexcept {
  auto const address = reinterpret_cast<std::uintptr_t>(pointer);
  void* slab_base    = nullptr;
  std::size_t size   = 0;
  {
    std::scoped_lock const lock(mutex_);
    auto found = slabs_.upper_bound(address);
    // (Always found: `pointer` came from `allocate`.)
    found            = std::prev(found);
    auto& s          = found->second;
    auto const index = static_cast<std::uint32_t>((address - found->first) / s.slot);
    --s.used;
    auto& open = open_[s.slot];
    // All free: the slab goes back, unless it is its size's only slab with room (a size whose
    // blocks come and go one at a time would take and give back a slab each time).
    bool const only_open = s.listed ? open.size() == 1 : open.empty();
    if (s.used == 0 && !only_open) {
      if (s.listed) {
        open.erase(std::find(open.begin(), open.end(), found->first));
      }
      slab_base = s.base;
      size      = slab_bytes(s.slot);
      held_ -= size;
      slabs_.erase(found);
    } else {
      // (A slab kept empty keeps its free list: its slots are handed out again from it.)
      std::memcpy(pointer, &s.free, sizeof(s.free));
      s.free = index;
      if (!s.listed) {
        try {
          open.push_back(found->first);
          s.listed = true;
        } catch (...) {  // no memory for the list: the slot waits for the slab's next free
        }
      }
    }
  }
  static_cast<void>(bytes);
  if (slab_base != nullptr) {
    unmap_(slab_base, size);
  }
}

std::size_t small_block_pool::slab_bytes_held() const {
  std::scoped_lock const lock(mutex_);
  return held_;
}

}  // namespace spillway::detail
