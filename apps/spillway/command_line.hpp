/**
 * @file command_line.hpp
 * @brief What the subcommands of the `spillway` tool share: the error model (exit codes, the
 * one-line message), byte sizes, `--by` key lists and opening an input dataset of any format.
 */
#pragma once

#include <spillway/io/batch_reader.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/ops/sort_order.hpp>

#include <array>
#include <cstddef>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace spillway::cli {

/// A read batch (and an output batch) is at most this fraction of a rank's device.
inline constexpr std::size_t DEVICE_SHARE_PER_BATCH = 8;
/// The smallest `--host-memory`: below it the spill store's staging pieces leave too little
/// room beside the host tier's other buffers, and a device full of shards may find no room to
/// stage its next spill to disk (two ranks on a 2 MiB device failed so at 64 KiB, and at
/// 256 KiB in 1 of 12 runs of one case; none of 30 at 1 MiB).
inline constexpr std::size_t MIN_HOST_BUDGET = std::size_t{1} << 20U;

/// A sorted output batch is at most this fraction of a rank's host budget: two of them are on the
/// host at once (one copied off the device, one being encoded) beside the writer's row groups.
inline constexpr std::size_t HOST_SHARE_PER_OUTPUT = 8;
/// Input readers and the batches read hold at most READER_HOST_SHARE of the host budget, so that
/// the spill store's host tier keeps room for what it spills and reads back while they read.
inline constexpr double READER_HOST_SHARE = 0.75;
/// The host budget never cuts a read batch below this (nor grows one to it): smaller batches cost
/// more per row (more chunks, more of the spill store's catalog) than they save. A 20-column sort
/// at 64 MiB + 64 MiB took 10-15% longer and peaked 7-10 MiB higher in 4 MiB batches than in
/// 8 MiB ones. A budget this tight is warned about after the run instead.
inline constexpr std::size_t MIN_HOST_BATCH = std::size_t{8} << 20U;

/**
 * @return `batch_bytes`, or the largest batch below it of which `batches_held` (the batches a
 * command holds on the host at once, each counted in full) and `scratch` (its readers' own)
 * together fit in READER_HOST_SHARE of `host_memory`; never below min(`batch_bytes`,
 * MIN_HOST_BATCH). A batch sized by the device alone (a share of it) could hold more than the
 * whole host budget when the device is the larger.
 */
std::size_t batch_within_host(std::size_t batch_bytes,
                              std::size_t host_memory,
                              double batches_held,
                              std::size_t scratch);

/**
 * @brief Refuses a `--host-memory` below `MIN_HOST_BUDGET`.
 * @throws usage_error naming the flag and the minimum
 */
void check_host_budget(std::size_t host_memory);

/**
 * @brief Says on stderr, after `command`'s summary, that the host held up to `over` bytes past
 * `--host-memory host_flag` (`host_memory` bytes) at its peak (`host_over_budget_peak`: what the
 * readers, the writers and the spill store's bookkeeping held while nothing more could spill),
 * and a budget to try instead (twice the excess more: the store's own share grows with it);
 * nothing when `over` is 0.
 */
void warn_past_host_budget(std::string_view command,
                           std::size_t over,
                           std::string const& host_flag,
                           std::size_t host_memory);

/** @brief The process exit status of every subcommand. */
enum class exit_code : int {
  OK      = 0,  ///< the command did what it was asked
  FAILURE = 1,  ///< a runtime failure (I/O, corruption, memory) or a failed verification
  USAGE   = 2,  ///< the command line is wrong: a flag, a value, a column, a budget
};

/**
 * @brief A mistake in the command line found after parsing (a value, a column, a budget).
 * main() prints its message and exits with `exit_code::USAGE`.
 */
class usage_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/**
 * @brief A verification that found the data wrong; main() exits with `exit_code::FAILURE`.
 */
class verification_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/**
 * @brief The message of a library exception without its "spillway failure at file:line (fn): "
 * prefix, so that the one-line error says what failed and where (the path), not the call site.
 */
