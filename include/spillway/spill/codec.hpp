/**
 * @file codec.hpp
 * @brief Compression of spilled bytes (none, LZ4, Zstandard) and their 64-bit checksum (XXH3).
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

namespace spillway {

/** @brief How the host and disk tiers store bytes. */
enum class codec : std::uint8_t {
  NONE = 0,  ///< stored as is
  LZ4  = 1,  ///< LZ4 block format (liblz4), fast
  ZSTD = 2,  ///< Zstandard (libzstd) at a fast level, smaller
};

/** @return "none", "lz4" or "zstd" */
std::string_view to_string(codec value) noexcept;

/**
 * @brief Parses "none", "lz4" or "zstd" (any letter case).
 * @throws spillway::invalid_argument naming the text otherwise
 */
codec parse_codec(std::string_view text);

/** @return the most bytes `compress(value, ...)` can write for `raw_size` input bytes */
std::size_t compress_bound(codec value, std::size_t raw_size);

/**
 * @brief Compresses `source` into `destination`.
 * @param destination at least `compress_bound(value, source.size())` bytes
 * @return the bytes written to `destination`
 * @throws spillway::invalid_argument when `destination` is too small or the input too large for
 * the codec (LZ4 takes at most ~2 GiB per block)
 * @note Thread-safe; allocates only the codec's small per-call state.
 */
std::size_t compress(codec value,
                     std::span<std::byte const> source,
                     std::span<std::byte> destination);

/**
 * @brief Decompresses `source` into exactly `destination.size()` bytes.
 * @throws spillway::corruption_error when `source` is not a valid stream of exactly that size
 */
void decompress(codec value, std::span<std::byte const> source, std::span<std::byte> destination);

/** @return the XXH3 (64 bits, no seed) of `bytes`: twice XXH64's speed on large blocks */
std::uint64_t checksum64(std::span<std::byte const> bytes) noexcept;

}  // namespace spillway
