#include "shuffle/shard_frame.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/pack.hpp>

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

}  // namespace spillway::detail
