/**
 * @file codec_advisor.hpp
 * @brief Whether compressing spill blocks on their way to disk pays, from what compressing,
 * decompressing, writing and reading have measured so far. Private to the spill layer.
 *
 * A block written raw costs `W + R` per byte (write and read time per stored byte). Compressed
 * at ratio `r` it costs `C + D + (W + R) / r` per raw byte (compress and decompress time). When
 * the disk is a page cache that absorbs writes at memory speed, the codec costs more than it
 * saves; when writes reach a slow disk (or the kernel throttles dirty pages), it saves more than
 * it costs. Estimates are moving averages over the last blocks, so the choice follows the disk.
 */
#pragma once

#include <spillway/core/mutex.hpp>

#include <chrono>
#include <cstddef>
#include <cstdint>

namespace spillway::detail {

/**
 * @brief Decides block by block whether the disk codec is tried and whether its result is kept.
 * @note Thread-safe: I/O threads record and ask concurrently.
 */
class codec_advisor {
 public:
  /// A block that does not pay is followed by 1, 2, 4, ... up to this many blocks written raw
  /// untried; then the codec is tried again, so that its estimates stay fresh.
  static constexpr std::uint32_t MAX_SKIP = 64;
  /// Weight of the newest sample in each moving average.
  static constexpr double NEWEST_WEIGHT = 0.25;

  /**
   * @param min_ratio a compressed block is kept only when it is at most 1/min_ratio of its raw
   * size (at least 1)
   * @param by_cost also only when the measured costs say it pays (see the file comment); false
   * keeps every block that passes `min_ratio`
   */
  codec_advisor(double min_ratio, bool by_cost) noexcept;

  /// @return whether to compress the next block; false: write it raw untried
  [[nodiscard]] bool try_next();
  /**
   * @brief Records one compression of `raw` bytes into `stored` bytes that took `time`.
   * @return whether to keep the compressed block (else the block is written raw)
   */
  [[nodiscard]] bool keep(std::size_t raw, std::size_t stored, std::chrono::nanoseconds time);
  /// Records the write of `stored` bytes of a block (raw or compressed) to disk.
  void wrote(std::size_t stored, std::chrono::nanoseconds time);
  /// Records the read of `stored` bytes of a block from disk.
  void read(std::size_t stored, std::chrono::nanoseconds time);
  /// Records the decompression of a block into `raw` bytes.
  void decompressed(std::size_t raw, std::chrono::nanoseconds time);

 private:
  /// A moving average of nanoseconds per byte; unset until its first sample.
  struct rate {
    double ns_per_byte = 0.0;
    bool known         = false;
    void add(std::size_t bytes, std::chrono::nanoseconds time) noexcept;
  };
  /// Whether compressing at `ratio` pays by the estimates (true while the disk is unmeasured).
  [[nodiscard]] bool pays(double ratio) const SPILLWAY_REQUIRES(mutex_);
  /// The next blocks skip the codec.
  void back_off() SPILLWAY_REQUIRES(mutex_);

  double const min_ratio_;
  bool const by_cost_;
  mutable mutex mutex_;
  rate compress_ SPILLWAY_GUARDED_BY(mutex_);
  rate decompress_ SPILLWAY_GUARDED_BY(mutex_);
  rate write_ SPILLWAY_GUARDED_BY(mutex_);
  rate read_ SPILLWAY_GUARDED_BY(mutex_);
  std::uint32_t skip_ SPILLWAY_GUARDED_BY(mutex_)    = 0;
  std::uint32_t backoff_ SPILLWAY_GUARDED_BY(mutex_) = 0;
};

}  // namespace spillway::detail
