/**
 * @file batch_reader.hpp
 * @brief The streaming interface every file reader implements: batches of about a target size.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <functional>
#include <memory>

namespace spillway {

/**
 * @brief Hands out a dataset's rows as tables of about `target_batch_bytes` each, in file order.
 *
 * A dataset's files must all share one schema. A
 * batch can be smaller than the target at the end of the data (CSV: at the end of each file), and
 * larger when one row alone is.
 * Batches are allocated from the `memory_resources::output()` given when the reader was opened.
 * @note Not thread-safe: one consumer at a time.
 */
class batch_reader {
 public:
  batch_reader()                               = default;
  virtual ~batch_reader()                      = default;
  batch_reader(batch_reader const&)            = delete;
  batch_reader& operator=(batch_reader const&) = delete;
  batch_reader(batch_reader&&)                 = delete;
  batch_reader& operator=(batch_reader&&)      = delete;

  /** @return the columns every batch has */
  [[nodiscard]] virtual table_schema const& schema() const noexcept = 0;

  /**
   * @return the next batch, or null when every row has been returned
   * @throws spillway::io_error when a file cannot be read, spillway::corruption_error when its
   * contents are malformed (the message names the file)
   */
  [[nodiscard]] virtual std::unique_ptr<table> next() = 0;
};

/**
 * @brief A reader that reads `source` one batch ahead on a thread of its own, so that decoding
 * the next batch overlaps whatever the caller does with this one.
 *
 * `source` must allocate from resources any thread may use (host memory, not a task's device
 * budget). A failure of the read ahead is thrown by the `next()` that would have returned its
 * batch, and by every later one.
 */
std::unique_ptr<batch_reader> read_ahead(std::unique_ptr<batch_reader> source);

/// Opens piece `index` of a dataset for reading (called on a reading thread).
using piece_opener = std::function<std::unique_ptr<batch_reader>(std::size_t index)>;

/**
 * @brief A reader of `pieces` pieces of one dataset read side by side: each of `threads` threads
 * (at most one per piece) takes the next piece no thread has taken, opens it with `open`, and
 * reads its batches; `next()` returns batches in the order they are ready, so each piece's
 * batches come in order but the pieces' batches interleave. At most `max_ready` batches wait to
 * be taken, so that the reader holds at most `max_ready + threads` batches at once.
 *
 * Each piece's reader must return batches of `schema` (`open` may throw when it does not) and
 * allocate from resources any thread may use (host memory, not a task's device budget). The first
 * failure (of `open` or of a read) is thrown by the next `next()` and by every later one; the
 * threads stop at their next batch.
 * @throws invalid_argument when `open` is empty or `threads` or `max_ready` is 0
 */
std::unique_ptr<batch_reader> read_in_parallel(table_schema schema,
                                               std::size_t pieces,
                                               piece_opener open,
                                               std::size_t threads,
                                               std::size_t max_ready);

/**
 * @brief Reads every remaining batch of `reader` into one table from `mrs.output()`; the batches
 * themselves are freed as they are consumed.
 */
std::unique_ptr<table> read_all(batch_reader& reader, stream_view stream, memory_resources mrs);

}  // namespace spillway
