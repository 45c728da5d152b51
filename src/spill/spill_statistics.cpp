/**
 * @file spill_statistics.cpp
 * @brief Spill store statistics: events, transfers, errors and the bytes on each tier.
 */
#include "spill/spill_store_impl.hpp"
#include "spill/spill_store_util.hpp"

#include <spillway/core/logging.hpp>
#include <spillway/spill/spill_store.hpp>

#include <chrono>
#include <string>

namespace spillway::detail {

void spill_store_impl::emit(event_kind kind,
                            spill_entry const& entry,
                            spill_tier from,
                            spill_tier to,
                            std::chrono::nanoseconds time) const {
  if (options_.events == nullptr) {
    return;
  }
  event happened{};
  happened.time     = clock_type::now();
  happened.kind     = kind;
  happened.task     = entry.owner;
  happened.bytes    = entry.raw_size;
  happened.value    = static_cast<std::int64_t>(index_of(from) * 4 + index_of(to));
  happened.duration = time;
  record_event(options_.events, happened);
}

void spill_store_impl::add_transfer(spill_tier from,
                                    spill_tier to,
                                    std::size_t raw,
                                    std::size_t stored,
                                    std::chrono::nanoseconds time) {
  auto& moved = statistics_.transfers[index_of(from)][index_of(to)];
  ++moved.count;
  moved.raw_bytes += raw;
  moved.stored_bytes += stored;
  moved.time += time;
}

void spill_store_impl::record_error(std::string const& message, bool is_write, bool of_disk) {
  ++(is_write ? statistics_.write_errors : statistics_.read_errors);
  statistics_.last_error = message;
  if (of_disk) {
    statistics_.last_disk_error = message;
  }
  log(log_level::WARN, "spill store: " + message);
  ++room_epoch_;
  room_.notify_all();  // waiters for room give up after a failed write
}

spill_statistics spill_store_impl::statistics() const {
  scoped_lock lock(mutex_);
  auto result              = statistics_;
  result.bytes_on          = bytes_on_;
  result.bookkeeping_bytes = bookkeeping_;
  for (std::size_t tier = 0; tier < NUM_SPILL_TIERS; ++tier) {
    result.buffers_on[tier] = by_tier_[tier].size();
  }
  return result;
}

std::size_t spill_store_impl::bytes_on(spill_tier tier) const {
  scoped_lock lock(mutex_);
  return bytes_on_[index_of(tier)];
}

}  // namespace spillway::detail
