#include "empty_output.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/batch_writer.hpp>
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
    auto strings = make_strings_column(0, 0, mask_state::UNALLOCATED, stream, resource, field.type);
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
  // Through a batch_writer, so that the file is named, staged and typed as every other.
  batch_writer writer(options, names, stream, mrs);
  writer.write_no_rows(empty.view());
  auto files = writer.close();
  SPILLWAY_EXPECTS(files.size() == 1, "an empty dataset was written as no file", logic_error);
  return files.front();
}

}  // namespace spillway::cli
