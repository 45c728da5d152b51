/**
 * @file csv_writer.cpp
 * @brief Writing CSV without Arrow: the text form of every type, quoted where it needs to be.
 */
#include "io/csv_text.hpp"
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/table/column.hpp>

#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>

namespace spillway {
namespace {

/** @brief Appends `text` to `out`, quoted when it needs to be. */
void append_string_field(std::string& out, std::string_view text, char delimiter) {
  bool const needs_quotes =
    text.empty() || text.find_first_of(std::string{delimiter} + "\"\r\n") != std::string_view::npos;
  if (!needs_quotes) {
    out.append(text);
    return;
  }
  out.push_back('"');
  for (char const c : text) {
    out.push_back(c);
    if (c == '"') {
      out.push_back('"');
    }
  }
  out.push_back('"');
}

/** @brief Appends a number in its shortest exact form. */
template <typename T>
void append_number(std::string& out, T value) {
  std::array<char, 64> text{};
  auto const result = std::to_chars(text.data(), text.data() + text.size(), value);
  out.append(text.data(), result.ptr);
}

/** @brief Writes CSV to one file. */
class csv_file_writer final : public detail::format_writer {
 public:
  csv_file_writer(std::string path, table_schema schema, csv_write_options const& options)
    : path_(std::move(path)), schema_(std::move(schema)), delimiter_(options.delimiter) {
    SPILLWAY_EXPECTS(delimiter_ != '"' && delimiter_ != '\n' && delimiter_ != '\r',
                     std::string{"csv: the delimiter cannot be a quote or a line end"},
                     invalid_argument);
    for (auto const& column : schema_) {
      // CSV is text: bytes that are not text have no faithful field there, nor has a nested
      // value (held encoded, as BINARY).
      SPILLWAY_EXPECTS(!column.nested || column.type.id() != type_id::BINARY,
                       "csv: column '" + column.name + "' is " + column.nested->arrow_type +
                         ", which CSV cannot hold; write it as Parquet or Arrow IPC",
                       not_supported);
      SPILLWAY_EXPECTS(column.type.id() != type_id::BINARY,
                       "csv: column '" + column.name +
                         "' is binary, which CSV cannot hold; write it as Parquet or Arrow IPC",
                       not_supported);
    }
    file_ = std::fopen(path_.c_str(), "wb");
    SPILLWAY_EXPECTS(file_ != nullptr,
                     "cannot create CSV file '" + path_ + "': " + std::strerror(errno),
                     io_error);
    for (std::size_t i = 0; i < schema_.size(); ++i) {
      if (i > 0) {
        pending_.push_back(delimiter_);
      }
      append_string_field(pending_, schema_[i].name, delimiter_);
    }
    pending_.push_back('\n');
  }

  ~csv_file_writer() override {
    if (file_ != nullptr) {
      std::fclose(file_);
    }
  }
  csv_file_writer(csv_file_writer const&)            = delete;
  csv_file_writer& operator=(csv_file_writer const&) = delete;
  csv_file_writer(csv_file_writer&&)                 = delete;
  csv_file_writer& operator=(csv_file_writer&&)      = delete;

  void write(table_view const& input, std::shared_ptr<void const> const& /*owner*/) override {
    for (std::size_t row = 0; row < input.num_rows(); ++row) {
      for (std::size_t c = 0; c < input.num_columns(); ++c) {
        if (c > 0) {
          pending_.push_back(delimiter_);
        }
        append_value(input.column(c), row);
      }
      pending_.push_back('\n');
      if (pending_.size() >= FLUSH_BYTES) {
        flush();
      }
    }
    flush();
  }

  [[nodiscard]] std::size_t bytes_written() const override { return written_ + pending_.size(); }

  void close() override {
    flush();
    int const status = std::fclose(file_);
    file_            = nullptr;
    SPILLWAY_EXPECTS(
      status == 0, "cannot close CSV file '" + path_ + "': " + std::strerror(errno), io_error);
  }

 private:
  /// Text is handed to the file in pieces of about this size.
  static constexpr std::size_t FLUSH_BYTES = 1U << 20U;

  void append_value(column_view const& view, std::size_t row) {
    if (view.is_null(row)) {
      return;  // null: an empty unquoted field
    }
    auto const type = view.type();
    switch (type.id()) {
      case type_id::STRING:
        append_string_field(pending_, view.string_at(row), delimiter_);
        return;
      case type_id::BOOL8:
        pending_.append(view.data<std::uint8_t>()[row] != 0 ? "true" : "false");
        return;
      case type_id::TIMESTAMP:
        detail::csv::append_timestamp(pending_, view.data<std::int64_t>()[row], type.unit());
        return;
      case type_id::DATE32:
        detail::csv::append_date(pending_, view.data<std::int32_t>()[row]);
        return;
      case type_id::DATE64: {
        constexpr std::int64_t MS_PER_DAY = 86'400'000;
        std::int64_t const ms             = view.data<std::int64_t>()[row];
        detail::csv::append_date(pending_, ms / MS_PER_DAY - (ms % MS_PER_DAY < 0 ? 1 : 0));
        return;
      }
      case type_id::TIME32:
        detail::csv::append_time_of_day(pending_, view.data<std::int32_t>()[row], type.unit());
        return;
      case type_id::TIME64:
        detail::csv::append_time_of_day(pending_, view.data<std::int64_t>()[row], type.unit());
        return;
      case type_id::DECIMAL32:
      case type_id::DECIMAL64:
      case type_id::DECIMAL128:
      case type_id::DECIMAL256:
        append_decimal(
          pending_,
          type,
          static_cast<std::byte const*>(view.head()) + (view.offset() + row) * size_of(type));
        return;
      default:
        visit_fixed_width(type, [&]<typename T>() {
          if constexpr (std::is_arithmetic_v<T>) {
            append_number(pending_, view.data<T>()[row]);
          }
        });
    }
  }

  void flush() {
    if (pending_.empty()) {
      return;
    }
    std::size_t const count = std::fwrite(pending_.data(), 1, pending_.size(), file_);
    SPILLWAY_EXPECTS(count == pending_.size(),
                     "cannot write CSV file '" + path_ + "': " + std::strerror(errno),
                     io_error);
    written_ += count;
    pending_.clear();
  }

  std::string path_;
  table_schema schema_;
  char delimiter_;
  std::FILE* file_ = nullptr;
  std::string pending_;
  std::size_t written_ = 0;
};

}  // namespace

namespace detail {
std::unique_ptr<format_writer> make_csv_writer(std::string const& path,
                                               table_schema const& schema,
                                               csv_write_options const& options,
                                               stream_view,
                                               memory_resources) {
  return std::make_unique<csv_file_writer>(path, schema, options);
}
}  // namespace detail

void write_csv(table_view const& input,
               std::vector<std::string> const& names,
               std::string const& path,
               csv_write_options const& options,
               stream_view stream,
               memory_resources mrs) {
  std::string const what = "write_csv('" + path + "')";
  auto const schema      = detail::schema_of(input, names, what);
  auto const on_host     = detail::host_copy_if_on_device(input, stream, mrs, what);
  detail::write_one_file(
    on_host ? on_host->view() : input, path, [&](std::string const& temporary) {
      return detail::make_csv_writer(temporary, schema, options, stream, mrs);
    });
}

}  // namespace spillway
