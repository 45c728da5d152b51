/**
 * @file run_report.hpp
 * @brief Records a run over time (memory on each tier, leases, spills, retries, progress) and
 * writes it as one self-contained HTML report with SVG charts plus the same data as JSON.
 *
 * A `run_recorder` samples gauges given as callbacks on a background thread (and at start and
 * stop) and counts the events recorded into its `events()` sink, which components such as the
 * spill store take as `events`.
 */
#pragma once

#include <spillway/core/events.hpp>
#include <spillway/core/mutex.hpp>

#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <filesystem>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {

/**
 * @brief What a `run_recorder` samples. Every callback is optional (an empty one reads 0, or
 * for leases the estimate from lease events) and is called from the recorder's thread, so it
 * must be thread-safe.
 */
struct run_gauges {
  std::function<std::size_t()> device_bytes;  ///< bytes allocated on the device now
  std::function<std::size_t()> host_bytes;    ///< bytes on the host spill tier now
  std::function<std::size_t()> disk_bytes;    ///< bytes on the disk spill tier now
  /// leases held now; when empty: lease_granted minus lease_returned events
  std::function<std::size_t()> leases_granted;
  /// lease requests waiting now; when empty: estimated from wait-begin/granted/cancelled events
  std::function<std::size_t()> leases_waiting;
  std::function<std::size_t()> rows_done;   ///< rows processed so far
  std::function<std::size_t()> bytes_done;  ///< bytes processed so far
};

/** @brief One sample: gauges now and event counts so far (cumulative). */
struct run_sample {
  double seconds              = 0.0;  ///< since the recorder was made
  std::size_t device_bytes    = 0;
  std::size_t host_bytes      = 0;
  std::size_t disk_bytes      = 0;
  std::size_t leases_granted  = 0;
  std::size_t leases_waiting  = 0;
  std::size_t rows_done       = 0;
  std::size_t bytes_done      = 0;
  std::size_t spilled         = 0;  ///< SPILLED events so far
  std::size_t unspilled       = 0;  ///< UNSPILLED events so far
  std::size_t retries         = 0;  ///< OOM_RETRY events so far
  std::size_t splits          = 0;  ///< OOM_SPLIT events so far
  std::size_t spill_failures  = 0;  ///< SPILL_WRITE_FAILED and SPILL_READ_FAILED events so far
  std::size_t spilled_bytes   = 0;  ///< raw bytes of SPILLED events so far
  std::size_t unspilled_bytes = 0;  ///< raw bytes of UNSPILLED events so far
};

/** @brief How a `run_recorder` samples. */
struct run_recorder_options {
  /// the background thread's period; zero: no thread, only `sample_now()`, `start()`, `stop()`
  std::chrono::milliseconds interval{50};
  /// when more samples are kept, every other one is dropped and the period doubles
  std::size_t max_samples = 20000;
  /// at most this many spill, unspill and retry events are kept for the report's event list
  std::size_t max_events = 20000;
  std::string title      = "spillway run";  ///< the report's heading
};

/**
 * @brief Samples gauges over time and counts events; writes the run report.
 * @note Thread-safe: `events()` may be recorded into from any thread while sampling runs.
 * Not movable: components keep a pointer to `events()`.
 */
class run_recorder {
 public:
  explicit run_recorder(run_gauges gauges, run_recorder_options options = {});
  /** @brief Stops the thread (without a final sample when `stop()` was not called). */
  ~run_recorder();
  run_recorder(run_recorder const&)            = delete;
  run_recorder& operator=(run_recorder const&) = delete;
  run_recorder(run_recorder&&)                 = delete;
  run_recorder& operator=(run_recorder&&)      = delete;

  /** @return the sink to give components (spill store, coordinators) as their `events` */
  [[nodiscard]] event_sink& events() noexcept { return sink_; }

  /** @brief Takes a first sample and starts the background thread (when the interval is > 0). */
  void start();
  /** @brief Stops and joins the background thread, then takes a last sample. Idempotent. */
  void stop();
  /** @brief Takes one sample now, from the calling thread. @return it */
  run_sample sample_now();

  /** @return a copy of the samples so far, in time order */
  [[nodiscard]] std::vector<run_sample> samples() const;
  /** @return how many events of `kind` were recorded so far */
  [[nodiscard]] std::size_t count(event_kind kind) const noexcept;

  /** @return the report data as JSON text (samples as one array per series, event counts) */
  [[nodiscard]] std::string to_json() const;
  /** @return the report as one HTML document with inline SVG charts; no external resources */
  [[nodiscard]] std::string to_html() const;
  /**
   * @brief Writes `to_html()` to `html_path` and `to_json()` to `json_path`.
   * @throws spillway::io_error when a file cannot be written
   */
  void write_run_report(std::filesystem::path const& html_path,
                        std::filesystem::path const& json_path) const;

 private:
  /** @brief Counts events by kind; keeps the spill/unspill/retry ones up to a bound. */
  class counting_sink final : public event_sink {
   public:
    explicit counting_sink(std::size_t max_events) : max_events_(max_events) {}
    void record(event const& e) override;
    [[nodiscard]] std::size_t count(event_kind kind) const noexcept;
    [[nodiscard]] std::size_t bytes(event_kind kind) const noexcept;
    [[nodiscard]] std::size_t waits_ended() const noexcept;
    [[nodiscard]] std::vector<event> kept() const;

    /** @brief What one task did: when it held the device semaphore, and its counts. */
    struct task_lane {
      std::vector<std::pair<std::chrono::steady_clock::time_point,
                            std::chrono::steady_clock::time_point>>
        held;  ///< semaphore held, from acquire to release (at most `max_events` kept)
      std::optional<std::chrono::steady_clock::time_point> held_since;
      std::chrono::nanoseconds semaphore_wait{0};  ///< waited for the semaphore in all
      std::size_t acquires       = 0;
      std::size_t leases         = 0;
      std::size_t lease_waits    = 0;
      std::size_t lent_bytes     = 0;
      std::size_t borrowed_bytes = 0;
      std::size_t whole_device   = 0;
      std::size_t oom_spills     = 0;  ///< allocation failures resolved by spilling
      std::size_t retries        = 0;
      std::size_t splits         = 0;
    };
    /** @return each task's lane, by task id (events of no task are not in any) */
    [[nodiscard]] std::map<std::uint64_t, task_lane> lanes() const;

   private:
    static constexpr std::size_t KINDS = 32;
    std::array<std::atomic<std::size_t>, KINDS> counts_{};
    std::array<std::atomic<std::size_t>, KINDS> bytes_{};
    std::atomic<std::size_t> waits_ended_{0};
    std::size_t const max_events_;
    mutable mutex mutex_;
    std::vector<event> kept_ SPILLWAY_GUARDED_BY(mutex_);
    std::map<std::uint64_t, task_lane> lanes_ SPILLWAY_GUARDED_BY(mutex_);
  };

  void run_thread();
  [[nodiscard]] run_sample take_sample() const;

  run_gauges const gauges_;
  run_recorder_options const options_;
  std::chrono::steady_clock::time_point const origin_;
  counting_sink sink_;

  mutable mutex mutex_;
  std::vector<run_sample> samples_ SPILLWAY_GUARDED_BY(mutex_);
  std::chrono::milliseconds interval_ SPILLWAY_GUARDED_BY(mutex_);
  bool stopping_ SPILLWAY_GUARDED_BY(mutex_) = false;
  bool stopped_ SPILLWAY_GUARDED_BY(mutex_)  = false;
  std::condition_variable wake_;
  std::thread thread_;
};

}  // namespace spillway
