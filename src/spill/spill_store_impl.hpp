/**
 * @file spill_store_impl.hpp
 * @brief The state behind `spill_store` and its handles (private to the spill layer).
 *
 * Its members are defined by concern: spill_store.cpp (entries, pin/acquire/release, the public
 * `spill_store`), spill_eviction.cpp (the host budget and victim selection), spill_copies.cpp
 * (device memory to and from host and disk through staging windows), spill_io.cpp (spill file
 * writes and reads on the I/O threads, blocks and codecs) and spill_statistics.cpp.
 */
#pragma once

#include "spill/codec_advisor.hpp"
#include "spill/io_pool.hpp"

#include <spillway/core/mutex.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/spill/spill_file.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/pack.hpp>

#include <array>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <tuple>
#include <unordered_map>
#include <vector>

namespace spillway::detail {

/** @brief Whether a buffer is at rest or being moved (and by whom). */
enum class entry_state : std::uint8_t {
  STABLE,        ///< at rest on its tier
  SPILLING,      ///< a spiller is moving it off the device
  UNSPILLING,    ///< an acquirer is copying it from host to device
  WRITE_QUEUED,  ///< on the host, a disk write is queued (an acquire may cancel it)
  WRITING,       ///< on the host, an I/O thread is writing it
  READING,       ///< on disk, an I/O thread is reading it to the host
  STREAMING,     ///< on disk, an acquirer is reading it straight to the device in pieces
};

/** @brief Part of a host-tier copy: `raw` bytes encoded with the entry's host codec. */
struct host_piece {
  buffer data;          ///< the stored bytes (`data.size()` of them)
  std::size_t raw = 0;  ///< their decoded size
};

/** @brief One block of an entry on disk (an entry is one block per staging piece). */
struct disk_block {
  spill_block_location location;
  std::uint64_t file_id = 0;
};

struct spill_entry;

/** @brief The order in which a tier's entries are chosen to spill: lowest priority, then least
 * recently used, then oldest. */
struct victim_order {
  bool operator()(spill_entry const* lhs, spill_entry const* rhs) const noexcept;
};

/** @brief One registered buffer or table. */
struct spill_entry {
  std::uint64_t id       = 0;
  int priority           = 0;
  task_id owner          = {};
  std::uint64_t last_use = 0;  ///< logical clock; lower is less recently used
  std::size_t pins       = 0;
  bool release_requested = false;  ///< the handle went while the entry was busy
  spill_tier tier        = spill_tier::DEVICE;
  entry_state state      = entry_state::STABLE;

  bool is_table        = false;
  std::size_t num_rows = 0;
  std::vector<std::uint8_t> metadata;  ///< pack metadata, compact (tables, once packed)
  std::size_t raw_size = 0;            ///< packed bytes (or buffer bytes)

  // DEVICE: the original table, or packed bytes / a raw buffer.
  std::unique_ptr<table> device_table;
  buffer device_data;
  std::size_t device_bytes = 0;

  // HOST: pieces encoded with host_codec; host_bytes (their stored sizes) is reserved.
  std::vector<host_piece> host_pieces;
  std::size_t host_bytes = 0;
  codec host_codec       = codec::NONE;

  // DISK: the blocks in order; disk_bytes counts their headers and payloads.
  std::vector<disk_block> blocks;
  std::size_t disk_bytes = 0;

