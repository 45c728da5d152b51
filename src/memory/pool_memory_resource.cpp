#include <spillway/core/error.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/pool_memory_resource.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <bit>
#include <cstddef>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// Every block is a multiple of this and aligned to it.
constexpr std::size_t GRANULE = DEFAULT_ALIGNMENT;
/// Alignment of the chunks taken from upstream.
constexpr std::size_t CHUNK_ALIGNMENT = 256;
/// The smallest growth step, so that a pool built empty does not grow one small block at a time.
constexpr std::size_t MINIMUM_GROWTH = 1_MiB;
/// Small classes: 64 B, 128 B, ..., SMALL_BLOCK_LIMIT.
constexpr std::size_t SMALL_CLASS_COUNT =
  static_cast<std::size_t>(std::countr_zero(pool_memory_resource::SMALL_BLOCK_LIMIT) -
                           std::countr_zero(GRANULE)) +
  1;
/// Thread shards of the small-block cache; threads map to shards round-robin.
constexpr std::size_t SHARD_COUNT = 16;
/// A cache refill takes about this many bytes of one class from the arena at once.
constexpr std::size_t REFILL_BYTES = 16_KiB;
/// Past this many cached bytes of one class in one shard, half of them go back to the arena.
constexpr std::size_t CACHE_LIMIT_BYTES = 1_MiB;

std::atomic<std::size_t> next_thread_shard{0};

std::size_t thread_shard() noexcept {
  thread_local std::size_t const shard =
    next_thread_shard.fetch_add(1, std::memory_order_relaxed) % SHARD_COUNT;
  return shard;
}

std::size_t class_of(std::size_t rounded) noexcept {
  return static_cast<std::size_t>(std::countr_zero(std::bit_ceil(rounded)) -
                                  std::countr_zero(GRANULE));
}

constexpr std::size_t class_size(std::size_t size_class) noexcept { return GRANULE << size_class; }

struct free_node {
  free_node* next;
};

}  // namespace

class pool_impl {
 public:
  pool_impl(resource_ref upstream, std::size_t initial_size, std::optional<std::size_t> maximum)
    : upstream_(upstream), maximum_(maximum.value_or(std::numeric_limits<std::size_t>::max())) {
    SPILLWAY_EXPECTS_LE(
      initial_size, maximum_, "pool initial size exceeds its maximum size", invalid_argument);
    if (initial_size > 0) {
      scoped_lock lock{arena_mutex_};
      // Rounding up to whole granules must not take more than the maximum from upstream.
      add_chunk(std::min(align_up(initial_size, GRANULE), maximum_));
    }
  }

  ~pool_impl() {
    for (auto const& [pointer, bytes] : chunks_) {
      upstream_.deallocate(pointer, bytes, CHUNK_ALIGNMENT);
    }
  }

  pool_impl(pool_impl const&)            = delete;
  pool_impl& operator=(pool_impl const&) = delete;
  pool_impl(pool_impl&&)                 = delete;
  pool_impl& operator=(pool_impl&&)      = delete;

  void* allocate(std::size_t bytes, std::size_t alignment) {
    SPILLWAY_EXPECTS(is_power_of_two(alignment),
                     "alignment must be a power of two: " + std::to_string(alignment),
                     invalid_argument);
    if (bytes == 0) {
      return nullptr;
    }
    if (alignment > GRANULE) {
      return allocate_over_aligned(bytes, alignment);
    }
    std::size_t const rounded = align_up(bytes, GRANULE);
    if (rounded <= pool_memory_resource::SMALL_BLOCK_LIMIT) {
      return allocate_small(class_of(rounded));
    }
    scoped_lock lock{arena_mutex_};
    std::byte* block = arena_allocate_locked(rounded, lock);
    large_allocated_ += rounded;
    return block;
  }

  void deallocate(void* pointer, std::size_t bytes, std::size_t alignment) noexcept {
    if (pointer == nullptr || bytes == 0) {
      return;
    }
    if (alignment > GRANULE) {
      deallocate_over_aligned(pointer);
      return;
    }
    std::size_t const rounded = align_up(bytes, GRANULE);
    if (rounded <= pool_memory_resource::SMALL_BLOCK_LIMIT) {
      deallocate_small(static_cast<std::byte*>(pointer), class_of(rounded));
    } else {
      scoped_lock lock{arena_mutex_};
      large_allocated_ -= rounded;
      insert_free(static_cast<std::byte*>(pointer), rounded);
    }
  }

