/**
 * @file events.hpp
 * @brief Observability events (leases, waits, spills, retries) and a thread-safe log of them.
 *
 * Components record into an `event_sink` they were given; the run report draws its timeline from
 * an `event_log`. Recording is optional everywhere: a null sink costs one branch.
 */
#pragma once

#include <spillway/core/ids.hpp>
#include <spillway/core/mutex.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace spillway {

/** @brief What happened. */
enum class event_kind : std::uint8_t {
  LEASE_GRANTED,       ///< bytes: granted; duration: time waited (0 when immediate)
  LEASE_RETURNED,      ///< bytes: returned to the arbiter
  LEASE_WAIT_BEGIN,    ///< bytes: requested
  LEASE_LENT,          ///< task: lender; other_task: borrower; bytes: lent
  LEASE_RECLAIMED,     ///< bytes: taken back by a lender after its wait
  LEASE_WHOLE_DEVICE,  ///< bytes: requested; value: granted
  LEASE_CANCELLED,     ///< bytes: requested
  LEASE_TIMED_OUT,     ///< bytes: requested
  SEMAPHORE_ACQUIRED,  ///< duration: time waited
  SEMAPHORE_RELEASED,  ///<
  OOM_SPILLED,         ///< bytes: freed by spilling on an allocation failure
  OOM_BLOCKED,         ///< bytes: the failed request
  OOM_RETRY,           ///< retry_oom thrown; bytes: the failed request
  OOM_SPLIT,           ///< split_and_retry_oom thrown; bytes: the failed request
  OOM_INJECTED,        ///< an injected failure; bytes: the request
  SPILLED,             ///< bytes: raw bytes moved down; value: from * 4 + to tier; duration
  UNSPILLED,           ///< bytes: raw bytes moved up; value: from * 4 + to tier; duration
  SPILL_WRITE_FAILED,  ///< bytes: the buffer that stayed on its tier
  SPILL_READ_FAILED,   ///< bytes: the buffer whose block could not be read
  SHARD_STORED,        ///< a map task stored a shard; bytes: packed size; value: partition
  SHARD_SENT,          ///< a shard left for its reader (pushed or fetched); bytes; value: partition
  SHARD_RECEIVED,      ///< a shard arrived from another rank; bytes: packed size; value: partition
  SHARD_RECOMPUTED,    ///< a lost shard was rebuilt from its map's input; bytes; value: partition
};

/** @return "lease_granted", ... */
std::string_view to_string(event_kind kind) noexcept;

/** @brief One event. */
struct event {
  std::chrono::steady_clock::time_point time;
  event_kind kind;
  task_id task;
  task_id other_task;
  std::size_t bytes  = 0;
  std::int64_t value = 0;
  std::chrono::nanoseconds duration{0};
};

/** @brief Receives events. Implementations are thread-safe. */
class event_sink {
 public:
  event_sink()                             = default;
  virtual ~event_sink()                    = default;
  event_sink(event_sink const&)            = delete;
  event_sink& operator=(event_sink const&) = delete;
  event_sink(event_sink&&)                 = delete;
  event_sink& operator=(event_sink&&)      = delete;

  virtual void record(event const& e) = 0;
};

/** @brief Records `e` into `sink` when `sink` is not null. */
inline void record_event(event_sink* sink, event const& e) {
  if (sink != nullptr) {
    sink->record(e);
  }
}

/** @brief Keeps every event in memory, in recording order. */
class event_log final : public event_sink {
 public:
  void record(event const& e) override;
  /** @return a copy of the events so far */
  [[nodiscard]] std::vector<event> events() const;
  /** @return how many events of `kind` were recorded */
  [[nodiscard]] std::size_t count(event_kind kind) const;
  /** @return the sum of `bytes` over events of `kind` */
  [[nodiscard]] std::size_t total_bytes(event_kind kind) const;
  void clear();

 private:
  mutable mutex mutex_;
  std::vector<event> events_ SPILLWAY_GUARDED_BY(mutex_);
};

}  // namespace spillway