  std::size_t bookkeeping    = 0;  ///< host bytes of the entry's bookkeeping, counted in host_used_
  std::uint64_t write_ticket = 0;  ///< identifies the queued write; bumped to cancel it
  std::exception_ptr read_error;
};

inline bool victim_order::operator()(spill_entry const* lhs,
                                     spill_entry const* rhs) const noexcept {
  return std::tie(lhs->priority, lhs->last_use, lhs->id) <
         std::tie(rhs->priority, rhs->last_use, rhs->id);
}

/** @brief A spill file being written or holding live blocks. */
struct spill_file_state {
  std::string path;
  std::shared_ptr<writable_file> writer;
  std::uint64_t reserved = 0;      ///< bytes handed out to blocks
  std::size_t live       = 0;      ///< blocks written or being written, not yet released
  bool sealed            = false;  ///< takes no more blocks (full, or a write failed)
};

/** @brief What `acquire` returns to a handle. */
struct acquired_data {
  table_view view;
  void const* data = nullptr;
  std::size_t size = 0;
};

class spill_store_impl {
 public:
  explicit spill_store_impl(spill_store_options options);
  ~spill_store_impl();
  spill_store_impl(spill_store_impl const&)            = delete;
  spill_store_impl& operator=(spill_store_impl const&) = delete;
  spill_store_impl(spill_store_impl&&)                 = delete;
  spill_store_impl& operator=(spill_store_impl&&)      = delete;

  spillable_table add_table(std::unique_ptr<table> data, int priority, task_id owner);
  spillable_table add_table_slice(table_view const& slice, int priority, task_id owner);
  spillable_buffer add_buffer(buffer data, int priority, task_id owner);

  acquired_data acquire(std::uint64_t id);
  void unpin(std::uint64_t id) noexcept;
  void release(std::uint64_t id) noexcept;
  /// The registered table of a stable, unpinned device entry (which is erased), or null.
  std::unique_ptr<table> take_resident(std::uint64_t id);
  /// The buffer of a stable, unpinned device entry of a buffer (which is erased), or nothing.
  std::optional<buffer> take_resident_buffer(std::uint64_t id);
  spill_tier tier_of(std::uint64_t id);
  std::pair<int, task_id> priority_and_owner(std::uint64_t id);

  std::size_t spill(std::size_t bytes, spill_tier from, std::optional<task_id> owner);
  /// Counts `bytes` of a caller's host memory in the budget (see spill_store::reserve_caller_host).
  bool reserve_caller_host(std::size_t bytes);
  void release_caller_host(std::size_t bytes);
  void prefetch(std::uint64_t id);
  void wait_for_io();

  spill_statistics statistics() const;
  std::size_t bytes_on(spill_tier tier) const;
  std::string const& directory() const noexcept { return directory_; }
  resource_ref host_resource() const noexcept { return options_.host; }
  stream_view stream() const noexcept { return options_.stream; }
  std::size_t io_threads() const noexcept { return options_.io_threads; }

 private:
  using garbage = std::vector<std::unique_ptr<spill_entry>>;