std::string user_message(std::string_view what);

/**
 * @brief Parses a byte size given to `flag` ("512MiB", "2GiB", "4096").
 * @throws usage_error naming the flag and the text when it is not a size or is zero
 */
std::size_t parse_size_flag(std::string_view flag, std::string_view text);

/** @return the strategy named by `--strategy` ("merge", "sample"; anything else: AUTO) */
sort_strategy parse_strategy(std::string_view name);

/// The choices of `--compression`, the Parquet page compression of a command's output.
inline constexpr std::array<char const*, 3> COMPRESSION_NAMES{"none", "snappy", "zstd"};
/// Snappy, as DuckDB, Spark and pandas write by default: zstd makes the wide table's files 40%
/// smaller (354 against 576 MB), but zstd in the writer, snappy in the reader and memmove took
/// about 40% of that sort's time (7843efc:docs/BENCHMARKS.md, "Third run").
inline constexpr char const* DEFAULT_COMPRESSION = "snappy";

/// Most `--threads` accepted.
inline constexpr std::size_t MAX_THREADS = 1024;
/// Tasks that hold the device at once by default (as spark-rapids' concurrentGpuTasks).
inline constexpr std::size_t DEFAULT_DEVICE_TASKS = 2;

/**
 * @brief Sizes the worker pool to `--threads` (0: the cores this process may use), and Arrow's
 * CPU and I/O thread pools to match. A sort's Parquet output is encoded on as many threads (two
 * at the least, see parquet_write_options): the merges are mostly done by then, and encoding is
 * most of a wide sort's output time. Call it before any other work.
 * @return the threads of the worker pool
 */
std::size_t use_worker_threads(std::size_t threads);

/// Freed blocks of a command's I/O scratch (decoded input batches, Arrow's decoding buffers,
/// output copies) kept mapped for the next ones, per rank: without it each fresh block cost a
/// page fault and a cleared page per 4 KiB; the sort of 50M string keys took 1.9M faults
/// and 8.6-8.9 s, with it 1.0M and 7.8-8.5 s (7843efc:docs/BENCHMARKS.md, "Eighth run"). On the
/// emulated device, `sort` and `shuffle` put their scratch in the environment's host instead, whose
/// cache the device shares; this sizes the scratch on a GPU, `gen`'s and `verify`'s, and the hosts
/// for control messages and keys.
inline constexpr std::size_t IO_SCRATCH_CACHE_BYTES = std::size_t{512} << 20;

/// The formats a command writes (`--output-format` of sort and shuffle, `--format` of gen):
/// Parquet, the Arrow IPC file format (which holds every type spillway reads: intervals and
/// dictionaries of nested values too), or CSV (which a build without Arrow writes too).
inline constexpr std::array<char const*, 3> OUTPUT_FORMAT_NAMES{"parquet", "arrow", "csv"};

/**
 * @return the output format named by one of OUTPUT_FORMAT_NAMES ("arrow": ARROW_IPC_FILE, "csv";
 * anything else: PARQUET)
 */
file_format parse_output_format(std::string_view name);

/** @return the compression named by `--compression` ("none", "zstd"; anything else: SNAPPY) */
parquet_compression parse_compression(std::string_view name);

/// The help of `--csv-types`, which `sort` and `shuffle` take.
inline constexpr char const* CSV_TYPES_HELP =
  "CSV input: column types, col:type,... (bool8, int8-64, uint8-64, float32, float64, "
  "timestamp[s|ms|us|ns], date32, date64, time32[s|ms], time64[us|ns], duration[s|ms|us|ns], "
  "decimal32|64|128|256(precision,scale), string); other columns' types are inferred from every "
  "value";

/** @brief One entry of `--by`: a column name with its direction and null placement. */
struct key_spec {
  std::string name;       ///< the column's name
  column_order ordering;  ///< ascending/descending, nulls first/last
};

