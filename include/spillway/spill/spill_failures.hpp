/**
 * @file spill_failures.hpp
 * @brief Names a full or broken spill disk behind an out-of-memory failure of a job.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/spill/spill_store.hpp>

#include <string>

namespace spillway {

/**
 * @brief Runs `body` (a job's work over `store`). An `out_of_memory` it throws after writes to the
 * spill disk failed is really a full or broken spill disk: it becomes an `io_error` that says so
 * first (how often, the last error of the disk), then what ran out of memory.
 * @return what `body` returns
 */
template <typename Body>
decltype(auto) explaining_spill_failures(spill_store const& store, Body&& body) {
  try {
    return body();
  } catch (out_of_memory const& failure) {
    auto const spilled = store.statistics();
    if (spilled.write_errors == 0) {
      throw;
    }
    std::string message = "spilling to disk failed " + std::to_string(spilled.write_errors) +
                          " time(s), last: " + spilled.last_error;
    if (!spilled.last_disk_error.empty() && spilled.last_disk_error != spilled.last_error) {
      message += "; the last error of the disk: " + spilled.last_disk_error;
    }
    throw io_error(message + "; then memory ran out: " + failure.what());
  }
}

}  // namespace spillway
