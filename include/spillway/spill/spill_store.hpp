/**
 * @file spill_store.hpp
 * @brief The per-process home of every buffer a task is not computing on: it moves them down the
 * tiers (device -> host -> disk) under pressure and back when they are used, losing nothing.
 *
 * - `make_spillable` registers a table or buffer with a priority (lower spills first) and an
 *   owning task; the returned handle's `acquire()` pins it on the device.
 * - `spill(bytes, tier)` frees bytes of a tier: victims are unpinned buffers on that tier by
 *   priority, then least recently used. Device buffers go to the host while the host budget
 *   has room, else straight to disk through bounded host staging; host buffers go to disk.
 * - The host budget is strict: see `spill_store_options::host_budget`.
 * - Disk writes and reads run on a small I/O pool; writes are appended to large sequential
 *   files; every block is checksummed and verified on read.
 * - Wire-in: `make_spill_hook(task)` for the lease arbiter, `make_failure_callback()` for the
 *   device's `failure_callback_resource_adaptor`; handles model `retryable_input`.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/spill/codec.hpp>
#include <spillway/spill/file_system.hpp>
#include <spillway/spill/spill_statistics.hpp>
#include <spillway/spill/spill_tier.hpp>
#include <spillway/spill/spillable_buffer.hpp>
#include <spillway/spill/spillable_table.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <functional>
#include <memory>
#include <string>

namespace spillway {

namespace detail {
class spill_store_impl;
}

/** @brief How a spill store is set up. */
struct spill_store_options {
  /** @param device the device resource @param host the host resource */
  spill_store_options(resource_ref device_resource, resource_ref host_resource)
    : device(device_resource), host(host_resource) {}

