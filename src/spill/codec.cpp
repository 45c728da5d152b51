#include <spillway/core/error.hpp>
#include <spillway/spill/codec.hpp>

#include <climits>
#include <lz4.h>
#include <xxhash.h>
#include <zstd.h>

#include <algorithm>
#include <cctype>
#include <string>

namespace spillway {
namespace {

/// Zstandard level: 1 is the fastest standard level; spilling favours speed over ratio.
constexpr int ZSTD_LEVEL = 1;

std::string lower(std::string_view text) {
  std::string result(text);
  std::transform(result.begin(), result.end(), result.begin(), [](unsigned char c) {
    return static_cast<char>(std::tolower(c));
  });
  return result;
}

}  // namespace

std::string_view to_string(codec value) noexcept {
  switch (value) {
    case codec::NONE:
      return "none";
    case codec::LZ4:
      return "lz4";
    case codec::ZSTD:
      return "zstd";
  }
  return "unknown";
}

codec parse_codec(std::string_view text) {
  auto const name = lower(text);
  if (name == "none") {
    return codec::NONE;
  }
  if (name == "lz4") {
    return codec::LZ4;
  }
  if (name == "zstd") {
    return codec::ZSTD;
  }
  SPILLWAY_FAIL("unknown codec '" + std::string(text) + "' (expected none, lz4 or zstd)",
                invalid_argument);
}

std::size_t compress_bound(codec value, std::size_t raw_size) {
  switch (value) {
    case codec::NONE:
      return raw_size;
    case codec::LZ4:
      SPILLWAY_EXPECTS_LE(raw_size,
                          static_cast<std::size_t>(LZ4_MAX_INPUT_SIZE),
                          "lz4 block too large",
                          invalid_argument);
      return static_cast<std::size_t>(LZ4_compressBound(static_cast<int>(raw_size)));
    case codec::ZSTD:
      return ZSTD_compressBound(raw_size);
  }
  SPILLWAY_FAIL("unknown codec " + std::to_string(static_cast<int>(value)), invalid_argument);
}

std::size_t compress(codec value,
                     std::span<std::byte const> source,
                     std::span<std::byte> destination) {
  SPILLWAY_EXPECTS_LE(compress_bound(value, source.size()),
                      destination.size(),
                      "compress: destination smaller than the codec's bound",
                      invalid_argument);
  switch (value) {
    case codec::NONE:
      if (!source.empty()) {
        std::copy(source.begin(), source.end(), destination.begin());
      }
      return source.size();
    case codec::LZ4: {
      int const written =
        LZ4_compress_default(reinterpret_cast<char const*>(source.data()),
                             reinterpret_cast<char*>(destination.data()),
                             static_cast<int>(source.size()),
                             static_cast<int>(std::min<std::size_t>(destination.size(), INT_MAX)));
      SPILLWAY_EXPECTS(written > 0 || source.empty(),
                       "lz4 compression failed for " + std::to_string(source.size()) + " bytes",
                       logic_error);
      return static_cast<std::size_t>(written);
    }
    case codec::ZSTD: {
      std::size_t const written = ZSTD_compress(
        destination.data(), destination.size(), source.data(), source.size(), ZSTD_LEVEL);
      SPILLWAY_EXPECTS(ZSTD_isError(written) == 0,
                       std::string{"zstd compression failed: "} + ZSTD_getErrorName(written),
                       logic_error);
      return written;
    }
  }
  SPILLWAY_FAIL("unknown codec " + std::to_string(static_cast<int>(value)), invalid_argument);
}

void decompress(codec value, std::span<std::byte const> source, std::span<std::byte> destination) {
  switch (value) {
    case codec::NONE:
      SPILLWAY_EXPECTS_EQ(source.size(),
                          destination.size(),
                          "uncompressed block has the wrong size",
                          corruption_error);
      if (!source.empty()) {
        std::copy(source.begin(), source.end(), destination.begin());
      }
      return;
    case codec::LZ4: {
      SPILLWAY_EXPECTS(source.size() <= INT_MAX && destination.size() <= INT_MAX,
                       "lz4 block too large: " + std::to_string(source.size()),
                       corruption_error);
      int const written = LZ4_decompress_safe(reinterpret_cast<char const*>(source.data()),
                                              reinterpret_cast<char*>(destination.data()),
                                              static_cast<int>(source.size()),
                                              static_cast<int>(destination.size()));
      SPILLWAY_EXPECTS(written >= 0 && static_cast<std::size_t>(written) == destination.size(),
                       "lz4 block does not decompress to " + std::to_string(destination.size()) +
                         " bytes (got " + std::to_string(written) + ")",
                       corruption_error);
      return;
    }
    case codec::ZSTD: {
      std::size_t const written =
        ZSTD_decompress(destination.data(), destination.size(), source.data(), source.size());
      SPILLWAY_EXPECTS(ZSTD_isError(written) == 0,
                       std::string{"zstd block is corrupt: "} + ZSTD_getErrorName(written),
                       corruption_error);
      SPILLWAY_EXPECTS_EQ(
        written, destination.size(), "zstd block has the wrong size", corruption_error);
      return;
    }
  }
  SPILLWAY_FAIL("unknown codec " + std::to_string(static_cast<int>(value)), corruption_error);
}

std::uint64_t checksum64(std::span<std::byte const> bytes) noexcept {
  return XXH3_64bits(bytes.data(), bytes.size());
}

}  // namespace spillway