/**
 * @brief Parses `col[:asc|desc][:nulls_first|nulls_last],...`; the two qualifiers may come in
 * either order. Defaults: ascending, nulls first.
 * @throws usage_error for an empty list, an empty name or an unknown qualifier
 */
std::vector<key_spec> parse_sort_keys(std::string_view text);

/** @brief Key columns resolved against a schema, ready for the sorter. */
struct resolved_keys {
  std::vector<std::size_t> columns;  ///< indices into the schema, in key order
  sort_order orders;                 ///< one per key column
};

/**
 * @brief Looks every key up in `schema`.
 * @param source the dataset the schema belongs to (named in the message)
 * @throws usage_error naming the column, the dataset and the columns it has, for an unknown key
 */
resolved_keys resolve_sort_keys(std::vector<key_spec> const& keys,
                                table_schema const& schema,
                                std::string const& source);

/**
 * @brief The format named by `--format` ("parquet", "csv", "arrow", "arrows"), or when empty
 * the format of `source`'s extension (for a directory: of its first file).
 * @throws usage_error for an unknown format name or an extension that names none
 */
file_format resolve_format(std::string const& source, std::string const& format_flag);

/**
 * @brief Parses `--csv-types`: `col:type,...`, each type as `to_string(data_type)` names it
 * (bool8, int8 to int64, uint8 to uint64, float32, float64, timestamp[s|ms|us|ns], string). A
 * name is all before its last `:`.
 * @param format the input's format: the flag is for CSV input only
 * @return the types by name; none for an empty `text`
 * @throws usage_error for an entry without a name or type, an unknown type, a column named twice,
 * or types given for input other than CSV
 */
table_schema parse_csv_types(std::string_view text, file_format format);

/**
 * @brief Opens `source` (a file, a directory or a glob) for streaming in batches of about
 * `target_batch_bytes`; batches come from `mrs.output()`, the readers' scratch from
 * `mrs.temporary()`, copies to a device are ordered on `stream`.
 * @param csv_types CSV: the types of these columns (`parse_csv_types`); the others' are inferred
 * from the whole dataset
 * @throws spillway::io_error, spillway::corruption_error (see the io readers); usage_error for a
 * column of `csv_types` that the input lacks
 */
std::unique_ptr<batch_reader> open_dataset(std::string const& source,
                                           file_format format,
                                           std::size_t target_batch_bytes,
                                           memory_resources mrs,
                                           stream_view stream            = default_stream(),
                                           table_schema const& csv_types = {});

/// A Parquet dataset read by several readers is cut into this many pieces per reader, so that a
/// reader done early takes another piece rather than idle while the others finish theirs.
inline constexpr std::size_t PIECES_PER_READER = 2;

/**
 * @brief Opens `source` as `open_dataset` does and reads it ahead of its consumer, on threads of
 * its own: a Parquet dataset's row groups in pieces of about equal rows (`split_parquet`), up to
 * `readers` pieces at once (`read_in_parallel`: each piece's batches in order, the pieces'
 * interleaved, at most `readers + 1` batches held); any other format, or `readers` 1, one batch
 * ahead in order (`read_ahead`). `readers_used`, when not null, is set to the readers it uses
 * (fewer than `readers` when the dataset has fewer row groups than two pieces need).
 * @throws as `open_dataset`; later, from `next()`, invalid_argument naming both files when a
 * piece's file has other columns than the dataset's first file
 */
std::unique_ptr<batch_reader> read_dataset_ahead(std::string const& source,
                                                 file_format format,
                                                 std::size_t target_batch_bytes,
                                                 memory_resources mrs,
                                                 stream_view stream,
                                                 table_schema const& csv_types,
                                                 std::size_t readers,
                                                 std::size_t* readers_used = nullptr);

/**
 * @return the output batch (from 0) that the sort hands out reversed before its order check, as
 * `SPILLWAY_TEST_REVERSE_OUTPUT_BATCH=<n>` says: how the tests see a sort fail that check
 */
std::optional<std::size_t> testing_reverse_output_batch();

}  // namespace spillway::cli
