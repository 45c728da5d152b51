/**
 * @file report_gauges.hpp
 * @brief What `--report` samples of a command's run: the bytes on each tier of its device
 * environment, and how far it has got.
 */
#pragma once

#include <spillway/runtime/device_environment.hpp>
#include <spillway/runtime/run_report.hpp>

#include <chrono>
#include <cstddef>
#include <functional>

namespace spillway::cli {

/// How often `--report` samples memory, leases and events.
constexpr std::chrono::milliseconds REPORT_PERIOD{50};

/**
 * @return gauges of the bytes on the device, the host tier and the disk tier of `environment()`,
 * and of the rows and bytes done so far. The recorder calls them from its own thread once it is
 * started, so the environment must be made before `run_recorder::start()` and outlive
 * `run_recorder::stop()`, and `rows_done` and `bytes_done` must be thread-safe.
 */
run_gauges environment_gauges(std::function<device_environment&()> environment,
                              std::function<std::size_t()> rows_done,
                              std::function<std::size_t()> bytes_done);

/** @brief Stops a recorder's sampling thread before what its gauges read is destroyed. */
struct recorder_stopper {
  explicit recorder_stopper(run_recorder* r) : recorder(r) {}
  run_recorder* recorder;
  ~recorder_stopper() {
    if (recorder != nullptr) {
      recorder->stop();
    }
  }
  recorder_stopper(recorder_stopper const&)            = delete;
  recorder_stopper& operator=(recorder_stopper const&) = delete;
  recorder_stopper(recorder_stopper&&)                 = delete;
  recorder_stopper& operator=(recorder_stopper&&)      = delete;
};

}  // namespace spillway::cli
