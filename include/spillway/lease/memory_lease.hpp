/**
 * @file memory_lease.hpp
 * @brief A budget of device bytes granted by a lease arbiter; given back when closed.
 */
#pragma once

#include <spillway/core/ids.hpp>

#include <cstddef>
#include <cstdint>

namespace spillway {

class lease_arbiter;

/**
 * @brief The right to use `bytes()` bytes of the device, held by one task.
 *
 * Only a `lease_arbiter` makes leases. Closing (or destroying) a lease returns its bytes. After
 * `lease_arbiter::return_all_leases(task)`, or once the task is unregistered, a still-living
 * lease of that task is inert: closing it returns nothing a second time, even to a later task
 * that reuses the id.
 * @note Move-only. Not thread-safe: one owner at a time. The arbiter must outlive the lease.
 */
class memory_lease {
 public:
  /** @brief An empty lease of 0 bytes. */
  memory_lease() noexcept = default;
  ~memory_lease() { close(); }
  memory_lease(memory_lease&& other) noexcept;
  memory_lease& operator=(memory_lease&& other) noexcept;
  memory_lease(memory_lease const&)            = delete;
  memory_lease& operator=(memory_lease const&) = delete;

  /** @return the bytes this lease grants (0 once closed) */
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }
  [[nodiscard]] task_id task() const noexcept { return task_; }
  /** @return false once closed or moved from */
  [[nodiscard]] bool is_open() const noexcept { return arbiter_ != nullptr; }
  /** @brief Returns the bytes to the arbiter now. Idempotent. */
  void close() noexcept;
  /**
   * @brief Returns part of the lease now and keeps the rest.
   * @throws spillway::invalid_argument when `bytes` exceeds the lease
   */
  void shrink(std::size_t bytes);

 private:
  friend class lease_arbiter;
  memory_lease(lease_arbiter* arbiter,
               task_id task,
               std::size_t bytes,
               std::uint64_t epoch,
               bool is_base) noexcept
    : arbiter_(arbiter), task_(task), bytes_(bytes), epoch_(epoch), is_base_(is_base) {}

  lease_arbiter* arbiter_ = nullptr;
  task_id task_{};
  std::size_t bytes_   = 0;
  std::uint64_t epoch_ = 0;
  bool is_base_        = false;
};

}  // namespace spillway