  std::size_t pool_size() {
    scoped_lock lock{arena_mutex_};
    return pool_size_;
  }
  std::size_t allocated_bytes() {
    std::int64_t small = 0;
    for (auto& shard : shards_) {
      scoped_spin_lock guard{shard.lock};
      small += shard.allocated_bytes;
    }
    scoped_lock lock{arena_mutex_};
    return static_cast<std::size_t>(small) + large_allocated_;
  }
  std::size_t largest_free_block() {
    scoped_lock lock{arena_mutex_};
    return free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
  }
  std::size_t free_block_count() {
    scoped_lock lock{arena_mutex_};
    return free_by_address_.size();
  }

  void flush_caches() {
    for (auto& shard : shards_) {
      std::array<free_node*, SMALL_CLASS_COUNT> lists{};
      {
        scoped_spin_lock guard{shard.lock};
        lists = shard.heads;
        shard.heads.fill(nullptr);
        shard.cached_bytes.fill(0);
      }
      scoped_lock lock{arena_mutex_};
      for (std::size_t size_class = 0; size_class < SMALL_CLASS_COUNT; ++size_class) {
        return_list(lists[size_class], class_size(size_class));
      }
    }
  }

 private:
  struct alignas(64) shard_state {
    spin_mutex lock;
    std::array<free_node*, SMALL_CLASS_COUNT> heads SPILLWAY_GUARDED_BY(lock){};
    std::array<std::size_t, SMALL_CLASS_COUNT> cached_bytes SPILLWAY_GUARDED_BY(lock){};
    /// Bytes of small blocks handed out minus freed through this shard (may go negative when
    /// another thread frees; only the sum over shards is meaningful).
    std::int64_t allocated_bytes SPILLWAY_GUARDED_BY(lock) = 0;
  };

  void* allocate_small(std::size_t size_class) {
    auto& shard = shards_[thread_shard()];
    {
      scoped_spin_lock guard{shard.lock};
      if (free_node* node = shard.heads[size_class]; node != nullptr) {
        shard.heads[size_class] = node->next;
        shard.cached_bytes[size_class] -= class_size(size_class);
        shard.allocated_bytes += static_cast<std::int64_t>(class_size(size_class));
        return node;
      }
    }
    std::size_t const size = class_size(size_class);
    std::size_t count      = std::max<std::size_t>(1, REFILL_BYTES / size);
    std::byte* run         = nullptr;
    try {
      run = arena_allocate(count * size);
    } catch (out_of_memory const&) {
      if (count == 1) {
        throw;
      }
      count = 1;
      run   = arena_allocate(size);
    }
    {
      scoped_spin_lock guard{shard.lock};
      shard.allocated_bytes += static_cast<std::int64_t>(size);
      for (std::size_t index = count - 1; index >= 1; --index) {
        auto* node              = reinterpret_cast<free_node*>(run + index * size);
        node->next              = shard.heads[size_class];
        shard.heads[size_class] = node;
      }
      shard.cached_bytes[size_class] += (count - 1) * size;
    }
    return run;
  }

  void deallocate_small(std::byte* pointer, std::size_t size_class) noexcept {
    auto& shard            = shards_[thread_shard()];
    std::size_t const size = class_size(size_class);
    free_node* to_arena    = nullptr;
    {
      scoped_spin_lock guard{shard.lock};
      shard.allocated_bytes -= static_cast<std::int64_t>(size);
      auto* node              = reinterpret_cast<free_node*>(pointer);
      node->next              = shard.heads[size_class];
      shard.heads[size_class] = node;
      shard.cached_bytes[size_class] += size;
      if (shard.cached_bytes[size_class] > CACHE_LIMIT_BYTES) {
        // Keep half, give the rest back so other threads and large requests can use it.
        std::size_t keep = shard.cached_bytes[size_class] / size / 2;
        free_node* last  = shard.heads[size_class];
        for (std::size_t index = 1; index < keep; ++index) {
          last = last->next;
        }
        to_arena                       = last->next;
        last->next                     = nullptr;
        shard.cached_bytes[size_class] = keep * size;
      }
    }
    if (to_arena != nullptr) {
      scoped_lock lock{arena_mutex_};
      return_list(to_arena, size);
    }
  }

