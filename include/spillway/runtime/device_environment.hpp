/**
 * @file device_environment.hpp
 * @brief The wiring every command that computes on the device repeats, done once: an emulated
 * device of a fixed capacity whose allocation failures run the OOM protocol (spill, retry, roll
 * back, split), a lease arbiter for that capacity, and a spill store whose host tier is counted
 * against a budget; plus `device_task`, one task registered with all of them.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/retry_resource_adaptor.hpp>
#include <spillway/spill/codec.hpp>
#include <spillway/spill/spill_store.hpp>

#include <cstddef>
#include <string>

namespace spillway {

/** @brief What a `device_environment` is made of. */
struct device_environment_options {
  std::size_t device_memory = 512_MiB;  ///< capacity of the emulated device
  std::size_t host_memory   = 2_GiB;    ///< the spill store's host budget (at least 64 KiB)
  std::string spill_root;               ///< where spill files go; empty: $TMPDIR or /tmp
  codec disk_codec = codec::LZ4;        ///< how spilled blocks are stored on disk
  event_sink* events =
    nullptr;  ///< where the protocol, leases and spills are recorded; may be null
};

/**
 * @brief An emulated device, its OOM protocol and lease arbiter, and a spill store over it.
 *
 * `device()` is the resource to compute on: a failed allocation first asks the store to spill
 * device buffers, then runs the protocol of `coordinator()` for the allocating task. The store
 * keeps spilled buffers on `host_tier()` within `host_memory`, then on disk. `host()` is a plain
 * host resource for what the caller keeps outside the store (keys, I/O scratch).
 * @note Not copyable or movable: the parts refer to each other. Every `device_task` and every
 * buffer of `device()` must go before the environment does.
 */
class device_environment {
 public:
  /** @throws logic_error when `host_memory` is below the spill store's minimum */
  explicit device_environment(device_environment_options const& options);
  ~device_environment();
  device_environment(device_environment const&)            = delete;
  device_environment& operator=(device_environment const&) = delete;
  device_environment(device_environment&&)                 = delete;
  device_environment& operator=(device_environment&&)      = delete;

  /** @return the device resource to allocate from (spills and runs the OOM protocol on failure) */
  [[nodiscard]] resource_ref device() noexcept { return device_with_spill_; }
  /** @return the raw emulated device, for its used and peak bytes */
  [[nodiscard]] emulated_device_memory_resource const& raw_device() const noexcept {
    return device_;
  }
  /** @return a plain host resource, not counted against the host budget */
  [[nodiscard]] resource_ref host() noexcept { return host_; }
  /** @return the host resource of the spill store's tier, counted (peak bytes) */
  [[nodiscard]] statistics_resource_adaptor const& host_tier() const noexcept { return host_tier_; }
  [[nodiscard]] spill_store& store() noexcept { return store_; }
  [[nodiscard]] oom_coordinator& coordinator() noexcept { return coordinator_; }
  [[nodiscard]] lease_arbiter& arbiter() noexcept { return arbiter_; }
  /** @return the device capacity in bytes */
  [[nodiscard]] std::size_t device_memory() const noexcept { return device_memory_; }
  /** @return the spill store's host budget in bytes */
  [[nodiscard]] std::size_t host_memory() const noexcept { return host_memory_; }

 private:
  std::size_t device_memory_;
  std::size_t host_memory_;
  host_memory_resource host_;
  statistics_resource_adaptor host_tier_{host_};
  emulated_device_memory_resource device_;
  oom_coordinator coordinator_;
  retry_resource_adaptor device_with_spill_;
  lease_arbiter arbiter_;
  spill_store store_;
};

/**
 * @brief One task of a `device_environment`: it leases from the environment's arbiter, takes
 * part in its OOM protocol, and the arbiter may spill its unpinned buffers from the store.
 *
 * Bind it to the computing thread (`task_context::thread_binding`) for the protocol to apply to
 * that thread's allocations.
 */
class device_task {
 public:
  /** @param environment must outlive the task */
  device_task(device_environment& environment, task_id id, int priority = 0);
  ~device_task()                             = default;
  device_task(device_task const&)            = delete;
  device_task& operator=(device_task const&) = delete;
  device_task(device_task&&)                 = delete;
  device_task& operator=(device_task&&)      = delete;

  [[nodiscard]] task_context& context() noexcept { return task_; }

 private:
  task_context task_;
  oom_coordinator::registration registration_;
};

}  // namespace spillway
