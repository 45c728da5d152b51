/**
 * `spillway gen`: deterministic Parquet datasets.
 *
 * Every value is a function of (seed, row, column) only (a counter-based generator), so a dataset
 * is the same whatever the batch and file sizes, and a row can be regenerated alone.
 */
#include "command_line.hpp"
#include "commands.hpp"
#include "output_directory.hpp"
#include "preflight.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/size_estimate.hpp>
#include <spillway/table/table.hpp>

#include <algorithm>
#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::cli {
namespace {

/// Rows generated and written at a time.
constexpr std::size_t BATCH_ROWS = std::size_t{1} << 20U;
/// Rows generated to measure the bytes per row when `--size` is given.
constexpr std::size_t SAMPLE_ROWS = 4096;
/// 2000-01-01T00:00:00Z in seconds since the epoch (dask.datasets.timeseries starts there).
constexpr std::int64_t TIMESERIES_START_SECONDS = 946'684'800;
/// Mean of the `id` column (dask: Poisson with lambda 1000).
constexpr double ID_MEAN = 1000.0;
/// Share of rows of the skewed dataset that carry the heavy key 0.
constexpr std::uint64_t SKEWED_HEAVY_PERCENT = 90;

/// The names of dask.datasets.timeseries, one per letter.
constexpr std::array<std::string_view, 26> NAMES{
  "Alice", "Bob",   "Charlie", "Dan",     "Edith",   "Frank",  "George",   "Hannah", "Ingrid",
  "Jerry", "Kevin", "Laura",   "Michael", "Norbert", "Oliver", "Patricia", "Quinn",  "Ray",
  "Sarah", "Tim",   "Ursula",  "Victor",  "Wendy",   "Xavier", "Yvonne",   "Zelda"};

enum class dataset_kind : std::uint8_t { TIMESERIES, UNIFORM, SKEWED, STRINGS };

struct gen_arguments {
  std::string kind_name;
  std::size_t rows = 0;
  std::string size;
  std::string output;
  std::uint64_t seed         = 42;
  std::size_t files          = 0;
  std::string file_size      = "256MiB";
  std::size_t row_group_rows = parquet_write_options{}.row_group_rows;
  std::string time_unit_name = "ns";
  std::string format         = "parquet";
  bool overwrite             = false;
};

/** @brief splitmix64's finalizer: a well-mixed 64-bit value of (seed, row, column). */
std::uint64_t random_bits(std::uint64_t seed, std::uint64_t row, std::uint64_t column) {
  std::uint64_t z = seed * 0x9E3779B97F4A7C15ULL + row * 0xD1B54A32D192ED03ULL +
                    (column + 1) * 0xAEF17502108EF2D9ULL;
  z = (z ^ (z >> 30U)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27U)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31U);
}

/** @return a double in [0, 1) */
double unit_interval(std::uint64_t bits) { return static_cast<double>(bits >> 11U) * 0x1.0p-53; }

/** @return about Poisson(ID_MEAN): its normal approximation, rounded (Box-Muller) */
std::int64_t poisson_like(std::uint64_t seed, std::uint64_t row) {
  constexpr double TWO_PI = 6.283185307179586;
  double const u1         = 1.0 - unit_interval(random_bits(seed, row, 100));  // (0, 1]
  double const u2         = unit_interval(random_bits(seed, row, 101));
  double const normal     = std::sqrt(-2.0 * std::log(u1)) * std::cos(TWO_PI * u2);
  return std::max<std::int64_t>(0, std::llround(ID_MEAN + std::sqrt(ID_MEAN) * normal));
}

std::unique_ptr<column> int64_column(std::size_t rows, data_type type, resource_ref host) {
  return make_fixed_width_column(type, rows, mask_state::UNALLOCATED, default_stream(), host);
}

/** @brief A STRING column of `rows` rows whose row `i` is `value_of(i)`. */
template <typename ValueOf>
std::unique_ptr<column> strings_column(std::size_t rows, ValueOf&& value_of, resource_ref host) {
  std::size_t chars = 0;
  for (std::size_t row = 0; row < rows; ++row) {
    chars += value_of(row).size();
  }
  auto result   = make_strings_column(rows, chars, mask_state::UNALLOCATED, default_stream(), host);
  auto* offsets = result->mutable_offsets();
  auto* out     = result->mutable_chars();
  std::size_t position = 0;
  offsets[0]           = 0;
  for (std::size_t row = 0; row < rows; ++row) {
    auto const value = value_of(row);
    std::copy(value.begin(), value.end(), out + position);
    position += value.size();
    offsets[row + 1] = static_cast<std::int64_t>(position);
  }
  return result;
}