  void return_list(free_node* node, std::size_t size) SPILLWAY_REQUIRES(arena_mutex_) {
    while (node != nullptr) {
      free_node* next = node->next;
      insert_free(reinterpret_cast<std::byte*>(node), size);
      node = next;
    }
  }

  std::byte* arena_allocate(std::size_t size) {
    scoped_lock lock{arena_mutex_};
    return arena_allocate_locked(size, lock);
  }

  /// Serves `size` bytes from the arena; may drop and retake `lock` to flush the caches.
  std::byte* arena_allocate_locked(std::size_t size, scoped_lock& lock)
    SPILLWAY_REQUIRES(arena_mutex_) {
    if (std::byte* block = take_best_fit(size); block != nullptr) {
      return block;
    }
    if (try_grow(size)) {
      return take_best_fit(size);
    }
    lock.unlock();
    flush_caches();
    lock.lock();
    if (std::byte* block = take_best_fit(size); block != nullptr) {
      return block;
    }
    if (try_grow(size)) {
      return take_best_fit(size);
    }
    std::size_t const largest = free_by_size_.empty() ? 0 : free_by_size_.rbegin()->first;
    throw out_of_memory(
      "pool out of memory: requested " + std::to_string(size) + " bytes, largest free block " +
        std::to_string(largest) + " bytes, pool size " + std::to_string(pool_size_) +
        " bytes, maximum size " +
        (maximum_ == std::numeric_limits<std::size_t>::max()
           ? std::string{"unbounded"}
           : std::to_string(maximum_) + " bytes") +
        (last_upstream_error_.empty() ? std::string{} : "; upstream: " + last_upstream_error_),
      size,
      largest,
      maximum_ == std::numeric_limits<std::size_t>::max() ? 0 : maximum_);
  }

  /// Takes a chunk from upstream big enough for `size`. False when the maximum or upstream
  /// forbids it.
  bool try_grow(std::size_t size) SPILLWAY_REQUIRES(arena_mutex_) {
    if (pool_size_ >= maximum_ || size > maximum_ - pool_size_) {
      return false;
    }
    std::size_t const room = maximum_ - pool_size_;
    std::size_t wanted =
      std::min(room, align_up(std::max({size, pool_size_, MINIMUM_GROWTH}), GRANULE));
    wanted = std::max(wanted, size);
    try {
      add_chunk(wanted);
      return true;
    } catch (out_of_memory const& error) {
      last_upstream_error_ = error.what();
      if (wanted == size) {
        return false;
      }
    }
    try {
      add_chunk(size);
      return true;
    } catch (out_of_memory const& error) {
      last_upstream_error_ = error.what();
      return false;
    }
  }

  void add_chunk(std::size_t size) SPILLWAY_REQUIRES(arena_mutex_) {
    auto* chunk = static_cast<std::byte*>(upstream_.allocate(size, CHUNK_ALIGNMENT));
    chunks_.emplace_back(chunk, size);
    chunk_starts_.insert(chunk);
    pool_size_ += size;
    insert_free(chunk, size);
  }

  std::byte* take_best_fit(std::size_t size) SPILLWAY_REQUIRES(arena_mutex_) {
    auto const found = free_by_size_.lower_bound({size, nullptr});
    if (found == free_by_size_.end()) {
      return nullptr;
    }
    auto const [block_bytes, block] = *found;
    free_by_size_.erase(found);
    free_by_address_.erase(block);
    if (block_bytes > size) {
      free_by_address_.emplace(block + size, block_bytes - size);
      free_by_size_.emplace(block_bytes - size, block + size);
    }
    return block;
  }

