#include <spillway/core/error.hpp>
#include <spillway/spill/spill_file.hpp>

#include <cstring>
#include <string>

namespace spillway {
namespace {

/// Byte offsets of the header fields.
constexpr std::size_t MAGIC_AT        = 0;
constexpr std::size_t VERSION_AT      = 4;
constexpr std::size_t CODEC_AT        = 6;
constexpr std::size_t BUFFER_ID_AT    = 8;
constexpr std::size_t RAW_SIZE_AT     = 16;
constexpr std::size_t STORED_SIZE_AT  = 24;
constexpr std::size_t CHECKSUM_AT     = 32;
constexpr std::size_t HEADER_CHECK_AT = 40;

template <typename T>
void put(std::byte* out, std::size_t at, T value) noexcept {
  std::memcpy(out + at, &value, sizeof(T));
}

template <typename T>
T get(std::byte const* in, std::size_t at) noexcept {
  T value{};
  std::memcpy(&value, in + at, sizeof(T));
  return value;
}

std::string block_name(std::uint64_t buffer_id, std::string const& path, std::uint64_t offset) {
  return "spill buffer " + std::to_string(buffer_id) + " in '" + path + "' at offset " +
         std::to_string(offset);
}

}  // namespace

std::array<std::byte, SPILL_BLOCK_HEADER_SIZE> encode_block_header(
  spill_block_header const& header) noexcept {
  std::array<std::byte, SPILL_BLOCK_HEADER_SIZE> bytes{};
  put(bytes.data(), MAGIC_AT, SPILL_BLOCK_MAGIC);
  put(bytes.data(), VERSION_AT, SPILL_BLOCK_VERSION);
  put(bytes.data(), CODEC_AT, static_cast<std::uint8_t>(header.payload_codec));
  put(bytes.data(), BUFFER_ID_AT, header.buffer_id);
  put(bytes.data(), RAW_SIZE_AT, header.raw_size);
  put(bytes.data(), STORED_SIZE_AT, header.stored_size);
  put(bytes.data(), CHECKSUM_AT, header.checksum);
  put(bytes.data(),
      HEADER_CHECK_AT,
      checksum64(std::span<std::byte const>(bytes.data(), HEADER_CHECK_AT)));
  return bytes;
}

spill_block_header decode_block_header(std::span<std::byte const, SPILL_BLOCK_HEADER_SIZE> bytes,
                                       std::string const& path,
                                       std::uint64_t offset,
                                       std::uint64_t expected_buffer_id) {
  auto const* in = bytes.data();
  SPILLWAY_EXPECTS(get<std::uint32_t>(in, MAGIC_AT) == SPILL_BLOCK_MAGIC,
                   block_name(expected_buffer_id, path, offset) + ": bad block magic",
                   corruption_error);
  SPILLWAY_EXPECTS(
    get<std::uint64_t>(in, HEADER_CHECK_AT) ==
      checksum64(std::span<std::byte const>(in, HEADER_CHECK_AT)),
    block_name(expected_buffer_id, path, offset) + ": block header checksum mismatch",
    corruption_error);
  SPILLWAY_EXPECTS(get<std::uint16_t>(in, VERSION_AT) == SPILL_BLOCK_VERSION,
                   block_name(expected_buffer_id, path, offset) + ": unknown block version " +
                     std::to_string(get<std::uint16_t>(in, VERSION_AT)),
                   corruption_error);
  auto const codec_value = get<std::uint8_t>(in, CODEC_AT);
  SPILLWAY_EXPECTS(
    codec_value <= static_cast<std::uint8_t>(codec::ZSTD),
    block_name(expected_buffer_id, path, offset) + ": unknown codec " + std::to_string(codec_value),
    corruption_error);
  spill_block_header header;
  header.payload_codec = static_cast<codec>(codec_value);
  header.buffer_id     = get<std::uint64_t>(in, BUFFER_ID_AT);
  header.raw_size      = get<std::uint64_t>(in, RAW_SIZE_AT);
  header.stored_size   = get<std::uint64_t>(in, STORED_SIZE_AT);
  header.checksum      = get<std::uint64_t>(in, CHECKSUM_AT);
  SPILLWAY_EXPECTS(header.buffer_id == expected_buffer_id,
                   block_name(expected_buffer_id, path, offset) + ": block belongs to buffer " +
                     std::to_string(header.buffer_id),
                   corruption_error);
  return header;
}

void write_spill_block(writable_file& file,
                       std::uint64_t offset,
                       spill_block_header const& header,
                       std::span<std::byte const> payload) {
  SPILLWAY_EXPECTS_EQ(
    header.stored_size, payload.size(), "block header and payload disagree", logic_error);
  auto const encoded = encode_block_header(header);
  file.write_at(offset, encoded.data(), encoded.size());
  if (!payload.empty()) {
    file.write_at(offset + encoded.size(), payload.data(), payload.size());
  }
}

buffer read_spill_block(file_system& files,
                        spill_block_location const& location,
                        std::uint64_t buffer_id,
                        resource_ref resource) {
  std::unique_ptr<readable_file> file;
  try {
    file = files.open_readable(location.path);
  } catch (io_error const& error) {
    throw io_error("spill buffer " + std::to_string(buffer_id) + " is lost: " + error.what());
  }
  std::array<std::byte, SPILL_BLOCK_HEADER_SIZE> header_bytes{};
  std::size_t const got = file->read_at(location.offset, header_bytes.data(), header_bytes.size());
  SPILLWAY_EXPECTS(got == header_bytes.size(),
                   block_name(buffer_id, location.path, location.offset) +
                     ": file truncated inside the block header (read " + std::to_string(got) +
                     " of " + std::to_string(header_bytes.size()) + " bytes)",
                   corruption_error);
  auto const header = decode_block_header(header_bytes, location.path, location.offset, buffer_id);
  SPILLWAY_EXPECTS(header.raw_size == location.header.raw_size &&
                     header.stored_size == location.header.stored_size &&
                     header.payload_codec == location.header.payload_codec &&
                     header.checksum == location.header.checksum,
                   block_name(buffer_id, location.path, location.offset) +
                     ": block header differs from what was written",
                   corruption_error);
  buffer payload(header.stored_size, default_stream(), resource);
  std::size_t const read =
    file->read_at(location.offset + SPILL_BLOCK_HEADER_SIZE, payload.data(), header.stored_size);
  SPILLWAY_EXPECTS(read == header.stored_size,
                   block_name(buffer_id, location.path, location.offset) +
                     ": file truncated (read " + std::to_string(read) + " of " +
                     std::to_string(header.stored_size) + " payload bytes)",
                   corruption_error);
  auto const actual = checksum64(
    std::span<std::byte const>(static_cast<std::byte const*>(payload.data()), payload.size()));
  SPILLWAY_EXPECTS(actual == header.checksum,
                   block_name(buffer_id, location.path, location.offset) +
                     ": checksum mismatch (XXH3 stored " + std::to_string(header.checksum) +
                     ", computed " + std::to_string(actual) + ")",
                   corruption_error);
  return payload;
}

}  // namespace spillway