/** @return rows [first, first + rows) of the dataset `kind` */
std::unique_ptr<table> generate(dataset_kind kind,
                                std::uint64_t seed,
                                std::size_t first,
                                std::size_t rows,
                                time_unit unit,
                                resource_ref host) {
  std::vector<std::unique_ptr<column>> columns;
  auto const row_at = [&](std::size_t row) { return static_cast<std::uint64_t>(first + row); };
  switch (kind) {
    case dataset_kind::TIMESERIES: {
      columns.push_back(int64_column(rows, data_type{type_id::TIMESTAMP, unit}, host));
      columns.push_back(int64_column(rows, type_id::INT64, host));
      auto* timestamps           = columns[0]->mutable_data<std::int64_t>();
      auto* ids                  = columns[1]->mutable_data<std::int64_t>();
      std::int64_t const per_sec = unit == time_unit::MILLISECOND ? 1'000 : 1'000'000'000;
      for (std::size_t row = 0; row < rows; ++row) {
        timestamps[row] =
          (TIMESERIES_START_SECONDS + static_cast<std::int64_t>(row_at(row))) * per_sec;
        ids[row] = poisson_like(seed, row_at(row));
      }
      columns.push_back(strings_column(
        rows,
        [&](std::size_t row) { return NAMES[random_bits(seed, row_at(row), 2) % NAMES.size()]; },
        host));
      for (std::uint64_t column_index : {3U, 4U}) {
        columns.push_back(int64_column(rows, type_id::FLOAT64, host));
        auto* values = columns.back()->mutable_data<double>();
        for (std::size_t row = 0; row < rows; ++row) {
          values[row] = 2.0 * unit_interval(random_bits(seed, row_at(row), column_index)) - 1.0;
        }
      }
      break;
    }
    case dataset_kind::UNIFORM:
    case dataset_kind::SKEWED: {
      columns.push_back(int64_column(rows, type_id::INT64, host));
      columns.push_back(int64_column(rows, type_id::INT64, host));
      auto* keys    = columns[0]->mutable_data<std::int64_t>();
      auto* payload = columns[1]->mutable_data<std::int64_t>();
      for (std::size_t row = 0; row < rows; ++row) {
        auto const bits  = random_bits(seed, row_at(row), 0);
        bool const heavy = kind == dataset_kind::SKEWED &&
                           random_bits(seed, row_at(row), 1) % 100 < SKEWED_HEAVY_PERCENT;
        keys[row]    = heavy ? 0 : static_cast<std::int64_t>(bits);
        payload[row] = static_cast<std::int64_t>(row_at(row));
      }
      break;
    }
    case dataset_kind::STRINGS: {
      constexpr std::size_t MIN_LENGTH = 10;
      constexpr std::size_t MAX_LENGTH = 30;
      std::string scratch;
      columns.push_back(strings_column(
        rows,
        [&](std::size_t row) -> std::string_view {
          auto const bits   = random_bits(seed, row_at(row), 0);
          auto const length = MIN_LENGTH + bits % (MAX_LENGTH - MIN_LENGTH + 1);
          scratch.resize(length);
          for (std::size_t index = 0; index < length; ++index) {
            auto const letter = random_bits(seed, row_at(row), 10 + index) % 26;
            scratch[index]    = static_cast<char>('a' + letter);
          }
          return scratch;
        },
        host));
      columns.push_back(int64_column(rows, type_id::INT64, host));
      auto* payload = columns[1]->mutable_data<std::int64_t>();
      for (std::size_t row = 0; row < rows; ++row) {
        payload[row] = static_cast<std::int64_t>(row_at(row));
      }
      break;
    }
  }
  return std::make_unique<table>(std::move(columns));
}

std::vector<std::string> column_names(dataset_kind kind) {
  switch (kind) {
    case dataset_kind::TIMESERIES:
      return {"timestamp", "id", "name", "x", "y"};
    case dataset_kind::UNIFORM:
    case dataset_kind::SKEWED:
      return {"key", "payload"};
    case dataset_kind::STRINGS:
      return {"key", "payload"};
  }
  return {};
}