  resource_ref device;  ///< where buffers are computed on; unspilling allocates here
  resource_ref host;    ///< where the host tier (and disk staging) allocates
  /**
   * @brief The most bytes the store ever has allocated from `host` at once (at least 64 KiB).
   *
   * Every host allocation the store makes counts: host-tier data, device-to-disk staging,
   * compression scratch, blocks read back from disk, and `spillable_table::split_at` halves.
   * The peak of bytes outstanding on `host` because of this store never exceeds the budget.
   * (Allocations made by callers, e.g. through `host_resource()`-like paths of other layers,
   * are theirs.) How:
   * - The budget is cut into `io_threads` scratch areas of `piece + compress_bound(piece)`
   *   bytes, one per I/O thread (host-to-disk writes and disk reads never wait for room, so they
   *   always make progress), and a general part for everything else. `piece` is
   *   `min(staging_size, host_budget / (4 * (io_threads + 1)))`, rounded down to 64 bytes.
   * - General host bytes are reserved before they are allocated and released after they are
   *   freed. A device spill goes to the host only if its reservation fits without waiting; else
   *   it is written to disk piece by piece from a staging area it reserves, waiting (on a
   *   condition variable) for queued host-to-disk writes to free room when there is none.
   * - Above 75% of the general part, the least valuable host entries are scheduled for disk
   *   until what is not already being written is below 50%, so device spills normally find room.
   * - An `acquire` of data on disk reads it to the host if room can be reserved at once, else
   *   streams it block by block (each block is at most one piece) straight to the device.
   * - A buffer larger than the whole budget therefore never lands on the host: it is streamed
   *   through one piece of staging to disk and back. A table whose packed size exceeds the
   *   general part is packed on the device (its packed size in device memory, once) and then
   *   streamed the same way.
   * - If room for that staging can never come (nothing evictable and nothing in flight: the host
   *   tier may be held by the very buffer whose move to the device made the spill), the spill
   *   stages through one window of the largest smaller piece that fits (at least 4 KiB; counted
   *   in `spill_statistics::small_staging_spills`). Only when not even that fits does the spill
   *   fail (the buffer stays on the device, counted as a write error).
   * - The catalog's own host bytes (each entry, its places in the catalog and a table's pack
   *   metadata: `spill_statistics::bookkeeping_bytes`) count like callers' bytes: host entries
   *   go to disk to make room for them, and past the room they leave for staging they are
   *   counted in `host_over_budget_peak` rather than refused.
   * - The store goes past the budget only where the alternative is a failed job, and counts it
   *   (`spill_statistics::host_over_budget_peak`): a table too large for the host whose packed
   *   copy the full device has no room for either is packed on the host; a read from disk with
   *   no room for its two blocks takes them anyway; and the store's own work proceeds where its
   *   own bytes leave room but its callers' (`reserve_caller_host`) do not.
   */
  std::size_t host_budget = 1_GiB;
  /// Upper bound on one staging piece (see `host_budget`); disk blocks hold at most this much.
  std::size_t staging_size = 4_MiB;
  /// The store creates `<spill_root>/spillway-<pid>` (`.<n>` for a process's later stores) and
  /// removes it when destroyed; empty means `default_spill_root()` ($TMPDIR or /tmp).
  std::string spill_root;
  codec host_codec = codec::NONE;  ///< how host-tier bytes are kept
  codec disk_codec = codec::LZ4;   ///< how disk blocks are stored
  /// A disk block stays compressed only when `disk_codec` shrinks it to at most 1/this of its
  /// size; otherwise it is written raw (each block records its codec). After a block that does
  /// not shrink enough, the next 1, 2, 4, ... 64 blocks are written raw without trying, so that
  /// data that does not compress costs no compression time. 1 keeps every block compressed.
  /// Chosen by measurement (7843efc:docs/BENCHMARKS.md, "Fifth run"): on a 2-core machine
  /// LZ4 at 1.28x made a 100M-row sort 10% slower than no compression (5.66-5.75 against
  /// 5.04-5.17 s).
  double min_compression_ratio = 1.5;
  /// Besides, a disk block stays compressed only while the measured costs say that compressing
  /// pays: compress plus decompress time per byte below the write plus read time it saves
  /// (moving averages over recent blocks; the skipped blocks of `min_compression_ratio` keep
  /// the codec's estimate fresh). A disk whose writes land in the page cache at memory speed
  /// gets raw blocks; a slow or throttled one gets compressed blocks. False: the ratio alone.
  /// Chosen by measurement (d913fff:docs/BENCHMARKS.md, "What we tried": presorted 2.45 -> 1.72 s):
  /// on this machine LZ4 made the sort of presorted keys (2.0x compression) 42% slower than raw
  /// blocks.
  bool compress_only_when_faster = true;
  /// Threads that read and write spill files; 0 (the default): `spill_io_threads(host_budget,
  /// staging_size)`, which follows the worker pool.
  std::size_t io_threads = 0;
  /// A spill file is closed to new blocks once it reaches this size.
  std::size_t file_target_size = 256_MiB;
  file_system* files           = nullptr;  ///< the disk seam; null means `default_file_system()`
  /// Optional. Gets SPILLED / UNSPILLED (bytes: raw size; value: from * 4 + to tier index;
  /// duration: the move) for every completed tier move, and SPILL_WRITE_FAILED /
  /// SPILL_READ_FAILED (bytes: raw size) for every failed one; task is the buffer's owner.
  /// Recorded with the store's lock held: a sink must not call into the store.
  event_sink* events = nullptr;
  stream_view stream = default_stream();  ///< the stream copies are ordered on
  /// Optional. Called with `spill_statistics::bookkeeping_bytes` each time they moved by 1 MiB
  /// or more since the last call (with the store's lock held: it must not call into the store),
  /// so that memory kept beside the budget (freed blocks a host resource keeps mapped) can make
  /// room for them.
  std::function<void(std::size_t)> bookkeeping_changed;
};

/**
 * @return the spill I/O threads a store of `host_budget` bytes gets by default: one per worker
 * thread (`worker_threads()`), as many as the budget holds 16 staging pieces of `staging_size` for
 * (each thread's scratch area is about two pieces, so the threads take at most an eighth of the
 * budget), and at least 2 (a write and a read beside it)
 */
[[nodiscard]] std::size_t spill_io_threads(std::size_t host_budget, std::size_t staging_size);

/**
 * @brief Catalog of spillable buffers across the device, host and disk tiers.
 * @note Thread-safe. One mutex guards the catalog and is never held while copying, compressing or
 * doing disk I/O; a buffer being moved is in a transitional state that concurrent `acquire`s wait
 * out. Handles must not outlive their store.
 */
