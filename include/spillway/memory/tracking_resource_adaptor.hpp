/**
 * @file tracking_resource_adaptor.hpp
 * @brief Remembers every outstanding allocation, with an optional tag, and reports leaks.
 */
#pragma once

#include <spillway/core/mutex.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway {

/** @brief One outstanding allocation seen by a tracking adaptor. */
struct tracked_allocation {
  void* pointer          = nullptr;
  std::size_t bytes      = 0;
  std::size_t alignment  = 0;
  std::uint64_t sequence = 0;  ///< the order in which allocations were made, from 0
  std::string tag;             ///< the innermost `scoped_allocation_tag` of the allocating thread
};

/**
 * @brief Tags the allocations this thread makes through any tracking adaptor while it lives.
 * @note Nests; the innermost tag wins. Thread-local: other threads are unaffected.
 */
class scoped_allocation_tag {
 public:
  explicit scoped_allocation_tag(std::string tag);
  ~scoped_allocation_tag();
  scoped_allocation_tag(scoped_allocation_tag const&)            = delete;
  scoped_allocation_tag& operator=(scoped_allocation_tag const&) = delete;
  scoped_allocation_tag(scoped_allocation_tag&&)                 = delete;
  scoped_allocation_tag& operator=(scoped_allocation_tag&&)      = delete;

  /** @return the calling thread's innermost tag, or "" */
  static std::string const& current();

 private:
  std::string tag_;
  std::string const* previous_;
};

/**
 * @brief Records each outstanding allocation; at destruction, logs a leak report (WARN) listing
 * what was never freed, largest first.
 * @note Thread-safe (one lock around the table). Freeing a pointer it never handed out is
 * counted in `unknown_frees()` and forwarded upstream unchanged.
 */
class tracking_resource_adaptor final : public memory_resource {
 public:
  /** @param name what the leak report calls this resource */
  explicit tracking_resource_adaptor(resource_ref upstream, std::string name = "tracking");
  ~tracking_resource_adaptor() override;

  /** @return the outstanding allocations in allocation order */
  [[nodiscard]] std::vector<tracked_allocation> outstanding() const;
  [[nodiscard]] std::size_t outstanding_bytes() const;
  /** @return "" when nothing is outstanding, else a multi-line report, largest first */
  [[nodiscard]] std::string leak_report() const;
  /** @return frees of pointers this adaptor never handed out */
  [[nodiscard]] std::size_t unknown_frees() const;
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  resource_ref upstream_;
  std::string const name_;
  mutable mutex mutex_;
  std::unordered_map<void*, tracked_allocation> allocations_ SPILLWAY_GUARDED_BY(mutex_);
  std::uint64_t next_sequence_ SPILLWAY_GUARDED_BY(mutex_)   = 0;
  std::size_t outstanding_bytes_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::size_t unknown_frees_ SPILLWAY_GUARDED_BY(mutex_)     = 0;
};

}  // namespace spillway
