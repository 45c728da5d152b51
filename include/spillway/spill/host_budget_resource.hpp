/**
 * @file host_budget_resource.hpp
 * @brief Host memory counted in a spill store's host budget: for what callers keep beside the
 * store (I/O scratch), so that one budget covers both.
 */
#pragma once

#include <spillway/memory/resource_ref.hpp>

#include <cstddef>

namespace spillway {

class spill_store;

/**
 * @brief Allocates from `upstream`, each allocation counted in `store`'s host budget first
 * (`spill_store::reserve_caller_host`) and given back after it is freed.
 *
 * The store makes room by moving host entries to disk; an allocation that no eviction can make
 * room for is still served, past the budget, and counted in the store's statistics.
 * @note Thread-safe. The store must outlive the resource and what it allocated.
 */
class host_budget_resource final : public memory_resource {
 public:
  /** @param store whose budget counts the bytes @param upstream the host memory itself */
  host_budget_resource(spill_store& store, resource_ref upstream) noexcept
    : store_(store), upstream_(upstream) {}

  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  spill_store& store_;
  resource_ref upstream_;
};

}  // namespace spillway
