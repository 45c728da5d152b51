/**
 * @file parquet.hpp
 * @brief Apache Parquet read (streaming, over a dataset of files) and write, through Arrow C++.
 *
 * Declared in every build; without Arrow each function throws `spillway::not_supported`.
 * Types map both ways: BOOL8 ↔ boolean, INTn/UINTn ↔ the same
 * integers, FLOAT32/64 ↔ float/double, TIMESTAMP ↔ timestamp (same unit, no time zone; Parquet
 * stores second timestamps as milliseconds, read back as milliseconds), STRING ↔ large_string
 * (string and large_string are both read, and `column_schema::storage` says which a column was;
 * `batch_writer_options::schema` writes a column as string).
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spillway {

/** @brief How a Parquet dataset is read. */
/// A Parquet reader has Arrow decode a batch of `parquet_read_options::target_batch_bytes` in
/// about this many pieces, each sized by what its columns decode to: the rows decoded past a
/// batch, kept for the next, are at most one piece.
inline constexpr std::size_t PARQUET_DECODE_PIECES = 4;

struct parquet_read_options {
  std::vector<std::string> columns;         ///< columns to read, in this order; empty: all
  std::size_t target_batch_bytes = 64_MiB;  ///< about the size of each batch `next()` returns
  /// Decode the columns of a batch at once on Arrow's CPU thread pool; `next()` still returns
  /// the whole batch. Arrow's allocations then come from `mrs.temporary()` on those threads,
  /// outside the caller's task: a temporary resource under the OOM protocol (a
  /// `retry_resource_adaptor`) neither charges them to the task nor blocks or retries them (a
  /// refusal is an `out_of_memory` after one spill). Set false to keep every allocation on the
  /// calling thread. The batches (`mrs.output()`) are always allocated on the calling thread. A
  /// Parquet file of 50 columns decoded on one thread was the critical path of its sort.
  bool parallel_columns = true;
};

/** @brief The compression of Parquet pages. */
enum class parquet_compression : std::uint8_t { NONE, SNAPPY, ZSTD };

/** @brief Dictionary encoding of Parquet columns. */
enum class parquet_dictionary : std::uint8_t {
  /// Per column, from a sample of the first write: off where more than half the sampled values
  /// are distinct (a dictionary would be about as large as the values, and building it costs a
  /// hash per value), on elsewhere (Arrow falls back to plain pages past 1 MiB of dictionary).
  AUTO,
  ON,   ///< every column (Arrow's default)
  OFF,  ///< no column
};

/**
 * @brief Encoding threads shared by several Parquet writers, and the row groups they may hold in
 * flight all together: encoding, or encoded and not yet appended to their files.
 *
 * A writer given them (`parquet_write_options::encoders`) encodes each row group on these threads
 * once it has one of the `groups` slots, appending its own oldest row groups to free one when
 * none is free; a writer without any row group in flight waits for another writer to append one.
 * Writers that each append their own row groups in order therefore always make progress, as long
 * as no writer's owner waits for another writer between its writes or before its close: a writer
 * holds its slots until its own writes or close append their row groups. What a shuffle's partition
 * writers share: one writer's row groups encode on every core while its owner fills the next,
 * and the memory they take is bounded for all writers at once, not per writer.
 * @note Thread-safe; it outlives no writer it was given to (they keep what they use alive).
 */
class parquet_encoders {
 public:
  struct state;  ///< the threads and slots (defined where Parquet is written)

  /**
   * @param threads encoding threads (at least 1)
   * @param groups row groups in flight at most, all writers together (at least 1)
   * @throws spillway::invalid_argument for 0 threads or groups
   */
  parquet_encoders(std::size_t threads, std::size_t groups);

  [[nodiscard]] std::size_t threads() const noexcept { return threads_; }
  [[nodiscard]] std::size_t groups() const noexcept { return groups_; }
  /// The threads and slots; null in a build without Arrow (its writers fail before using them).
  [[nodiscard]] std::shared_ptr<state> const& shared() const noexcept { return state_; }