int run_gen(gen_arguments const& args) {
  dataset_kind const kind = args.kind_name == "timeseries" ? dataset_kind::TIMESERIES
                            : args.kind_name == "uniform"  ? dataset_kind::UNIFORM
                            : args.kind_name == "skewed"   ? dataset_kind::SKEWED
                                                           : dataset_kind::STRINGS;
  time_unit const unit =
    args.time_unit_name == "ms" ? time_unit::MILLISECOND : time_unit::NANOSECOND;
  host_memory_resource host{IO_SCRATCH_CACHE_BYTES};

  std::size_t rows = args.rows;
  if (!args.size.empty()) {
    auto const bytes  = parse_size_flag("--size", args.size);
    auto const sample = generate(kind, args.seed, 0, SAMPLE_ROWS, unit, host);
    rows = static_cast<std::size_t>(static_cast<double>(bytes) / estimate_row_size(*sample));
  }
  if (rows == 0) {
    throw usage_error("--rows or --size must give at least one row");
  }
  std::size_t const files = std::max<std::size_t>(args.files, 1);
  if (files > rows) {
    throw usage_error("--files " + std::to_string(files) + " is more than --rows " +
                      std::to_string(rows));
  }
  std::size_t const file_size = parse_file_size_flag(args.file_size);
  install_spill_cleanup_on_signals();  // removes the temporaries of the files being written
  output_directory directory{args.output, args.overwrite};
  auto const start = std::chrono::steady_clock::now();
  std::vector<batch_writer> writers;
  for (std::size_t file = 0; file < files; ++file) {
    batch_writer_options options;
    options.directory              = args.output;
    options.format                 = parse_output_format(args.format);
    options.parquet.row_group_rows = args.row_group_rows;
    if (args.files == 0) {
      options.target_file_bytes = file_size;
    } else {
      options.target_file_bytes = std::size_t{1} << 50U;  // one file per writer
      char prefix[32];
      std::snprintf(prefix, sizeof prefix, "part-%05zu", file);
      options.file_prefix = prefix;
    }
    writers.emplace_back(std::move(options), column_names(kind), default_stream(), host);
  }
  std::size_t bytes = 0;
  for (std::size_t file = 0; file < files; ++file) {
    std::size_t const begin = rows * file / files;
    std::size_t const end   = rows * (file + 1) / files;
    for (std::size_t first = begin; first < end; first += BATCH_ROWS) {
      auto const batch =
        generate(kind, args.seed, first, std::min(BATCH_ROWS, end - first), unit, host);
      bytes += estimate_size(batch->view());
      writers[file].write(batch->view());
    }
  }
  std::vector<std::string> written;
  for (auto& writer : writers) {
    auto paths = writer.close();
    written.insert(written.end(), paths.begin(), paths.end());
  }
  directory.commit(written);
  double const seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(stderr,
               "spillway gen %s: %zu rows (%s in memory) in %zu file(s) under %s, %.2f s\n",
               args.kind_name.c_str(),
               rows,
               format_bytes(bytes).c_str(),
               written.size(),
               args.output.c_str(),
               seconds);
  return static_cast<int>(exit_code::OK);
}

}  // namespace

command add_gen_command(CLI::App& parent) {
  auto args = std::make_shared<gen_arguments>();
  auto* app = parent.add_subcommand(
    "gen",
    "Generate a deterministic Parquet (or CSV) dataset. timeseries: timestamp, id (int64, about "
    "Poisson(1000)), name (one of 26 names), x and y (float64 in [-1, 1)), like "
    "dask.datasets.timeseries; uniform: int64 key and payload; skewed: 90% of keys are 0; "
    "strings: a 10-30 letter string key and an int64 payload.");
  app->add_option("kind", args->kind_name, "timeseries, uniform, skewed or strings")
    ->required()
    ->check(CLI::IsMember({"timeseries", "uniform", "skewed", "strings"}));
  auto* rows = app->add_option("--rows", args->rows, "Number of rows")->check(CLI::PositiveNumber);
  auto* size = app->add_option("--size",
                               args->size,
                               "Instead of --rows: about this many bytes in memory (e.g. 2GiB); "
                               "rows = size / the generator's bytes per row");
  rows->excludes(size);
  app->add_option("-o,--output", args->output, "Output directory")->required();
  app->add_option("--seed", args->seed, "Seed; equal seeds give equal data")->capture_default_str();
  app->add_option(
    "--files",
    args->files,
    "Write exactly this many files of equal row counts (default: cut by --file-size)");
  app->add_option("--file-size", args->file_size, "Target size of each file (without --files)")
    ->capture_default_str();
  app->add_option("--row-group-rows", args->row_group_rows, "Parquet: most rows in a row group")
    ->check(CLI::PositiveNumber)
    ->capture_default_str();
  app->add_option("--time-unit", args->time_unit_name, "timeseries: unit of the timestamps")
    ->check(CLI::IsMember({"ns", "ms"}))
    ->capture_default_str();
  app->add_option("--format", args->format, "Format of the files")
    ->check(CLI::IsMember(OUTPUT_FORMAT_NAMES))
    ->capture_default_str();
  app->add_flag("--overwrite", args->overwrite, "Replace the files of an existing dataset");
  return command{app, [args, rows, size] {
                   if (rows->count() == 0 && size->count() == 0) {
                     throw usage_error("gen: give --rows N or --size BYTES");
                   }
                   return run_gen(*args);
                 }};
}

}  // namespace spillway::cli