class spill_store {
 public:
  /**
   * @brief Builds a store; removes spill directories left by dead processes under its root.
   * @throws spillway::invalid_argument for a zero file target size or staging size,
   * or a host budget under 64 KiB
   * @note The spill directory is created at the first disk write, so a store whose directory
   * cannot be created still works on the device and host tiers (writes then fail and are counted).
   */
  explicit spill_store(spill_store_options options);
  /** @brief Waits for pending I/O, frees every buffer and removes the spill directory. */
  ~spill_store();
  spill_store(spill_store const&)            = delete;
  spill_store& operator=(spill_store const&) = delete;
  spill_store(spill_store&&)                 = delete;
  spill_store& operator=(spill_store&&)      = delete;

  /**
   * @brief Registers a device table.
   * @param data the table; owned by the store until it spills
   * @param priority lower priorities spill first
   * @param owner the task whose `spill_task` may spill it
   */
  [[nodiscard]] spillable_table make_spillable(std::unique_ptr<table> data,
                                               int priority,
                                               task_id owner = {});
  /** @brief Registers a device buffer. @see make_spillable(std::unique_ptr<table>, int, task_id) */
  [[nodiscard]] spillable_buffer make_spillable(buffer data, int priority, task_id owner = {});

  /**
   * @brief Frees at least `bytes` of tier `from` if unpinned buffers allow.
   *
   * DEVICE: victims are packed to the host when it has room, else written to disk (on this
   * thread, through bounded host staging); their device memory is freed before this returns.
   * HOST: victims are scheduled for writing to disk; their host memory is freed when each write
   * has completed.
   * @return DEVICE: bytes of device memory freed. HOST: bytes of host memory scheduled to be freed
   * @note A failed move leaves its buffer where it was, counted in `statistics()`.
   */
  std::size_t spill(std::size_t bytes, spill_tier from);
  /** @brief `spill(bytes, DEVICE)` restricted to the unpinned device buffers of `task`. */
  std::size_t spill_task(task_id task, std::size_t bytes);

  /**
   * @brief Counts `bytes` of host memory that a caller allocates outside the store (a reader's
   * decoded batches, Arrow's buffers, a writer's encoded pages) in the host budget, so that the
   * store's host bytes and its callers' together stay within it.
   *
   * Room is made as for the store's own host bytes: host entries are scheduled for disk, and
   * the call waits while writes in progress may free enough. When they cannot (everything left
   * on the host is pinned, or `bytes` exceeds the budget), the bytes are counted anyway, past
   * the budget, and `spill_statistics::host_over_budget_peak` says by how much; the store's
   * own spills then go to disk until the caller releases them. Callers never take the room of
   * one device spill's staging or one disk read's blocks, and never stop the store's own work:
   * a spill or read that the store's own bytes leave room for proceeds past the budget rather
   * than fail (counted the same way). Callers never wait for each other or for the store's
   * other users, only for disk writes, which never wait for room.
   * @return whether the bytes fit within the budget
   * @see host_budget_resource, which calls it around each allocation
   */
  bool reserve_caller_host(std::size_t bytes);
  /** @brief Gives back bytes counted by `reserve_caller_host` (after they are freed). */
  void release_caller_host(std::size_t bytes);

  /**
   * @brief Starts reading `handle`'s data from disk to host so that `acquire` finds it there;
   * does nothing when the host has no room for it now (its `acquire` then streams it).
   */
  void prefetch(spillable_table const& handle);
  /** @copydoc prefetch(spillable_table const&) */
  void prefetch(spillable_buffer const& handle);
  /** @brief Waits until every scheduled disk write and read has finished. */
  void wait_for_io();

  /** @return a snapshot of the counters */
  [[nodiscard]] spill_statistics statistics() const;
  /** @return bytes on `tier` now (device: allocated bytes; host and disk: stored bytes) */
  [[nodiscard]] std::size_t bytes_on(spill_tier tier) const;
  /** @return the directory spill files are written to */
  [[nodiscard]] std::string const& directory() const noexcept;
  /** @return the threads that read and write its spill files (`spill_store_options::io_threads`) */
  [[nodiscard]] std::size_t io_threads() const noexcept;

  /** @return a lease-arbiter hook that spills `task`'s unpinned device buffers */
  [[nodiscard]] spill_hook make_spill_hook(task_id task);
  /** @return a device failure callback: spill the failed size, retry while something was freed */
  [[nodiscard]] allocation_failure_callback make_failure_callback();

 private:
  std::unique_ptr<detail::spill_store_impl> impl_;
};

}  // namespace spillway
