/**
 * @file lease_events.hpp
 * @brief The events of one kind in an event log, for the lease suites' checks of what the arbiter
 * recorded.
 */
#pragma once

#include <spillway/core/events.hpp>

#include <vector>

namespace spillway::test {

/** @return the events of `kind` in `log`, in recording order */
inline std::vector<event> events_of(event_log const& log, event_kind kind) {
  std::vector<event> result;
  for (auto const& e : log.events()) {
    if (e.kind == kind) {
      result.push_back(e);
    }
  }
  return result;
}

}  // namespace spillway::test
