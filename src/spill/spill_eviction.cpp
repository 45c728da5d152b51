/**
 * @file spill_eviction.cpp
 * @brief Spill store eviction: the host budget, victim selection and the spills it schedules.
 */
#include "spill/spill_store_impl.hpp"

#include <spillway/core/error.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <utility>
#include <vector>

namespace spillway::detail {

// ---- host budget ---------------------------------------------------------------------------

bool spill_store_impl::reserve_host(scoped_lock& lock, std::size_t bytes, bool wait) {
  if (!make_room(lock, bytes, wait, general_limit_)) {
    // What callers hold beside the store never stops the store's own work (a spill, a read
    // back): bytes that the store's own would leave room for are taken past the budget, and
    // counted. Not for what may go elsewhere instead (`wait` false: a device spill then goes to
    // disk).
    std::size_t const callers = caller_host_ - caller_over_ + bookkeeping_ - bookkeeping_over_;
    if (!wait || bytes > general_limit_ || host_used_ - callers + bytes > general_limit_) {
      return false;
    }
  }
  host_used_ += bytes;
  host_in_flight_ += bytes;
  note_over_budget();
  return true;
}

void spill_store_impl::reserve_host_past_budget(std::size_t bytes) {
  host_used_ += bytes;
  host_in_flight_ += bytes;
  note_over_budget();
}

void spill_store_impl::note_over_budget() {
  std::size_t const held = host_used_ + caller_over_ + bookkeeping_over_;
  if (held > general_limit_) {
    statistics_.host_over_budget_peak =
      std::max(statistics_.host_over_budget_peak, held - general_limit_);
  }
}

bool spill_store_impl::make_room(scoped_lock& lock,
                                 std::size_t bytes,
                                 bool wait,
                                 std::size_t limit) {
  if (bytes > limit) {
    return false;
  }
  std::size_t const failures = statistics_.write_errors;
  while (host_used_ + bytes > limit) {
    std::size_t const short_by = host_used_ + bytes - limit;
    if (host_writing_ < short_by) {
      schedule_evictions(short_by - host_writing_);
    }
    // Room comes only from writes (which never wait for room) and from holders that release
    // without waiting; with neither, waiting could last forever.
    if (!wait || (host_writing_ == 0 && host_in_flight_ == 0) ||
        statistics_.write_errors != failures) {
      return false;
    }
    std::uint64_t const seen = room_epoch_;
    lock.wait(room_, [&]() SPILLWAY_REQUIRES(mutex_) { return room_epoch_ != seen; });
  }
  return true;
}

void spill_store_impl::release_host(std::size_t bytes, bool in_flight) {
  host_used_ -= bytes;
  if (in_flight) {
    host_in_flight_ -= bytes;
  }
  ++room_epoch_;
  room_.notify_all();
}

bool spill_store_impl::reserve_caller_host(std::size_t bytes) {
  scoped_lock lock(mutex_);
  bool const within = make_room(lock, bytes, true, beside_limit());
  count_beside(bytes, within, caller_over_);
  caller_host_ += bytes;
  statistics_.caller_host_peak = std::max(statistics_.caller_host_peak, caller_host_);
  note_over_budget();
  return within;
}

void spill_store_impl::release_caller_host(std::size_t bytes) {
  scoped_lock lock(mutex_);
  caller_host_ -= bytes;
  uncount_beside(bytes, caller_over_);
}

std::size_t spill_store_impl::beside_limit() const {
  // Bytes held beside the store's data leave room for one device spill's staging, so that the
  // store can always move device buffers to disk however much is held beside them.
  return general_limit_ - std::min(general_limit_, staging_reserve_);
}

void spill_store_impl::count_beside(std::size_t bytes, bool within, std::size_t& over) {
  std::size_t const limit   = beside_limit();
  std::size_t const room    = limit > host_used_ ? limit - host_used_ : 0;
  std::size_t const counted = within ? bytes : std::min(bytes, room);
  host_used_ += counted;
  over += bytes - counted;
}

void spill_store_impl::uncount_beside(std::size_t bytes, std::size_t& over) {
  std::size_t const past = std::min(bytes, over);
  over -= past;
  release_host(bytes - past, false);
}

void spill_store_impl::settle_in_flight(std::size_t bytes) {
  host_in_flight_ -= bytes;
  ++room_epoch_;
  room_.notify_all();
}

void spill_store_impl::release_host_now(std::size_t bytes) {
  scoped_lock lock(mutex_);
  release_host(bytes, true);
}

namespace {

/// Bookkeeping bytes the bookkeeping_changed callback is told about at a time.
constexpr std::size_t BOOKKEEPING_REPORT_STEP = std::size_t{1} << 20;
/// An entry's places in the catalog: a node of the map by id and one of its tier's set, with
/// the allocator's headers.
constexpr std::size_t CATALOG_NODE_BYTES = 128;

/// What `entry` takes beside its data: itself, its catalog nodes and, for a table, its pack
/// metadata (kept compact once made; until the table first spills, its size as made).
std::size_t bookkeeping_of(spill_entry const& entry) {
  std::size_t bytes = sizeof(spill_entry) + CATALOG_NODE_BYTES;
  if (entry.is_table) {
    bytes += !entry.metadata.empty() ? entry.metadata.capacity()
             : entry.device_table != nullptr
               ? packed_metadata_size(entry.device_table->num_columns())
               : 0;
  }
  return bytes;
}

}  // namespace

void spill_store_impl::charge_bookkeeping(spill_entry& entry) {
  std::size_t const bytes = bookkeeping_of(entry);
  entry.bookkeeping       = bytes;
  // Counted as callers' bytes are, without waiting: the rest past the budget (bookkeeping_over_),
  // and never in the way of the store's own work (reserve_host); host entries go to disk to make
  // room for them.
  count_beside(bytes, false, bookkeeping_over_);
  bookkeeping_ += bytes;
  keep_headroom();
  statistics_.bookkeeping_peak = std::max(statistics_.bookkeeping_peak, bookkeeping_);
  note_over_budget();
  report_bookkeeping();
}

void spill_store_impl::release_bookkeeping(spill_entry& entry) {
  std::size_t const bytes = std::exchange(entry.bookkeeping, 0);
  bookkeeping_ -= bytes;
  uncount_beside(bytes, bookkeeping_over_);
  report_bookkeeping();
}

void spill_store_impl::recount_bookkeeping(spill_entry& entry) {
  std::size_t const bytes = bookkeeping_of(entry);
  if (bytes < entry.bookkeeping) {
    // Smaller than estimated (the usual case: compact metadata): the difference goes back.
    std::size_t const less = entry.bookkeeping - bytes;
    bookkeeping_ -= less;
    uncount_beside(less, bookkeeping_over_);
  } else {
    std::size_t const more = bytes - entry.bookkeeping;
    count_beside(more, false, bookkeeping_over_);
    bookkeeping_ += more;
    statistics_.bookkeeping_peak = std::max(statistics_.bookkeeping_peak, bookkeeping_);
    note_over_budget();
  }
  entry.bookkeeping = bytes;
  report_bookkeeping();
}

void spill_store_impl::report_bookkeeping() {
  std::size_t const moved = bookkeeping_ > bookkeeping_reported_
                              ? bookkeeping_ - bookkeeping_reported_
                              : bookkeeping_reported_ - bookkeeping_;
  if (options_.bookkeeping_changed && moved >= BOOKKEEPING_REPORT_STEP) {
    bookkeeping_reported_ = bookkeeping_;
    options_.bookkeeping_changed(bookkeeping_);
  }
}

void spill_store_impl::schedule_evictions(std::size_t bytes) {
  for (auto* entry : select_victims(spill_tier::HOST, bytes, std::nullopt)) {
    schedule_write(*entry);
  }
}

void spill_store_impl::keep_headroom() {
  if (host_used_ > high_water_ && host_used_ - host_writing_ > low_water_) {
    schedule_evictions(host_used_ - host_writing_ - low_water_);
  }
}

void spill_store_impl::free_host_pieces(spill_entry& entry) {
  // Freed under the lock, so the bytes are gone before anyone can reserve them again.
  entry.host_pieces.clear();
  bytes_on_[index_of(spill_tier::HOST)] -= entry.host_bytes;
  release_host(entry.host_bytes, false);
  entry.host_bytes = 0;
  entry.host_codec = codec::NONE;
}

std::vector<spill_entry*> spill_store_impl::select_victims(spill_tier tier,
                                                           std::size_t bytes,
                                                           std::optional<task_id> owner) {
  std::vector<spill_entry*> victims;
  std::size_t chosen = 0;
  for (auto* entry : by_tier_[index_of(tier)]) {
    if (chosen >= bytes) {
      break;
    }
    if (entry->state != entry_state::STABLE || entry->pins > 0 || entry->release_requested ||
        (owner && entry->owner != *owner)) {
      continue;
    }
    victims.push_back(entry);
    chosen += tier == spill_tier::DEVICE ? entry->device_bytes : entry->host_bytes;
  }
  return victims;
}

// ---- spilling ------------------------------------------------------------------------------

std::size_t spill_store_impl::spill(std::size_t bytes,
                                    spill_tier from,
                                    std::optional<task_id> owner) {
  SPILLWAY_EXPECTS(from != spill_tier::DISK, "nothing spills from the disk tier", invalid_argument);
  if (from == spill_tier::HOST) {
    scoped_lock lock(mutex_);
    std::size_t scheduled = 0;
    for (auto* entry : select_victims(spill_tier::HOST, bytes, owner)) {
      scheduled += entry->host_bytes;
      schedule_write(*entry);
    }
    return scheduled;
  }
  std::vector<spill_entry*> victims;
  {
    scoped_lock lock(mutex_);
    victims = select_victims(spill_tier::DEVICE, bytes, owner);
    for (auto* entry : victims) {
      entry->state = entry_state::SPILLING;
    }
  }
  std::size_t freed = 0;
  for (auto* entry : victims) {
    freed += spill_device_entry(*entry);
  }
  return freed;
}

}  // namespace spillway::detail
