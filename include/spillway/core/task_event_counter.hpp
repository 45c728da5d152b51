/**
 * @file task_event_counter.hpp
 * @brief An event sink that counts each task's events by kind, and passes every event on.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/ids.hpp>
#include <spillway/core/mutex.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>

namespace spillway {

/**
 * @brief Counts, per task, the events of each kind recorded into it (what a JSON summary gives
 * per task: allocation failures resolved by spilling, roll-backs, splits), then records each
 * event into `next`, the run report's sink for example.
 * @note Thread-safe. Events of no task (id 0) are passed on and counted under id 0.
 */
class task_event_counter final : public event_sink {
 public:
  /** @param next where every event goes on to; may be null; must outlive this */
  explicit task_event_counter(event_sink* next = nullptr) noexcept : next_(next) {}

  void record(event const& e) override;

  /** @return how many events of `kind` were recorded for `task` */
  [[nodiscard]] std::size_t count(task_id task, event_kind kind) const;

 private:
  static constexpr std::size_t KINDS = 32;
  event_sink* const next_;
  mutable mutex mutex_;
  std::map<std::uint64_t, std::array<std::size_t, KINDS>> counts_ SPILLWAY_GUARDED_BY(mutex_);
};

}  // namespace spillway
