/**
 * @file device_environment.hpp
 * @brief The wiring every command that computes on the device repeats, done once: a device of a
 * fixed capacity (emulated in host memory, or a CUDA GPU's stream-ordered memory) whose allocation
 * failures run the OOM protocol (spill, retry, roll back, split), a lease arbiter for that
 * capacity, and a spill store whose host tier is counted against a budget; plus `device_task`,
 * one task registered with all of them.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/stream_view.hpp>
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
#include <spillway/spill/host_budget_resource.hpp>
#include <spillway/spill/spill_store.hpp>

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

namespace spillway {

/** @brief Which device a `device_environment` computes on. */
enum class device_backend {
  EMULATED,  ///< host memory behind a hard capacity (the CPU backend; runs everywhere)
  CUDA,      ///< the current CUDA device's memory, limited to the capacity
};

/** @return "cpu" or "cuda" */
std::string_view to_string(device_backend backend) noexcept;

/**
 * @brief Reads a backend's name as the command line gives it: "cpu", "cuda", or "auto" (CUDA
 * when this build has the backend and a device is visible, else the CPU).
 * @throws spillway::invalid_argument for any other name
 * @throws spillway::not_supported for "cuda" when CUDA cannot be used here, naming why
 */
device_backend resolve_device_backend(std::string_view name);

/** @brief What a `device_environment` is made of. */
struct device_environment_options {
  device_backend backend    = device_backend::EMULATED;  ///< what the device is
  std::size_t device_memory = 512_MiB;  ///< the device's capacity (on CUDA: a limit)
  std::size_t host_memory   = 2_GiB;    ///< the spill store's host budget (at least 64 KiB)
  std::string spill_root;               ///< where spill files go; empty: $TMPDIR or /tmp
  codec disk_codec = codec::LZ4;        ///< how spilled blocks are stored on disk
  event_sink* events =
    nullptr;  ///< where the protocol, leases and spills are recorded; may be null
};

/**
 * @brief A device, its OOM protocol and lease arbiter, and a spill store over it.
 *
 * `device()` is the resource to compute on: a failed allocation first asks the store to spill
 * device buffers, then runs the protocol of `coordinator()` for the allocating task. The store
 * keeps spilled buffers on `host_tier()` within `host_memory`, then on disk. `host()` is a plain
 * host resource for what the caller keeps outside the store (keys, I/O scratch). `stream()` is
 * the stream to compute and copy on. On the emulated device, `device()`, `host()` and the host
 * tier keep their freed blocks in one cache: a block one of them frees, another takes without
 * the kernel clearing its pages (each resource still counts only its own live bytes).
 *
 * On `device_backend::CUDA` the device is `cuda_async_memory_resource` behind a limit of
 * `device_memory` bytes (which must not exceed the GPU's free memory), the host tier a pool of
 * pinned memory that grows up to `host_memory`, and the store's copies and the computing stream
 * one non-blocking stream of the environment's own.
 * @note Not copyable or movable: the parts refer to each other. Every `device_task` and every
 * buffer of `device()` must go before the environment does.
 */
class device_environment {
 public:
  /**
   * @throws invalid_argument when `host_memory` is below the spill store's minimum, or when a
   * CUDA device's capacity exceeds the GPU's free memory
   * @throws not_supported for CUDA when CUDA cannot be used here, naming why
   */
  explicit device_environment(device_environment_options const& options);
  ~device_environment();
  device_environment(device_environment const&)            = delete;
  device_environment& operator=(device_environment const&) = delete;
  device_environment(device_environment&&)                 = delete;
  device_environment& operator=(device_environment&&)      = delete;

  /** @return the device resource to allocate from (spills and runs the OOM protocol on failure) */
  [[nodiscard]] resource_ref device() noexcept { return device_with_spill_; }
  /** @return what the device is */
  [[nodiscard]] device_backend backend() const noexcept { return backend_; }
  /** @return the stream to compute and copy on (the default stream on the emulated device) */
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }
  /** @return bytes of device memory outstanding now */
  [[nodiscard]] std::size_t device_used_bytes() const noexcept;
  /** @return the most bytes of device memory ever outstanding at once */
  [[nodiscard]] std::size_t device_peak_bytes() const noexcept;
  /** @return a plain host resource, not counted against the host budget */
  [[nodiscard]] resource_ref host() noexcept { return host_; }
  /**
   * @return host memory for what the caller keeps beside the store (I/O scratch: decoded input,
   * Arrow's buffers, encoded output), counted in the host budget with the store's host tier: the
   * store moves host entries to disk to make room (`spill_store::reserve_caller_host`)
   */
  [[nodiscard]] resource_ref budgeted_host() noexcept { return budgeted_host_; }
  /** @return the host resource of the spill store's tier, counted (peak bytes) */
  [[nodiscard]] statistics_resource_adaptor const& host_tier() const noexcept { return host_tier_; }
  [[nodiscard]] spill_store& store() noexcept { return store_; }
  [[nodiscard]] oom_coordinator& coordinator() noexcept { return coordinator_; }
  [[nodiscard]] lease_arbiter& arbiter() noexcept { return arbiter_; }
  /** @return the out-of-memory failures injected so far (SPILLWAY_INJECT_OOM) */
  [[nodiscard]] std::size_t injected_failures() const {
    return device_with_spill_.injected_failures();
  }
  /** @return the device capacity in bytes */
  [[nodiscard]] std::size_t device_memory() const noexcept { return device_memory_; }
  /** @return the spill store's host budget in bytes */
  [[nodiscard]] std::size_t host_memory() const noexcept { return host_memory_; }

 private:
  struct cuda_parts;  ///< the CUDA device's stream and resources
  /// @return null unless `options` asks for CUDA
  static std::unique_ptr<cuda_parts> make_cuda_parts(device_environment_options const& options);

  device_backend backend_;
  std::size_t device_memory_;
  std::size_t host_memory_;
  host_memory_resource host_;
  std::unique_ptr<cuda_parts> cuda_;                           ///< null on the emulated device
  std::unique_ptr<emulated_device_memory_resource> emulated_;  ///< null on CUDA
  stream_view stream_;
  statistics_resource_adaptor host_tier_;
  statistics_resource_adaptor device_;  ///< counts the raw device's bytes
  oom_coordinator coordinator_;
  retry_resource_adaptor device_with_spill_;
  lease_arbiter arbiter_;
  spill_store store_;
  host_budget_resource budgeted_host_;
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
