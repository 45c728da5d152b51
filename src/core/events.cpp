#include <spillway/core/events.hpp>

namespace spillway {

std::string_view to_string(event_kind kind) noexcept {
  switch (kind) {
    case event_kind::LEASE_GRANTED:
      return "lease_granted";
    case event_kind::LEASE_RETURNED:
      return "lease_returned";
    case event_kind::LEASE_WAIT_BEGIN:
      return "lease_wait_begin";
    case event_kind::LEASE_LENT:
      return "lease_lent";
    case event_kind::LEASE_RECLAIMED:
      return "lease_reclaimed";
    case event_kind::LEASE_WHOLE_DEVICE:
      return "lease_whole_device";
    case event_kind::LEASE_CANCELLED:
      return "lease_cancelled";
    case event_kind::LEASE_TIMED_OUT:
      return "lease_timed_out";
    case event_kind::SEMAPHORE_ACQUIRED:
      return "semaphore_acquired";
    case event_kind::SEMAPHORE_RELEASED:
      return "semaphore_released";
    case event_kind::OOM_SPILLED:
      return "oom_spilled";
    case event_kind::OOM_BLOCKED:
      return "oom_blocked";
    case event_kind::OOM_RETRY:
      return "oom_retry";
    case event_kind::OOM_SPLIT:
      return "oom_split";
    case event_kind::OOM_INJECTED:
      return "oom_injected";
    case event_kind::SPILLED:
      return "spilled";
    case event_kind::UNSPILLED:
      return "unspilled";
    case event_kind::SPILL_WRITE_FAILED:
      return "spill_write_failed";
    case event_kind::SPILL_READ_FAILED:
      return "spill_read_failed";
    case event_kind::SHARD_STORED:
      return "shard_stored";
    case event_kind::SHARD_SENT:
      return "shard_sent";
    case event_kind::SHARD_RECEIVED:
      return "shard_received";
    case event_kind::SHARD_RECOMPUTED:
      return "shard_recomputed";
  }
  return "unknown";
}

void event_log::record(event const& e) {
  scoped_lock lock{mutex_};
  events_.push_back(e);
}

std::vector<event> event_log::events() const {
  scoped_lock lock{mutex_};
  return events_;
}

std::size_t event_log::count(event_kind kind) const {
  scoped_lock lock{mutex_};
  std::size_t total = 0;
  for (auto const& e : events_) {
    total += e.kind == kind ? 1 : 0;
  }
  return total;
}

std::size_t event_log::total_bytes(event_kind kind) const {
  scoped_lock lock{mutex_};
  std::size_t total = 0;
  for (auto const& e : events_) {
    total += e.kind == kind ? e.bytes : 0;
  }
  return total;
}

void event_log::clear() {
  scoped_lock lock{mutex_};
  events_.clear();
}

}  // namespace spillway