 private:
  std::size_t threads_;
  std::size_t groups_;
  std::shared_ptr<state> state_;
};

/** @brief How a Parquet file is written. */
struct parquet_write_options {
  parquet_compression compression = parquet_compression::ZSTD;  ///< page compression
  std::size_t row_group_rows      = 1U << 20U;                  ///< most rows in one row group
  /// Most bytes (as tables in memory) in one row group. Successive writes fill one row group
  /// until it reaches either limit; its encoded pages are held in memory until it is complete.
  std::size_t row_group_bytes = 64_MiB;
  /// Threads (a pool of this writer's own) that encode and compress up to this many row groups
  /// at once, each as a Parquet file of its own in memory whose bytes are then moved into the
  /// file in order (offsets, page indexes and footers rewritten), while the writing thread goes
  /// on; 0: the writing thread alone, row group after row group, with the page indexes at the
  /// end of the file. Files written with 1 or more threads are laid out alike, byte for byte.
  /// A sorted key column is one column chunk per row group: encoded on one thread, it was most
  /// of a sort's output time.
  std::size_t encode_threads = 0;
  /// Threads and row group slots shared with other writers (see parquet_encoders): when set, the
  /// row groups are encoded on them, as with `encode_threads` (laid out alike), and the number in
  /// flight is theirs; `encode_threads` is then not used.
  std::shared_ptr<parquet_encoders> encoders;
  parquet_dictionary dictionary = parquet_dictionary::AUTO;  ///< see parquet_dictionary
  /// Host memory the row groups in flight may take: the one being filled and those encoding,
  /// each about twice its table in memory (Arrow's arrays and its encoded pages). The writer
  /// lowers `encode_threads` (to at least one, when asked for any) while row groups of 4 MiB
  /// do not fit, then `row_group_bytes` until they do (`parquet_write_options_within`): under
  /// 16 MiB (8 MiB without encode threads) row groups are cut below 4 MiB, to at least 64 KiB;
  /// only a bound under 256 KiB (128 KiB) is exceeded. With `encoders`, whose slots bound the
  /// row groups in flight, it bounds the one being filled: `row_group_bytes` is cut to half of
  /// it (at least 64 KiB). 0: unbounded, both taken as they are.
  std::size_t memory_bytes = 0;
};

/// The row groups `parquet_write_options::memory_bytes` keeps, with fewer encode threads, before
/// it cuts them smaller.
inline constexpr std::size_t PARQUET_LEAST_BOUNDED_ROW_GROUP_BYTES = 4_MiB;
/// The least row group `parquet_write_options::memory_bytes` cuts a writer's row groups to.
inline constexpr std::size_t PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES = 64_KiB;

/**
 * @return `options` with `encode_threads` and `row_group_bytes` as the writer takes them under
 * `options.memory_bytes`: `t` threads, at most `encode_threads` and at most one fewer than the
 * row groups of 4 MiB that fit twice in the bound (at least 1 when `encode_threads` is), then
 * row groups of `memory_bytes / (2 (t + 1))` bytes, at most `row_group_bytes` and at least
 * 64 KiB (or `row_group_bytes` when that is smaller); `options` itself when `memory_bytes` is 0
 */
parquet_write_options parquet_write_options_within(parquet_write_options options);

/**
 * @brief Opens the Parquet files of `source` (a file, directory or glob; see `expand_dataset`)
 * for streaming. Arrow's own allocations come from `mrs.temporary()`, batches from `mrs.output()`.
 * @throws spillway::io_error for a missing or unreadable file, spillway::corruption_error for a
 * file that is not valid Parquet, spillway::invalid_argument for an unknown column, and
 * spillway::not_supported for a column type spillway lacks; each names the file (and column)
 */
std::unique_ptr<batch_reader> open_parquet(std::string const& source,
                                           parquet_read_options const& options,
                                           stream_view stream,
                                           memory_resources mrs);

