#include "command_line.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/error_message.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <optional>
#include <string>
#include <system_error>
#include <vector>

namespace spillway::cli {
namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  while (true) {
    auto const end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end == std::string_view::npos ? text.npos : end - begin));
    if (end == std::string_view::npos) {
      return parts;
    }
    begin = end + 1;
  }
}

/// `text` split at the commas outside parentheses (a decimal type's "(15,2)" stays whole).
std::vector<std::string_view> split_entries(std::string_view text) {
  std::vector<std::string_view> parts;
  std::size_t begin = 0;
  int depth         = 0;
  for (std::size_t at = 0; at <= text.size(); ++at) {
    char const c = at < text.size() ? text[at] : ',';
    depth += c == '(' ? 1 : (c == ')' ? -1 : 0);
    if (c == ',' && (depth <= 0 || at == text.size())) {
      parts.push_back(text.substr(begin, at - begin));
      begin = at + 1;
    }
  }
  return parts;
}

/**
 * @return the decimal type named `name` ("decimal128(15,2)", spaces allowed around the numbers),
 * nothing when `name` is not decimalN(...)
 * @throws usage_error when it is, but malformed or of a precision its width cannot hold
 */
std::optional<data_type> parse_decimal_type(std::string_view name, std::string const& column) {
  std::string compact;
  for (char const c : name) {
    if (c != ' ') {
      compact.push_back(c);
    }
  }
  if (!compact.starts_with("decimal")) {
    return std::nullopt;
  }
  auto const open  = compact.find('(');
  auto const bits  = compact.substr(7, open == std::string::npos ? std::string::npos : open - 7);
  type_id const id = bits == "32"    ? type_id::DECIMAL32
                     : bits == "64"  ? type_id::DECIMAL64
                     : bits == "128" ? type_id::DECIMAL128
                                     : type_id::DECIMAL256;
  auto const fail  = [&](std::string const& why) -> usage_error {
    return usage_error("--csv-types: column '" + column + "': '" + std::string{name} +
                       "' is not a decimal type: " + why +
                       " (decimal32|64|128|256(precision,scale), e.g. decimal128(15,2))");
  };
  if ((bits != "32" && bits != "64" && bits != "128" && bits != "256") ||
      open == std::string::npos || !compact.ends_with(")")) {
    throw fail("expected decimal32, decimal64, decimal128 or decimal256 with (precision,scale)");
  }
  auto const inside = std::string_view{compact}.substr(open + 1, compact.size() - open - 2);
  auto const comma  = inside.find(',');
  int precision     = 0;
  int scale         = 0;
  auto const number = [](std::string_view digits, int& out) {
    auto const [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), out);
    return error == std::errc{} && end == digits.data() + digits.size() && !digits.empty();
  };
  if (comma == std::string_view::npos || !number(inside.substr(0, comma), precision) ||
      !number(inside.substr(comma + 1), scale)) {
    throw fail("expected two integers, precision and scale");
  }
  data_type const type{id, precision, scale};
  if (precision < 1 || precision > max_decimal_precision(id) || !is_valid_decimal(type)) {
    throw fail("its precision must be 1 to " + std::to_string(max_decimal_precision(id)));
  }
  return type;
}

std::string_view extension_of(std::string const& path) {
  auto const name = std::string_view{path}.substr(path.find_last_of('/') + 1);
  auto const dot  = name.find_last_of('.');
  return dot == std::string_view::npos ? std::string_view{} : name.substr(dot + 1);
}

std::optional<file_format> format_named(std::string_view name) {
  for (auto format : {file_format::PARQUET,
                      file_format::CSV,
                      file_format::ARROW_IPC_FILE,
                      file_format::ARROW_IPC_STREAM}) {
    if (name == extension(format)) {
      return format;
    }
  }
  if (name == "pq" || name == "parq") {
    return file_format::PARQUET;
  }
  if (name == "feather" || name == "ipc") {
    return file_format::ARROW_IPC_FILE;
  }
  return std::nullopt;
}

}  // namespace

std::string user_message(std::string_view what) { return spillway::user_message(what); }

std::size_t use_worker_threads(std::size_t threads) {
  set_worker_threads(threads);
  std::size_t const used = worker_threads();
  set_arrow_thread_pools(used);
  return used;
}

std::size_t parse_size_flag(std::string_view flag, std::string_view text) {
  std::size_t bytes = 0;
  try {
    bytes = parse_bytes(text);
  } catch (spillway::invalid_argument const&) {
    throw usage_error(std::string{flag} + ": '" + std::string{text} +
                      "' is not a size (examples: 512MiB, 2GiB, 4096)");
  }
  if (bytes == 0) {
    throw usage_error(std::string{flag} + ": must be more than zero bytes");
  }
  return bytes;
}

