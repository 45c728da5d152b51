/**
 * `spillway verify`: checks that a dataset is in `--by` order across all its batches and files
 * (files in name order) and, with `--against`, that it holds the same rows as another dataset:
 * the same count and the same order-independent checksum (the 128-bit sum of a 64-bit xxHash
 * of each row's values).
 */
#include "command_line.hpp"
#include "commands.hpp"

#include <spillway/core/units.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/ops/order_check.hpp>
#include <spillway/ops/partition.hpp>

#include <xxhash.h>

#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace spillway::cli {
namespace {

__extension__ using uint128 = unsigned __int128;

/// Bytes of each batch verify reads.
constexpr std::size_t VERIFY_BATCH_BYTES = 64_MiB;
/// Hashed in place of a null value.
constexpr std::uint8_t NULL_MARKER = 0xA5;

struct verify_arguments {
  std::string output;
  std::string by;
  std::string against;
  std::string format;
  std::size_t partitions = 0;  ///< check hash partitions (files `partition-<p>-*`), not order
  std::uint64_t seed     = 0;  ///< the hash seed of the partitioning
  std::string csv_types;       ///< --csv-types, for whichever dataset is CSV
};

/** @return `source` opened for reading, with the column types `csv_types` when it is CSV */
std::unique_ptr<batch_reader> open_checked(std::string const& source,
                                           std::string const& format_flag,
                                           std::string const& csv_types,
                                           host_memory_resource& host) {
  auto const format = resolve_format(source, format_flag);
  return open_dataset(
    source,
    format,
    VERIFY_BATCH_BYTES,
    host,
    default_stream(),
    format == file_format::CSV ? parse_csv_types(csv_types, format) : table_schema{});
}

/** @brief What a pass over a dataset found. */
struct dataset_digest {
  std::size_t rows = 0;
  uint128 checksum = 0;
  table_schema schema;
};

/** @brief Adds a hash of every row of `batch` to `digest` (each column seeds the next). */
void add_rows(table_view const& batch, dataset_digest& digest) {
  std::vector<std::uint64_t> hashes(batch.num_rows(), 0x5111'11A4ULL);
  for (auto const& column : batch) {
    bool const is_string    = !is_fixed_width(column.type());
    std::size_t const width = is_string ? 0 : size_of(column.type());
    auto const* bytes       = static_cast<unsigned char const*>(column.head());
    for (std::size_t row = 0; row < column.size(); ++row) {
      if (column.is_null(row)) {
        hashes[row] = XXH3_64bits_withSeed(&NULL_MARKER, 1, hashes[row]);
      } else if (is_string) {
        auto const value = column.string_at(row);
        hashes[row]      = XXH3_64bits_withSeed(value.data(), value.size(), hashes[row] + 1);
      } else {
        hashes[row] =
          XXH3_64bits_withSeed(bytes + (column.offset() + row) * width, width, hashes[row]);
      }
    }
  }
  for (auto hash : hashes) {
    digest.checksum += hash;
  }
  digest.rows += batch.num_rows();
}

/**
 * @brief Reads `source`, hashing its rows and, when `keys` is given, checking their order.
 * @throws verification_error at the first row out of order
 */
dataset_digest scan(std::string const& source,
                    std::string const& format_flag,
                    std::string const& csv_types,
                    std::vector<key_spec> const* keys,
                    std::string const& by,
                    host_memory_resource& host) {
  auto reader = open_checked(source, format_flag, csv_types, host);
  dataset_digest digest;
  digest.schema = reader->schema();
  std::optional<order_checker> order;
  if (keys != nullptr) {
    auto resolved = resolve_sort_keys(*keys, digest.schema, source);
    order.emplace(std::move(resolved.columns), std::move(resolved.orders), host);
  }
  while (auto batch = reader->next()) {
    auto const view = batch->view();
    if (order) {
      if (auto const row = order->next(view, default_stream())) {
        throw verification_error(source + " is not sorted by " + by + ": row " +
                                 std::to_string(*row) + " sorts before row " +
                                 std::to_string(*row - 1));
      }
    }
    add_rows(view, digest);
  }
  return digest;
}

/** @return the partition number in a file name `partition-<p>-<n>.<ext>` */
std::size_t partition_of_file(std::string const& file) {
  auto const name         = std::filesystem::path(file).filename().string();
  constexpr char prefix[] = "partition-";
  auto const digits_at    = sizeof(prefix) - 1;
  auto const dash         = name.find('-', digits_at);
  if (name.rfind(prefix, 0) != 0 || dash == std::string::npos || dash == digits_at) {
    throw verification_error(file + " is not named partition-<p>-<n>: cannot tell its partition");
  }
  return std::stoull(name.substr(digits_at, dash - digits_at));
}

/**
 * @brief Reads every file of `source`, hashing its rows, and checks that each row of a file
 * `partition-<p>-*` hashes (`hash_rows` of the `by` columns, `seed`) to partition p of
 * `partitions`.
 * @throws verification_error at the first row in the wrong partition
 */
dataset_digest scan_partitions(std::string const& source,
                               std::string const& format_flag,
                               std::string const& csv_types,
                               std::vector<key_spec> const& keys,
                               std::size_t partitions,
                               std::uint64_t seed,
                               host_memory_resource& host) {
  dataset_digest digest;
  bool first = true;
  for (auto const& file : expand_dataset(source)) {
    auto const partition = partition_of_file(file);
    if (partition >= partitions) {
      throw verification_error(file + " names partition " + std::to_string(partition) +
                               " of only " + std::to_string(partitions));
    }
    auto reader = open_checked(file, format_flag, csv_types, host);
    if (first) {
      digest.schema = reader->schema();
      first         = false;
    } else if (reader->schema() != digest.schema) {
      throw verification_error(file + " has columns (" + to_string(reader->schema()) +
                               ") unlike the other files (" + to_string(digest.schema) + ")");
    }
    auto const resolved  = resolve_sort_keys(keys, digest.schema, file);
    std::size_t file_row = 0;
    while (auto batch = reader->next()) {
      auto const view   = batch->view();
      auto const hashes = hash_rows(view.select(resolved.columns), seed, default_stream(), host);
      for (std::size_t row = 0; row < view.num_rows(); ++row) {
        if (hashes->view().data<std::uint64_t>()[row] % partitions != partition) {
          throw verification_error(
            file + ": row " + std::to_string(file_row + row) + " belongs to partition " +
            std::to_string(hashes->view().data<std::uint64_t>()[row] % partitions) + ", not " +
            std::to_string(partition));
        }
      }
      file_row += view.num_rows();
      add_rows(view, digest);
    }
  }
  return digest;
}

std::string hex(uint128 value) {
  char text[40];
  std::snprintf(text,
                sizeof text,
                "%016llx%016llx",
                static_cast<unsigned long long>(value >> 64U),
                static_cast<unsigned long long>(value));
  return text;
}

int run_verify(verify_arguments const& args) {
  auto const start = std::chrono::steady_clock::now();
  auto const keys  = parse_sort_keys(args.by);
  host_memory_resource host{IO_SCRATCH_CACHE_BYTES};
  auto const output_format = resolve_format(args.output, args.format);
  if (output_format != file_format::CSV &&
      (args.against.empty() || resolve_format(args.against, "") != file_format::CSV)) {
    (void)parse_csv_types(args.csv_types, output_format);  // refuses types for no CSV at all
  }
  auto const output =
    args.partitions > 0
      ? scan_partitions(
          args.output, args.format, args.csv_types, keys, args.partitions, args.seed, host)
      : scan(args.output, args.format, args.csv_types, &keys, args.by, host);
  std::string against_note;
  if (!args.against.empty()) {
    auto const input = scan(args.against, "", args.csv_types, nullptr, args.by, host);
    if (input.schema != output.schema) {
      throw verification_error(args.output + " has columns (" + to_string(output.schema) +
                               ") but " + args.against + " has (" + to_string(input.schema) + ")");
    }
    if (input.rows != output.rows) {
      throw verification_error(args.output + " has " + std::to_string(output.rows) + " rows but " +
                               args.against + " has " + std::to_string(input.rows));
    }
    if (input.checksum != output.checksum) {
      throw verification_error(args.output + " and " + args.against + " have " +
                               std::to_string(output.rows) +
                               " rows each but different contents (checksum " +
                               hex(output.checksum) + " vs " + hex(input.checksum) + ")");
    }
    against_note = ", same rows as " + args.against + " (checksum " + hex(output.checksum) + ")";
  }
  double const seconds =
    std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::fprintf(
    stderr,
    "spillway verify: OK: %zu rows of %s %s %s%s, %.2f s\n",
    output.rows,
    args.output.c_str(),
    args.partitions > 0
      ? ("in their hash partitions (of " + std::to_string(args.partitions) + ") by").c_str()
      : "in order by",
    args.by.c_str(),
    against_note.c_str(),
    seconds);
  return static_cast<int>(exit_code::OK);
}

}  // namespace

command add_verify_command(CLI::App& parent) {
  auto args = std::make_shared<verify_arguments>();
  auto* app = parent.add_subcommand(
    "verify",
    "Check that a dataset is sorted by --by across all batches and files (files in name order); "
    "with --against, that it has the same row count and order-independent checksum as INPUT. "
    "Exit 0 when it is, 1 when not.");
  app->add_option("output", args->output, "The dataset to check (file, directory or glob)")
    ->required();
  app->add_option("--by", args->by, "Key columns, as for sort")->required();
  app->add_option("--against", args->against, "The dataset it was sorted from");
  app->add_option("--partitions",
                  args->partitions,
                  "Check hash partitioning instead of order: every row of a file partition-<p>-* "
                  "hashes by --by to p of this many partitions (the output of spillway shuffle)");
  app->add_option("--seed", args->seed, "With --partitions: the hash seed (default 0)");
  app->add_option("--format", args->format, "Format of the checked dataset (default: extension)")
    ->check(CLI::IsMember({"parquet", "csv", "arrow", "arrows"}));
  app->add_option("--csv-types",
                  args->csv_types,
                  "For the dataset checked or --against, whichever is CSV: as for sort");
  return command{app, [args] { return run_verify(*args); }};
}

}  // namespace spillway::cli
