#include "empty_output.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table.hpp>

#include <array>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <vector>

namespace spillway::cli {

std::string write_empty_file(batch_writer_options const& options,
                             table_schema const& schema,
                             stream_view stream,
                             memory_resources mrs) {
  auto const resource = mrs.output();
  std::vector<std::unique_ptr<column>> columns;
  std::vector<std::string> names;
  for (auto const& field : schema) {
    names.push_back(field.name);
    if (is_fixed_width(field.type)) {
      columns.push_back(
        make_fixed_width_column(field.type, 0, mask_state::UNALLOCATED, stream, resource));
      continue;
    }
    auto strings = make_strings_column(0, 0, mask_state::UNALLOCATED, stream, resource);
    std::array<std::int64_t, 1> const zero{0};
    copy_bytes(strings->mutable_offsets(),
               resource.kind(),
               zero.data(),
               memory_kind::HOST,
               sizeof(zero),
               stream);
    columns.push_back(std::move(strings));
  }
  table const empty{std::move(columns)};
  auto const path = (std::filesystem::path{options.directory} /
                     (options.file_prefix + "-00000." + std::string{extension(options.format)}))
                      .string();
  std::filesystem::create_directories(options.directory);
  switch (options.format) {
    case file_format::PARQUET:
      write_parquet(empty.view(), names, path, options.parquet, stream, mrs);
      break;
    case file_format::CSV:
      write_csv(empty.view(), names, path, options.csv, stream, mrs);
      break;
    case file_format::ARROW_IPC_FILE:
    case file_format::ARROW_IPC_STREAM:
      write_arrow_ipc(empty.view(), names, path, options.format, stream, mrs);
      break;
  }
  return path;
}

}  // namespace spillway::cli