  /// Adds a free block, merging it with free neighbours of the same upstream chunk.
  void insert_free(std::byte* block, std::size_t size) SPILLWAY_REQUIRES(arena_mutex_) {
    auto next = free_by_address_.lower_bound(block);
    if (next != free_by_address_.end() && next->first == block + size &&
        !chunk_starts_.contains(next->first)) {
      size += next->second;
      free_by_size_.erase({next->second, next->first});
      next = free_by_address_.erase(next);
    }
    if (next != free_by_address_.begin() && !chunk_starts_.contains(block)) {
      auto previous = std::prev(next);
      if (previous->first + previous->second == block) {
        free_by_size_.erase({previous->second, previous->first});
        block = previous->first;
        size += previous->second;
        free_by_address_.erase(previous);
      }
    }
    free_by_address_.emplace(block, size);
    free_by_size_.emplace(size, block);
  }

  void* allocate_over_aligned(std::size_t bytes, std::size_t alignment) {
    std::size_t const size = align_up(bytes, GRANULE) + alignment;
    std::byte* raw         = arena_allocate(size);
    auto* aligned =
      reinterpret_cast<std::byte*>(align_up(reinterpret_cast<std::uintptr_t>(raw), alignment));
    try {
      scoped_lock lock{over_aligned_mutex_};
      over_aligned_.emplace(aligned, std::make_pair(raw, size));
    } catch (...) {
      scoped_lock lock{arena_mutex_};
      insert_free(raw, size);
      throw;
    }
    {
      scoped_lock lock{arena_mutex_};
      large_allocated_ += size;
    }
    return aligned;
  }

  void deallocate_over_aligned(void* pointer) noexcept {
    std::pair<std::byte*, std::size_t> raw{nullptr, 0};
    {
      scoped_lock lock{over_aligned_mutex_};
      auto const found = over_aligned_.find(pointer);
      if (found == over_aligned_.end()) {
        return;
      }
      raw = found->second;
      over_aligned_.erase(found);
    }
    scoped_lock lock{arena_mutex_};
    large_allocated_ -= raw.second;
    insert_free(raw.first, raw.second);
  }

  resource_ref upstream_;
  std::size_t const maximum_;
  std::array<shard_state, SHARD_COUNT> shards_{};

  mutex arena_mutex_;
  std::map<std::byte*, std::size_t> free_by_address_ SPILLWAY_GUARDED_BY(arena_mutex_);
  std::set<std::pair<std::size_t, std::byte*>> free_by_size_ SPILLWAY_GUARDED_BY(arena_mutex_);
  std::set<std::byte*> chunk_starts_ SPILLWAY_GUARDED_BY(arena_mutex_);
  std::vector<std::pair<std::byte*, std::size_t>> chunks_ SPILLWAY_GUARDED_BY(arena_mutex_);
  std::size_t pool_size_ SPILLWAY_GUARDED_BY(arena_mutex_)       = 0;
  std::size_t large_allocated_ SPILLWAY_GUARDED_BY(arena_mutex_) = 0;
  std::string last_upstream_error_ SPILLWAY_GUARDED_BY(arena_mutex_);

  mutex over_aligned_mutex_;
  std::unordered_map<void*, std::pair<std::byte*, std::size_t>> over_aligned_
    SPILLWAY_GUARDED_BY(over_aligned_mutex_);
};

}  // namespace detail

pool_memory_resource::pool_memory_resource(resource_ref upstream,
                                           std::size_t initial_size,
                                           std::optional<std::size_t> maximum_size)
  : upstream_(upstream),
    impl_(std::make_unique<detail::pool_impl>(upstream, initial_size, maximum_size)) {}

pool_memory_resource::~pool_memory_resource() = default;

std::size_t pool_memory_resource::pool_size() const { return impl_->pool_size(); }
std::size_t pool_memory_resource::allocated_bytes() const { return impl_->allocated_bytes(); }
std::size_t pool_memory_resource::largest_free_block() const { return impl_->largest_free_block(); }
std::size_t pool_memory_resource::free_block_count() const { return impl_->free_block_count(); }
void pool_memory_resource::flush_caches() { impl_->flush_caches(); }

void* pool_memory_resource::do_allocate(std::size_t bytes, std::size_t alignment, stream_view) {
  return impl_->allocate(bytes, alignment);
}

void pool_memory_resource::do_deallocate(void* pointer,
                                         std::size_t bytes,
                                         std::size_t alignment,
                                         stream_view) noexcept {
  impl_->deallocate(pointer, bytes, alignment);
}

}  // namespace spillway