std::vector<key_spec> parse_sort_keys(std::string_view text) {
  std::vector<key_spec> keys;
  for (auto const entry : split(text, ',')) {
    auto const parts = split(entry, ':');
    key_spec key;
    key.name = std::string{parts.front()};
    if (key.name.empty()) {
      throw usage_error("--by: empty column name in '" + std::string{text} + "'");
    }
    for (std::size_t index = 1; index < parts.size(); ++index) {
      auto const qualifier = parts[index];
      if (qualifier == "asc") {
        key.ordering.direction = order::ASCENDING;
      } else if (qualifier == "desc") {
        key.ordering.direction = order::DESCENDING;
      } else if (qualifier == "nulls_first") {
        key.ordering.nulls = null_order::BEFORE;
      } else if (qualifier == "nulls_last") {
        key.ordering.nulls = null_order::AFTER;
      } else {
        throw usage_error("--by: unknown qualifier '" + std::string{qualifier} + "' of column '" +
                          key.name + "' (asc, desc, nulls_first or nulls_last)");
      }
    }
    keys.push_back(std::move(key));
  }
  return keys;
}

resolved_keys resolve_sort_keys(std::vector<key_spec> const& keys,
                                table_schema const& schema,
                                std::string const& source) {
  resolved_keys resolved;
  for (auto const& key : keys) {
    auto const found = std::find_if(
      schema.begin(), schema.end(), [&](column_schema const& c) { return c.name == key.name; });
    if (found == schema.end()) {
      throw usage_error("--by: no column '" + key.name + "' in " + source + " (it has " +
                        to_string(schema) + ")");
    }
    resolved.columns.push_back(static_cast<std::size_t>(found - schema.begin()));
    resolved.orders.push_back(key.ordering);
  }
  return resolved;
}

file_format resolve_format(std::string const& source, std::string const& format_flag) {
  if (!format_flag.empty()) {
    auto const format = format_named(format_flag);
    if (!format) {
      throw usage_error("--format: unknown format '" + format_flag +
                        "' (parquet, csv, arrow or arrows)");
    }
    return *format;
  }
  // io_error naming the source when it is missing or names no file
  auto const probe  = expand_dataset(source).front();
  auto const format = format_named(extension_of(probe));
  if (!format) {
    throw usage_error("cannot tell the format of '" + probe +
                      "' from its extension; pass --format parquet|csv|arrow|arrows");
  }
  return *format;
}

sort_strategy parse_strategy(std::string_view name) {
  if (name == "merge") {
    return sort_strategy::MERGE;
  }
  return name == "sample" ? sort_strategy::SAMPLE : sort_strategy::AUTO;
}

file_format parse_output_format(std::string_view name) {
  if (name == "arrow") {
    return file_format::ARROW_IPC_FILE;
  }
  return name == "csv" ? file_format::CSV : file_format::PARQUET;
}

parquet_compression parse_compression(std::string_view name) {
  if (name == "none") {
    return parquet_compression::NONE;
  }
  return name == "zstd" ? parquet_compression::ZSTD : parquet_compression::SNAPPY;
}

table_schema parse_csv_types(std::string_view text, file_format format) {
  table_schema types;
  if (text.empty()) {
    return types;
  }
  if (format != file_format::CSV) {
    throw usage_error("--csv-types: the input is " + std::string{extension(format)} +
                      ", not CSV; its files name their columns' types");
  }
  std::vector<data_type> known{type_id::BOOL8,
                               type_id::INT8,
                               type_id::INT16,
                               type_id::INT32,
                               type_id::INT64,
                               type_id::UINT8,
                               type_id::UINT16,
                               type_id::UINT32,
                               type_id::UINT64,
                               type_id::FLOAT32,
                               type_id::FLOAT64,
                               type_id::STRING,
                               type_id::DATE32,
                               type_id::DATE64};
  for (auto unit :
       {time_unit::SECOND, time_unit::MILLISECOND, time_unit::MICROSECOND, time_unit::NANOSECOND}) {
    known.emplace_back(type_id::TIMESTAMP, unit);
    known.emplace_back(type_id::DURATION, unit);
    known.emplace_back(unit <= time_unit::MILLISECOND ? type_id::TIME32 : type_id::TIME64, unit);
  }
  for (auto const entry : split_entries(text)) {
    auto const colon = entry.rfind(':');
    if (colon == std::string_view::npos || colon == 0 || colon + 1 == entry.size()) {
      throw usage_error("--csv-types: '" + std::string{entry} +
                        "' is not column:type (example: --csv-types zip:string,id:int64)");
    }
    std::string name{entry.substr(0, colon)};
    auto const type_name = entry.substr(colon + 1);
    auto type            = std::find_if(known.begin(), known.end(), [&](data_type candidate) {
      return to_string(candidate) == type_name;
    });
    if (auto const decimal = parse_decimal_type(type_name, name)) {
      type = known.insert(known.end(), *decimal);
    }
    if (type == known.end()) {
      std::string names;
      for (auto candidate : known) {
        names += (names.empty() ? "" : ", ") + to_string(candidate);
      }
      throw usage_error("--csv-types: unknown type '" + std::string{type_name} + "' of column '" +
                        name + "' (" + names + ")");
    }
    if (std::any_of(
          types.begin(), types.end(), [&](column_schema const& c) { return c.name == name; })) {
      throw usage_error("--csv-types: column '" + name + "' is given twice");
    }
    types.push_back({std::move(name), *type});
  }
  return types;
}

