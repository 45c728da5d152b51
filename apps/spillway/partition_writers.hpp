/**
 * @file partition_writers.hpp
 * @brief The writers of a shuffle's partitions: the caller writes one partition after another,
 * and each finished writer is closed (its last row groups encoded, its files renamed) on a thread
 * of its own while the caller goes on to the next partition.
 */
#pragma once

#include <spillway/io/batch_writer.hpp>

#include <cstddef>
#include <deque>
#include <future>
#include <memory>
#include <string>
#include <vector>

namespace spillway::cli {

/// Partition writers open at once at most: the one being written and those closing (one more
/// closing while the caller waits, with none being written).
inline constexpr std::size_t PARTITION_WRITERS = 8;

/**
 * @brief The Parquet options of a rank's partition writers, which together take at most
 * `writers_bytes`: row groups of a 32nd of it (64 KiB to 64 MiB), whatever the threads, so that
 * a partition's files are laid out alike (the same row groups) on any machine; each open
 * writer's row group being filled, and the row groups encoding or waiting to be appended (twice
 * their rows: Arrow's arrays and the encoded pages) in slots shared by all of them, on up to
 * `threads` threads.
 */
[[nodiscard]] parquet_write_options partition_parquet_options(std::size_t writers_bytes,
                                                              std::size_t threads);

/**
 * @brief Closes partition writers in the background, at most `at_once` at a time.
 *
 * A shuffle reads its partitions one at a time (their shards come in map order, one reader at a
 * time), and a partition's rows are copied into its writer quickly; its Parquet encoding is what
 * takes the time. Closing each writer on a thread of its own lets the encodings of several
 * partitions run beside the reading of the next one.
 * @note One thread calls it; each writer is used by one thread at a time (the caller's, then its
 * closing thread).
 */
class partition_writers {
 public:
  /** @param at_once writers closing at once at most; 0: each is closed by `close` itself */
  explicit partition_writers(std::size_t at_once) : at_once_(at_once) {}
  /** @brief Waits for every close still running (their failures are dropped: `finish` throws). */
  ~partition_writers();
  partition_writers(partition_writers const&)            = delete;
  partition_writers& operator=(partition_writers const&) = delete;

  /**
   * @brief Closes `writer` on a thread of its own, then waits for the oldest closes while more
   * than `at_once` are running (never before: see parquet_encoders).
   * @throws what the oldest close threw, or std::system_error when no thread can be started
   */
  void close(std::unique_ptr<batch_writer> writer);

  /**
   * @brief Waits for every close.
   * @return the paths of every writer's files, in the order the writers were given
   * @throws what the first failing close threw (the others are still waited for)
   */
  std::vector<std::string> finish();

 private:
  /// Waits for the oldest close and takes its paths.
  void wait_oldest();

  std::size_t at_once_;
  std::deque<std::future<std::vector<std::string>>> closing_;
  std::vector<std::string> paths_;
};

}  // namespace spillway::cli
