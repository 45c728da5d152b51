/**
 * @file csv.hpp
 * @brief CSV with a header row: read (type inference or a given schema) and write. The
 * universal fallback format; it needs no Arrow.
 *
 * Text form of each type, which the reader parses back:
 * - integers in decimal; BOOL8 as `true`/`false`;
 * - FLOAT32/FLOAT64 in the shortest form that parses back to the same value (`std::to_chars`),
 *   `nan`, `inf`, `-inf`;
 * - TIMESTAMP as ISO 8601 UTC without a zone, `1970-01-01T00:00:00`, with exactly 3, 6 or 9
 *   fraction digits for ms, us and ns, so the unit is recovered too;
 * - STRING as is, quoted (`"` doubled) when it holds the delimiter, a quote, CR, LF, or is empty;
 * - null as an empty unquoted field (so an empty string and a null differ: `""` vs nothing).
 *
 * Round trips: with the writer's schema given to the reader every type round trips exactly.
 * With inference, a column becomes BOOL8, INT64, UINT64, FLOAT64, TIMESTAMP (unit from the most
 * fraction digits) or STRING, the first that parses every value of the column in every file of
 * the dataset: the reader reads the whole dataset once to decide, before its first batch, so the
 * schema does not depend on the batch size and no later value can contradict it. Narrower
 * integers and FLOAT32 come back widened, and digit-only strings as numbers. An integer never
 * becomes a FLOAT64 that would round it: a column of integers beyond INT64 is UINT64 when they
 * all fit, else STRING, as is a column mixing fractions with integers of more than 53 bits.
 * `csv_read_options::column_types` gives the type of any column instead (a digit-only code as
 * STRING, say), and spares the first pass when it names every column.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/memory_resources.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace spillway {

/** @brief How a CSV dataset is read. */
struct csv_read_options {
  /** the columns' types by name (every column of the header, in its order); none: inferred */
  std::optional<table_schema> schema;
  /**
   * types of some columns by name (any order), taken as given; every other column's type is
   * inferred from all of its values. Empty with `schema`.
   */
  table_schema column_types;
  std::vector<std::string> columns;         ///< columns to return, in this order; empty: all
  char delimiter                 = ',';     ///< the field separator
  std::size_t target_batch_bytes = 64_MiB;  ///< about the size of each batch `next()` returns
};

/** @brief How a CSV file is written. */
struct csv_write_options {
  char delimiter = ',';  ///< the field separator
};

/**
 * @brief Opens the CSV files of `source` (a file, directory or glob) for streaming. Raw text is
 * staged in `mrs.temporary()`, batches come from `mrs.output()`.
 * @throws spillway::io_error for a missing file, a header that differs between files, or a value
 * that does not parse as its column's type (naming file, line and column);
 * spillway::corruption_error for a stray quote or a row without one field per column;
 * spillway::invalid_argument for an unknown column (also in `column_types`) or a schema that does
 * not match the header
 */
std::unique_ptr<batch_reader> open_csv(std::string const& source,
                                       csv_read_options const& options,
                                       stream_view stream,
                                       memory_resources mrs);

/** @brief Reads all of `source` into one table. @see open_csv */
std::unique_ptr<table> read_csv(std::string const& source,
                                csv_read_options const& options,
                                stream_view stream,
                                memory_resources mrs);

/**
 * @brief Writes `input` with header `names` to `path`, through a temporary name renamed at the
 * end.
 * @throws spillway::invalid_argument when `names` does not match the columns, spillway::io_error
 * when the file cannot be written
 */
void write_csv(table_view const& input,
               std::vector<std::string> const& names,
               std::string const& path,
               csv_write_options const& options,
               stream_view stream,
               memory_resources mrs);

}  // namespace spillway
