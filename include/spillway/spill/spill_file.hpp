/**
 * @file spill_file.hpp
 * @brief The on-disk format of spilled buffers: checksummed blocks appended to large files.
 *
 * A spill file is a sequence of blocks, each a fixed 48-byte header followed by the stored
 * (possibly compressed) bytes:
 *
 * | field         | bytes | meaning                                                    |
 * |---------------|-------|------------------------------------------------------------|
 * | magic         | 4     | "SPWB"                                                     |
 * | version       | 2     | `SPILL_BLOCK_VERSION`                                      |
 * | codec         | 1     | `spillway::codec` of the payload                           |
 * | reserved      | 1     | zero                                                       |
 * | buffer_id     | 8     | the spill store's id of the buffer                         |
 * | raw_size      | 8     | bytes after decompression                                  |
 * | stored_size   | 8     | bytes of payload that follow the header                    |
 * | checksum      | 8     | XXH3 (64 bits) of the payload                              |
 * | header_check  | 8     | XXH3 (64 bits) of the 40 bytes above                       |
 *
 * Integers are little-endian (the native order of every supported machine). Files are written
 * sequentially to a target size and deleted when their last live block is released; they never
 * outlive the process that wrote them, so the format needs no compatibility beyond the version.
 */
#pragma once

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/spill/codec.hpp>
#include <spillway/spill/file_system.hpp>

#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace spillway {

/** @brief "SPWB" read as a little-endian integer. */
inline constexpr std::uint32_t SPILL_BLOCK_MAGIC = 0x42575053;
/** @brief The block format version this build writes and reads. */
inline constexpr std::uint16_t SPILL_BLOCK_VERSION = 1;
/** @brief The size of a block header on disk. */
inline constexpr std::size_t SPILL_BLOCK_HEADER_SIZE = 48;

/** @brief The decoded header of one block. */
struct spill_block_header {
  codec payload_codec       = codec::NONE;
  std::uint64_t buffer_id   = 0;
  std::uint64_t raw_size    = 0;
  std::uint64_t stored_size = 0;
  std::uint64_t checksum    = 0;  ///< XXH3 (64 bits) of the stored payload
};

/** @brief Where a block lives and what it must contain when read back. */
struct spill_block_location {
  std::string path;           ///< the spill file
  std::uint64_t offset = 0;   ///< of the header inside the file
  spill_block_header header;  ///< what was written
  /** @return header plus payload bytes */
  [[nodiscard]] std::uint64_t block_size() const noexcept {
    return SPILL_BLOCK_HEADER_SIZE + header.stored_size;
  }
};

/** @return `header` encoded for disk, with its own checksum */
std::array<std::byte, SPILL_BLOCK_HEADER_SIZE> encode_block_header(
  spill_block_header const& header) noexcept;

/**
 * @brief Decodes and validates a header read from `path`.
 * @throws spillway::corruption_error naming `path`, `offset` and `expected_buffer_id` when the
 * magic, version, header checksum or codec is wrong or the header is for another buffer
 */
spill_block_header decode_block_header(std::span<std::byte const, SPILL_BLOCK_HEADER_SIZE> bytes,
                                       std::string const& path,
                                       std::uint64_t offset,
                                       std::uint64_t expected_buffer_id);

/**
 * @brief Writes the header and `payload` of one block at `offset` of `file`.
 * @throws spillway::io_error from the file system (disk full, ...)
 */
void write_spill_block(writable_file& file,
                       std::uint64_t offset,
                       spill_block_header const& header,
                       std::span<std::byte const> payload);

/**
 * @brief Reads the block at `location` and returns its payload, verified, still encoded with
 * `location.header.payload_codec`.
 * @param resource the host resource the payload is allocated from
 * @throws spillway::io_error naming the buffer and the file when the file is missing
 * @throws spillway::corruption_error naming the buffer and the file when the file is truncated,
 * the header differs from what was written or the payload fails its checksum
 */
buffer read_spill_block(file_system& files,
                        spill_block_location const& location,
                        std::uint64_t buffer_id,
                        resource_ref resource);

}  // namespace spillway