/** @brief Consecutive row groups [first, end) of one Parquet file, and the rows they hold. */
struct parquet_row_groups {
  std::string path;
  std::size_t first = 0;  ///< the first row group
  std::size_t end   = 0;  ///< one past the last row group
  /// Rows in these row groups, as `split_parquet` counts them (`open_parquet` does not use it).
  std::uint64_t rows = 0;

  bool operator==(parquet_row_groups const&) const = default;
};

/**
 * @brief Cuts the row groups of `files` (in this order) into `parts` shares of about equal rows,
 * from their footers alone: each share is a run of consecutive row groups (one entry per file it
 * touches), share k holding the row groups whose middle row is among rows [k T / parts,
 * (k + 1) T / parts) of the T rows in all (by position when T is 0). Every row group is in
 * exactly one share, and reading the shares in order reads the files in order. A share may be
 * empty (fewer row groups than parts). What ranks use to share a dataset evenly, however many
 * files it has: rank k reads share k.
 * @throws invalid_argument when `parts` is 0; spillway::io_error and spillway::corruption_error
 * as `open_parquet`
 */
std::vector<std::vector<parquet_row_groups>> split_parquet(std::vector<std::string> const& files,
                                                           std::size_t parts);

/**
 * @return the rows of every row group of each of `files` (`[f][g]`: row group g of files[f]),
 * from their footers alone
 * @throws spillway::io_error and spillway::corruption_error as `open_parquet`
 */
std::vector<std::vector<std::uint64_t>> parquet_row_group_rows(
  std::vector<std::string> const& files);

/**
 * @brief Estimates the bytes of Parquet pages that one reader of `files` holds beside the
 * batches it decodes, from the footers alone: for each leaf column, a compressed and a
 * decompressed page of at most the column's largest chunk (uncompressed) and at most 1 MiB (the
 * page size of common writers), summed over the columns; the most of any file (of at most 16,
 * spread over a longer list).
 * @param files Parquet files (none: 0)
 * @return the estimate in bytes
 * @throws spillway::io_error and spillway::corruption_error as `open_parquet`
 */
std::size_t parquet_decode_scratch_bytes(std::vector<std::string> const& files);

/**
 * @brief `split_parquet` from row counts already read (`parquet_row_group_rows`, or gathered from
 * other ranks, each of which read the footers of some of the files): a pure function of its
 * arguments, so every rank that has the same counts cuts the same shares.
 * @throws invalid_argument when `parts` is 0 or `rows` has not one entry per file
 */
std::vector<std::vector<parquet_row_groups>> split_row_groups(
  std::vector<std::string> const& files,
  std::vector<std::vector<std::uint64_t>> const& rows,
  std::size_t parts);

/**
 * @brief Opens the row groups `pieces` (in order) for streaming, as `open_parquet` opens files.
 * @throws invalid_argument when `pieces` is empty or names row groups a file lacks; otherwise as
 * `open_parquet`
 */
std::unique_ptr<batch_reader> open_parquet(std::vector<parquet_row_groups> const& pieces,
                                           parquet_read_options const& options,
                                           stream_view stream,
                                           memory_resources mrs);

/** @brief Reads all of `source` into one table. @see open_parquet */
std::unique_ptr<table> read_parquet(std::string const& source,
                                    parquet_read_options const& options,
                                    stream_view stream,
                                    memory_resources mrs);

/**
 * @brief Writes `input` with column names `names` to the Parquet file `path`, through a
 * temporary name that is renamed at the end (no partial file on failure).
 * @throws spillway::invalid_argument when `names` does not match the columns, spillway::io_error
 * when the file cannot be written
 */
void write_parquet(table_view const& input,
                   std::vector<std::string> const& names,
                   std::string const& path,
                   parquet_write_options const& options,
                   stream_view stream,
                   memory_resources mrs);

}  // namespace spillway