  spill_entry& find(std::uint64_t id) SPILLWAY_REQUIRES(mutex_);
  std::uint64_t insert(std::unique_ptr<spill_entry> entry) SPILLWAY_REQUIRES(mutex_);
  /// Of a stable, unpinned device entry, what `take(entry, taken)` moves out (it returns
  /// whether it did; the entry is then erased); else `Taken{}`.
  template <typename Taken, typename Take>
  Taken take_from_device(std::uint64_t id, Take const& take);
  /// Moves a registered entry to `tier`, keeping `by_tier_` in order.
  void set_tier(spill_entry& entry, spill_tier tier) SPILLWAY_REQUIRES(mutex_);
  /// Marks a registered entry as just used, keeping `by_tier_` in order.
  void touch(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  std::vector<spill_entry*> select_victims(spill_tier tier,
                                           std::size_t bytes,
                                           std::optional<task_id> owner) SPILLWAY_REQUIRES(mutex_);
  void erase(spill_entry& entry, garbage& trash, std::vector<std::string>& dead_files)
    SPILLWAY_REQUIRES(mutex_);
  void drop_blocks(std::vector<disk_block>& blocks, std::vector<std::string>& dead_files)
    SPILLWAY_REQUIRES(mutex_);
  bool reserve_host(scoped_lock& lock, std::size_t bytes, bool wait) SPILLWAY_REQUIRES(mutex_);
  /// Whether `bytes` more host bytes fit under `limit`, after scheduling host entries for disk
  /// and (with `wait`) waiting while writes in progress may free enough; reserves nothing.
  bool make_room(scoped_lock& lock, std::size_t bytes, bool wait, std::size_t limit)
    SPILLWAY_REQUIRES(mutex_);
  void release_host(std::size_t bytes, bool in_flight) SPILLWAY_REQUIRES(mutex_);
  /// Reserves `bytes` (in flight) whether or not they fit: for the store's own work that would
  /// otherwise fail a job while nothing can make room (counted in host_over_budget_peak).
  void reserve_host_past_budget(std::size_t bytes) SPILLWAY_REQUIRES(mutex_);
  /// Raises statistics_.host_over_budget_peak to what the store and its callers hold past the
  /// general part now.
  void note_over_budget() SPILLWAY_REQUIRES(mutex_);
  /// In-flight host bytes that became resident: no room, but waiters re-check (`reserve_host`
  /// waits only while something in flight or being written may free room).
  void settle_in_flight(std::size_t bytes) SPILLWAY_REQUIRES(mutex_);
  void release_host_now(std::size_t bytes) SPILLWAY_EXCLUDES(mutex_);
  void schedule_evictions(std::size_t bytes) SPILLWAY_REQUIRES(mutex_);
  /// Counts `entry`'s bookkeeping in the host budget as callers' bytes (past it if need be: it
  /// cannot wait).
  void charge_bookkeeping(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  /// Releases what `charge_bookkeeping` counted for `entry`.
  void release_bookkeeping(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  /// Counts `entry`'s bookkeeping anew once its pack metadata is made (estimated until then).
  void recount_bookkeeping(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  /// Calls `bookkeeping_changed` when the bookkeeping moved by a step since it last did.
  void report_bookkeeping() SPILLWAY_REQUIRES(mutex_);
  /// The most host_used_ reaches with bytes held beside the store's data (callers', the
  /// catalog's): one device spill's staging stays free.
  [[nodiscard]] std::size_t beside_limit() const SPILLWAY_REQUIRES(mutex_);
  /// Counts `bytes` held beside the store's data in host_used_: all of them when `within`, else
  /// what beside_limit() leaves room for, the rest in `over` (past the budget).
  void count_beside(std::size_t bytes, bool within, std::size_t& over) SPILLWAY_REQUIRES(mutex_);
  /// Releases what count_beside counted (`over` first).
  void uncount_beside(std::size_t bytes, std::size_t& over) SPILLWAY_REQUIRES(mutex_);
  void keep_headroom() SPILLWAY_REQUIRES(mutex_);
  void free_host_pieces(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  void emit(event_kind kind,
            spill_entry const& entry,
            spill_tier from,
            spill_tier to,
            std::chrono::nanoseconds time) const;
  disk_block append_block(std::uint64_t id,
                          codec payload_codec,
                          std::size_t raw,
                          std::span<std::byte const> payload);
  /// The payload of a disk block holding `raw` and its codec: `raw` compressed into `scratch`
  /// with the disk codec when that pays (codec_advisor_), else `raw` itself.
  std::pair<codec, std::span<std::byte const>> encode_block(std::span<std::byte const> raw,
                                                            std::span<std::byte> scratch);
  std::vector<host_piece> copy_to_host(spill_entry& entry, std::vector<std::uint8_t>& metadata);
  std::vector<disk_block> write_device_to_disk(spill_entry& entry,
                                               std::vector<std::uint8_t>& metadata);
  void stream_disk_to_device(spill_entry& entry, scoped_lock& lock) SPILLWAY_REQUIRES(mutex_);
  void finish_transition(spill_entry& entry, garbage& trash, std::vector<std::string>& dead_files)
    SPILLWAY_REQUIRES(mutex_);
  void remove_files(std::vector<std::string> const& paths) noexcept;
  /// Counts a failed write or read; `of_disk`: the disk itself failed (see last_disk_error).
  void record_error(std::string const& message, bool is_write, bool of_disk)
    SPILLWAY_REQUIRES(mutex_);
  void schedule_write(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  void schedule_read(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  std::size_t spill_device_entry(spill_entry& entry);
  void write_entry(std::uint64_t id, std::uint64_t ticket) noexcept;
  void read_entry(std::uint64_t id) noexcept;
  void unspill_to_device(spill_entry& entry, scoped_lock& lock) SPILLWAY_REQUIRES(mutex_);
  void ensure_directory();
  acquired_data pin(spill_entry& entry) SPILLWAY_REQUIRES(mutex_);
  void add_transfer(spill_tier from,
                    spill_tier to,
                    std::size_t raw,
                    std::size_t stored,
                    std::chrono::nanoseconds time) SPILLWAY_REQUIRES(mutex_);

  spill_store_options options_;
  file_system& files_;
  std::string directory_;
  std::size_t directory_slot_;

  std::size_t piece_size_;  ///< raw bytes of one staging piece (and at most of one disk block)
  std::size_t io_scratch_;  ///< host scratch one I/O job may hold (outside general_limit_)
  /// Whether the disk codec is tried on a block and its result kept (see encode_block).
  codec_advisor codec_advisor_;
  std::size_t general_limit_;  ///< host_budget minus io_threads * io_scratch_
  /// What one device-to-disk spill stages through (two pieces and compression scratch) or one
  /// disk-to-device read streams through (two blocks as read and decoded): the part of
  /// general_limit_ callers' bytes never take.
  std::size_t staging_reserve_;
  std::size_t high_water_;  ///< above it, host entries start going to disk
  std::size_t low_water_;   ///< ... until what is not being written is below this

  mutable mutex mutex_;
  std::condition_variable changed_;
  std::condition_variable room_;  ///< host bytes were released, or a write finished
  std::unordered_map<std::uint64_t, std::unique_ptr<spill_entry>> entries_
    SPILLWAY_GUARDED_BY(mutex_);
  /// Every entry, by tier, in victim order: a spill visits only the entries it may take (plus
  /// the busy ones it skips), however many sit in other tiers.
  std::array<std::set<spill_entry*, victim_order>, NUM_SPILL_TIERS> by_tier_
    SPILLWAY_GUARDED_BY(mutex_);
  std::map<std::uint64_t, spill_file_state> files_state_ SPILLWAY_GUARDED_BY(mutex_);
  std::optional<std::uint64_t> current_file_ SPILLWAY_GUARDED_BY(mutex_);
  std::uint64_t next_file_id_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::uint64_t next_id_ SPILLWAY_GUARDED_BY(mutex_)      = 1;
  std::uint64_t clock_ SPILLWAY_GUARDED_BY(mutex_)        = 0;
  /// Every host byte the store holds or is about to allocate, except I/O job scratch.
  std::size_t host_used_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  /// The part of host_used_ whose holders release it without waiting for host room.
  std::size_t host_in_flight_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  /// Host bytes callers hold outside the store (reserve_caller_host): those in host_used_,
  /// and caller_over_ of them beyond it (past the room callers may take).
  std::size_t caller_host_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::size_t caller_over_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  /// Host bytes of entries queued for or being written to disk.
  std::size_t host_writing_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  /// Host bytes of the entries' bookkeeping (in host_used_), and what bookkeeping_changed last got.
  std::size_t bookkeeping_ SPILLWAY_GUARDED_BY(mutex_)          = 0;
  std::size_t bookkeeping_over_ SPILLWAY_GUARDED_BY(mutex_)     = 0;  ///< of it, past the room
  std::size_t bookkeeping_reported_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  /// Bumped whenever room may have appeared (or a write failed); what waiters for room wait on.
  std::uint64_t room_epoch_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::array<std::size_t, NUM_SPILL_TIERS> bytes_on_ SPILLWAY_GUARDED_BY(mutex_){};
  spill_statistics statistics_ SPILLWAY_GUARDED_BY(mutex_);
  bool directory_created_ SPILLWAY_GUARDED_BY(mutex_) = false;

  io_pool io_;  // last: its threads stop before the state they use goes
};

}  // namespace spillway::detail