std::unique_ptr<batch_reader> open_dataset(std::string const& source,
                                           file_format format,
                                           std::size_t target_batch_bytes,
                                           memory_resources mrs,
                                           stream_view stream,
                                           table_schema const& csv_types) {
  switch (format) {
    case file_format::PARQUET: {
      parquet_read_options options;
      options.target_batch_bytes = target_batch_bytes;
      return open_parquet(source, options, stream, mrs);
    }
    case file_format::CSV: {
      csv_read_options options;
      options.target_batch_bytes = target_batch_bytes;
      options.column_types       = csv_types;
      try {
        return open_csv(source, options, stream, mrs);
      } catch (invalid_argument const& error) {
        if (csv_types.empty()) {
          throw;
        }
        throw usage_error("--csv-types: " + user_message(error.what()));
      }
    }
    case file_format::ARROW_IPC_FILE:
    case file_format::ARROW_IPC_STREAM: {
      arrow_ipc_read_options options;
      options.target_batch_bytes = target_batch_bytes;
      return open_arrow_ipc(source, format, options, stream, mrs);
    }
  }
  throw usage_error("unknown input format");
}

std::unique_ptr<batch_reader> read_dataset_ahead(std::string const& source,
                                                 file_format format,
                                                 std::size_t target_batch_bytes,
                                                 memory_resources mrs,
                                                 stream_view stream,
                                                 table_schema const& csv_types,
                                                 std::size_t readers,
                                                 std::size_t* readers_used) {
  // Opened first as one reader: the dataset's files, its schema and their errors, as always.
  auto whole = open_dataset(source, format, target_batch_bytes, mrs, stream, csv_types);
  if (readers_used != nullptr) {
    *readers_used = 1;
  }
  if (format != file_format::PARQUET || readers <= 1) {
    return read_ahead(std::move(whole));
  }
  auto const files = expand_dataset(source);
  auto shares      = split_parquet(files, readers * PIECES_PER_READER);
  std::erase_if(shares, [](auto const& share) { return share.empty(); });
  if (shares.size() <= 1) {
    return read_ahead(std::move(whole));
  }
  table_schema schema = whole->schema();
  whole.reset();
  auto const pieces =
    std::make_shared<std::vector<std::vector<parquet_row_groups>> const>(std::move(shares));
  std::string const first_file = files.front();
  auto open = [pieces, schema, first_file, target_batch_bytes, mrs, stream](std::size_t piece) {
    parquet_read_options options;
    options.target_batch_bytes = target_batch_bytes;
    auto const& groups         = (*pieces)[piece];
    auto reader                = open_parquet(groups, options, stream, mrs);
    if (reader->schema() != schema) {
      throw invalid_argument("'" + groups.front().path + "' has columns (" +
                             to_string(reader->schema()) + ") unlike those of '" + first_file +
                             "' (" + to_string(schema) + ")");
    }
    return reader;
  };
  std::size_t const count = pieces->size();
  if (readers_used != nullptr) {
    *readers_used = std::min(readers, count);
  }
  return read_in_parallel(std::move(schema), count, std::move(open), readers, 1);
}

void check_host_budget(std::size_t host_memory) {
  if (host_memory < MIN_HOST_BUDGET) {
    throw usage_error("--host-memory " + format_bytes(host_memory) +
                      " is too small: the spill store needs at least " +
                      format_bytes(MIN_HOST_BUDGET));
  }
}

std::size_t batch_within_host(std::size_t batch_bytes,
                              std::size_t host_memory,
                              double batches_held,
                              std::size_t scratch) {
  auto const share = static_cast<double>(host_memory) * READER_HOST_SHARE;
  auto const room  = std::max(share - static_cast<double>(scratch), 0.0);
  auto const fits  = static_cast<std::size_t>(room / std::max(batches_held, 1.0));
  return std::min(batch_bytes, std::max(fits, MIN_HOST_BATCH));
}

void warn_past_host_budget(std::string_view command,
                           std::size_t over,
                           std::string const& host_flag,
                           std::size_t host_memory) {
  if (over == 0) {
    return;
  }
  // The spill store keeps a share of the budget for its own reads and writes, which grows with
  // it: the budget and twice the excess is one to try.
  std::size_t const enough_mib = (host_memory + 2 * over + 1_MiB - 1) / 1_MiB;
  std::fprintf(stderr,
               "%.*s: warning: the host held up to %s past --host-memory %s (decoded input, output "
               "being encoded and spill bookkeeping, while nothing more could spill); try "
               "--host-memory %zuMiB or more, or a larger --device-memory (fewer, larger spills)\n",
               static_cast<int>(command.size()),
               command.data(),
               format_bytes(over).c_str(),
               host_flag.c_str(),
               enough_mib);
}

std::optional<std::size_t> testing_reverse_output_batch() {
  char const* const value = std::getenv("SPILLWAY_TEST_REVERSE_OUTPUT_BATCH");
  if (value == nullptr || *value == '\0') {
    return std::nullopt;
  }
  return static_cast<std::size_t>(std::strtoull(value, nullptr, 10));
}

}  // namespace spillway::cli
