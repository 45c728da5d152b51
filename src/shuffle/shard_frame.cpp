#include "shuffle/shard_frame.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/null_mask.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <cstring>
#include <string>

namespace spillway::detail {
namespace {

constexpr std::uint64_t FRAME_MAGIC      = 0x44524148535753ULL;  // "SWSHARD"
constexpr std::size_t FRAME_HEADER_BYTES = 64;
constexpr std::size_t FRAME_ALIGNMENT    = 64;

struct frame_header {
  std::uint64_t magic;
  std::uint64_t metadata_bytes;
  std::uint64_t rows;
  std::uint64_t data_offset;
  std::uint64_t data_bytes;
};

std::size_t align_up(std::size_t value) noexcept {
  return (value + FRAME_ALIGNMENT - 1) / FRAME_ALIGNMENT * FRAME_ALIGNMENT;
}

}  // namespace

std::size_t shard_frame_data_offset(std::size_t num_columns) noexcept {
  return align_up(FRAME_HEADER_BYTES + packed_metadata_size(num_columns));
}

buffer finish_shard_frame(packed_partition&& packed, stream_view stream) {
  std::size_t const data_offset = align_up(FRAME_HEADER_BYTES + packed.metadata.size());
  buffer frame                  = std::move(packed.frame);
  SPILLWAY_EXPECTS(frame.size() >= data_offset,
                   "shard frame: the packed partition leaves no room for the header",
                   logic_error);
  frame_header const fields{
    FRAME_MAGIC, packed.metadata.size(), packed.num_rows, data_offset, frame.size() - data_offset};
  // The room in front of the data is zeroed by the packer; header and metadata go over it.
  std::vector<std::uint8_t> head(FRAME_HEADER_BYTES + packed.metadata.size(), 0);
  std::memcpy(head.data(), &fields, sizeof(fields));
  std::memcpy(head.data() + FRAME_HEADER_BYTES, packed.metadata.data(), packed.metadata.size());
  copy_bytes(frame.data(), frame.kind(), head.data(), memory_kind::HOST, head.size(), stream);
  return frame;
}

buffer make_shard_frame(table_view const& rows, stream_view stream, memory_resources mrs) {
  return finish_shard_frame(
    detail::pack_at(rows, shard_frame_data_offset(rows.num_columns()), stream, mrs), stream);
}

table_view view_shard_frame(void const* bytes,
                            std::size_t size,
                            memory_kind kind,
                            stream_view stream,
                            std::vector<std::uint8_t>& metadata) {
  SPILLWAY_EXPECTS(size >= FRAME_HEADER_BYTES,
                   "shard frame: " + std::to_string(size) + " bytes is shorter than its header",
                   corruption_error);
  frame_header fields{};
  copy_bytes(&fields, memory_kind::HOST, bytes, kind, sizeof(fields), stream);
  SPILLWAY_EXPECTS(fields.magic == FRAME_MAGIC, "shard frame: bad magic", corruption_error);
  SPILLWAY_EXPECTS(fields.data_offset >= FRAME_HEADER_BYTES + fields.metadata_bytes &&
                     fields.data_offset <= size && fields.data_bytes == size - fields.data_offset,
                   "shard frame: sizes do not fit the frame of " + std::to_string(size) + " bytes",
                   corruption_error);
  auto const* base = static_cast<std::uint8_t const*>(bytes);
  metadata.resize(fields.metadata_bytes);
  copy_bytes(
    metadata.data(), memory_kind::HOST, base + FRAME_HEADER_BYTES, kind, metadata.size(), stream);
  table_view view = unpack(metadata, base + fields.data_offset, fields.data_bytes, kind);
  SPILLWAY_EXPECTS_EQ(view.num_rows(),
                      fields.rows,
                      "shard frame: row count differs from the packed table's",
                      corruption_error);
  return view;
}

std::unique_ptr<table> adopt_shard_frame(buffer&& frame,
                                         table_view const& rows,
                                         stream_view stream) {
  auto const owner      = std::make_shared<buffer const>(std::move(frame));
  auto const* const end = static_cast<std::byte const*>(owner->data()) + owner->size();
  auto const slice      = [&](void const* part, std::size_t bytes) {
    return buffer{owner, const_cast<void*>(part), bytes};  // the frame is the table's now
  };
  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(rows.num_columns());
  for (std::size_t index = 0; index < rows.num_columns(); ++index) {
    column_view const view = rows.column(index);
    SPILLWAY_EXPECTS(view.offset() == 0, "shard frame: a column viewed at an offset", logic_error);
    std::size_t const size = view.size();
    buffer mask;
    if (view.nullable()) {
      // The packer reserves a padded mask; the last part of a frame may end before the padding.
      auto const* const at   = reinterpret_cast<std::byte const*>(view.null_mask());
      std::size_t const room = at <= end ? static_cast<std::size_t>(end - at) : 0;
      mask = slice(at, std::max((size + 7) / 8, std::min(bitmask_allocation_size(size), room)));
    }
    if (is_fixed_width(view.type())) {
      columns.push_back(std::make_unique<column>(view.type(),
                                                 size,
                                                 slice(view.head(), size * size_of(view.type())),
                                                 std::move(mask),
                                                 view.null_count()));
      continue;
    }
    std::int64_t chars = 0;
    copy_bytes(
      &chars, memory_kind::HOST, view.offsets() + size, view.kind(), sizeof(chars), stream);
    columns.push_back(std::make_unique<column>(view.type(),
                                               size,
                                               slice(view.head(), static_cast<std::size_t>(chars)),
                                               std::move(mask),
                                               view.null_count(),
                                               slice(view.offsets(), (size + 1) * sizeof(chars))));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace spillway::detail
