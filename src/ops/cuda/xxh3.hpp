/**
 * @file xxh3.hpp
 * @brief XXH3_64bits_withSeed for CUDA kernels: the XXH3 algorithm of xxHash 0.8 (BSD 2-Clause,
 * Yann Collet), written again as one host-and-device function so that a row hashes to the same
 * value on the GPU as `hash_rows` gives on the CPU with the library. The tests compare the two
 * for every length from 0 to beyond the long-input threshold. Private to the ops layer.
 */
#pragma once

#include "ops/cuda/radix_passes.hpp"

#include <cstddef>
#include <cstdint>

namespace spillway::detail::cuda {

// XXH3's default secret (kSecret), 192 bytes.
#define SPILLWAY_XXH3_SECRET                                                                      \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, \
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67,     \
    0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff,     \
    0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81,     \
    0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b,     \
    0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,     \
    0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc,     \
    0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8,     \
    0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3,     \
    0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda,     \
    0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47,     \
    0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,     \
    0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

#ifdef __CUDACC__
static __constant__ std::uint8_t xxh3_secret_on_device[192] = {SPILLWAY_XXH3_SECRET};
#endif
inline constexpr std::uint8_t xxh3_secret_on_host[192] = {SPILLWAY_XXH3_SECRET};
#undef SPILLWAY_XXH3_SECRET

namespace xxh3 {

inline constexpr std::uint64_t PRIME32_1 = 0x9E3779B1U;
inline constexpr std::uint64_t PRIME32_2 = 0x85EBCA77U;
inline constexpr std::uint64_t PRIME32_3 = 0xC2B2AE3DU;
inline constexpr std::uint64_t PRIME64_1 = 0x9E3779B185EBCA87ULL;
inline constexpr std::uint64_t PRIME64_2 = 0xC2B2AE3D27D4EB4FULL;
inline constexpr std::uint64_t PRIME64_3 = 0x165667B19E3779F9ULL;
inline constexpr std::uint64_t PRIME64_4 = 0x85EBCA77C2B2AE63ULL;
inline constexpr std::uint64_t PRIME64_5 = 0x27D4EB2F165667C5ULL;
inline constexpr std::size_t SECRET_SIZE = 192;
inline constexpr std::size_t STRIPE      = 64;

SPILLWAY_HOST_DEVICE inline std::uint8_t const* default_secret() {
#ifdef __CUDA_ARCH__
  return xxh3_secret_on_device;
#else
  return xxh3_secret_on_host;
#endif
}

SPILLWAY_HOST_DEVICE inline std::uint64_t read64(std::uint8_t const* bytes) {
  std::uint64_t value = 0;
  for (int b = 7; b >= 0; --b) {
    value = (value << 8) | bytes[b];
  }
  return value;
}

SPILLWAY_HOST_DEVICE inline std::uint32_t read32(std::uint8_t const* bytes) {
  return static_cast<std::uint32_t>(bytes[0]) | (static_cast<std::uint32_t>(bytes[1]) << 8) |
         (static_cast<std::uint32_t>(bytes[2]) << 16) |
         (static_cast<std::uint32_t>(bytes[3]) << 24);
}

SPILLWAY_HOST_DEVICE inline std::uint64_t rotl64(std::uint64_t value, int bits) {
  return (value << bits) | (value >> (64 - bits));
}

SPILLWAY_HOST_DEVICE inline std::uint64_t swap64(std::uint64_t value) {
  std::uint64_t result = 0;
  for (int b = 0; b < 8; ++b) {
    result = (result << 8) | ((value >> (8 * b)) & 0xFF);
  }
  return result;
}

SPILLWAY_HOST_DEVICE inline std::uint32_t swap32(std::uint32_t value) {
  return ((value & 0xFFU) << 24) | ((value & 0xFF00U) << 8) | ((value >> 8) & 0xFF00U) |
         (value >> 24);
}

/// The low and high halves of the 128-bit product, xor-ed.
SPILLWAY_HOST_DEVICE inline std::uint64_t mul128_fold64(std::uint64_t lhs, std::uint64_t rhs) {
#ifdef __CUDA_ARCH__
  return (lhs * rhs) ^ __umul64hi(lhs, rhs);
#else
  __extension__ using u128 = unsigned __int128;
  u128 const product       = static_cast<u128>(lhs) * rhs;
  return static_cast<std::uint64_t>(product) ^ static_cast<std::uint64_t>(product >> 64);
#endif
}

SPILLWAY_HOST_DEVICE inline std::uint64_t xxh64_avalanche(std::uint64_t h) {
  h ^= h >> 33;
  h *= PRIME64_2;
  h ^= h >> 29;
  h *= PRIME64_3;
  h ^= h >> 32;
  return h;
}

SPILLWAY_HOST_DEVICE inline std::uint64_t avalanche(std::uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ULL;
  h ^= h >> 32;
  return h;
}

SPILLWAY_HOST_DEVICE inline std::uint64_t rrmxmx(std::uint64_t h, std::uint64_t length) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ULL;
  h ^= (h >> 35) + length;
  h *= 0x9FB21C651E98DF25ULL;
  return h ^ (h >> 28);
}

SPILLWAY_HOST_DEVICE inline std::uint64_t mix16(std::uint8_t const* input,
                                                std::uint8_t const* secret,
                                                std::uint64_t seed) {
  return mul128_fold64(read64(input) ^ (read64(secret) + seed),
                       read64(input + 8) ^ (read64(secret + 8) - seed));
}

SPILLWAY_HOST_DEVICE inline std::uint64_t hash_0to16(std::uint8_t const* input,
                                                     std::size_t length,
                                                     std::uint8_t const* secret,
                                                     std::uint64_t seed) {
  if (length > 8) {
    std::uint64_t const flip1 = (read64(secret + 24) ^ read64(secret + 32)) + seed;
    std::uint64_t const flip2 = (read64(secret + 40) ^ read64(secret + 48)) - seed;
    std::uint64_t const low   = read64(input) ^ flip1;
    std::uint64_t const high  = read64(input + length - 8) ^ flip2;
    return avalanche(length + swap64(low) + high + mul128_fold64(low, high));
  }
  if (length >= 4) {
    seed ^= static_cast<std::uint64_t>(swap32(static_cast<std::uint32_t>(seed))) << 32;
    std::uint32_t const first = read32(input);
    std::uint32_t const last  = read32(input + length - 4);
    std::uint64_t const flip  = (read64(secret + 8) ^ read64(secret + 16)) - seed;
    std::uint64_t const both  = last + (static_cast<std::uint64_t>(first) << 32);
    return rrmxmx(both ^ flip, length);
  }
  if (length > 0) {
    std::uint32_t const combined = (static_cast<std::uint32_t>(input[0]) << 16) |
                                   (static_cast<std::uint32_t>(input[length >> 1]) << 24) |
                                   static_cast<std::uint32_t>(input[length - 1]) |
                                   (static_cast<std::uint32_t>(length) << 8);
    std::uint64_t const flip = (read32(secret) ^ read32(secret + 4)) + seed;
    return xxh64_avalanche(combined ^ flip);
  }
  return xxh64_avalanche(seed ^ (read64(secret + 56) ^ read64(secret + 64)));
}

SPILLWAY_HOST_DEVICE inline std::uint64_t hash_17to128(std::uint8_t const* input,
                                                       std::size_t length,
                                                       std::uint8_t const* secret,
                                                       std::uint64_t seed) {
  std::uint64_t acc = length * PRIME64_1;
  if (length > 32) {
    if (length > 64) {
      if (length > 96) {
        acc += mix16(input + 48, secret + 96, seed);
        acc += mix16(input + length - 64, secret + 112, seed);
      }
      acc += mix16(input + 32, secret + 64, seed);
      acc += mix16(input + length - 48, secret + 80, seed);
    }
    acc += mix16(input + 16, secret + 32, seed);
    acc += mix16(input + length - 32, secret + 48, seed);
  }
  acc += mix16(input, secret, seed);
  acc += mix16(input + length - 16, secret + 16, seed);
  return avalanche(acc);
}

SPILLWAY_HOST_DEVICE inline std::uint64_t hash_129to240(std::uint8_t const* input,
                                                        std::size_t length,
                                                        std::uint8_t const* secret,
                                                        std::uint64_t seed) {
  std::uint64_t acc        = length * PRIME64_1;
  std::size_t const rounds = length / 16;
  for (std::size_t i = 0; i < 8; ++i) {
    acc += mix16(input + 16 * i, secret + 16 * i, seed);
  }
  acc = avalanche(acc);
  for (std::size_t i = 8; i < rounds; ++i) {
    acc += mix16(input + 16 * i, secret + 16 * (i - 8) + 3, seed);
  }
  acc += mix16(input + length - 16, secret + 136 - 17, seed);
  return avalanche(acc);
}

SPILLWAY_HOST_DEVICE inline void accumulate_stripe(std::uint64_t* acc,
                                                   std::uint8_t const* input,
                                                   std::uint8_t const* secret) {
  for (std::size_t i = 0; i < 8; ++i) {
    std::uint64_t const value = read64(input + 8 * i);
    std::uint64_t const keyed = value ^ read64(secret + 8 * i);
    acc[i ^ 1] += value;
    acc[i] += (keyed & 0xFFFFFFFFULL) * (keyed >> 32);
  }
}

SPILLWAY_HOST_DEVICE inline void scramble(std::uint64_t* acc, std::uint8_t const* secret) {
  for (std::size_t i = 0; i < 8; ++i) {
    std::uint64_t value = acc[i];
    value ^= value >> 47;
    value ^= read64(secret + 8 * i);
    value *= PRIME32_1;
    acc[i] = value;
  }
}

SPILLWAY_HOST_DEVICE inline std::uint64_t hash_long(std::uint8_t const* input,
                                                    std::size_t length,
                                                    std::uint8_t const* secret) {
  std::uint64_t acc[8] = {
    PRIME32_3, PRIME64_1, PRIME64_2, PRIME64_3, PRIME64_4, PRIME32_2, PRIME64_5, PRIME32_1};
  std::size_t const stripes_per_block = (SECRET_SIZE - STRIPE) / 8;
  std::size_t const block             = STRIPE * stripes_per_block;
  std::size_t const blocks            = (length - 1) / block;
  for (std::size_t n = 0; n < blocks; ++n) {
    for (std::size_t s = 0; s < stripes_per_block; ++s) {
      accumulate_stripe(acc, input + n * block + s * STRIPE, secret + s * 8);
    }
    scramble(acc, secret + SECRET_SIZE - STRIPE);
  }
  std::size_t const stripes = ((length - 1) - block * blocks) / STRIPE;
  for (std::size_t s = 0; s < stripes; ++s) {
    accumulate_stripe(acc, input + blocks * block + s * STRIPE, secret + s * 8);
  }
  accumulate_stripe(acc, input + length - STRIPE, secret + SECRET_SIZE - STRIPE - 7);
  std::uint64_t result = length * PRIME64_1;
  for (std::size_t i = 0; i < 4; ++i) {
    result += mul128_fold64(acc[2 * i] ^ read64(secret + 11 + 16 * i),
                            acc[2 * i + 1] ^ read64(secret + 11 + 16 * i + 8));
  }
  return avalanche(result);
}

}  // namespace xxh3

/** @return `XXH3_64bits_withSeed(data, length, seed)` */
SPILLWAY_HOST_DEVICE inline std::uint64_t xxh3_64(void const* data,
                                                  std::size_t length,
                                                  std::uint64_t seed) {
  auto const* input          = static_cast<std::uint8_t const*>(data);
  std::uint8_t const* secret = xxh3::default_secret();
  if (length <= 16) {
    return xxh3::hash_0to16(input, length, secret, seed);
  }
  if (length <= 128) {
    return xxh3::hash_17to128(input, length, secret, seed);
  }
  if (length <= 240) {
    return xxh3::hash_129to240(input, length, secret, seed);
  }
  if (seed == 0) {
    return xxh3::hash_long(input, length, secret);
  }
  std::uint8_t custom[xxh3::SECRET_SIZE];
  for (std::size_t i = 0; i < xxh3::SECRET_SIZE / 16; ++i) {
    std::uint64_t const low  = xxh3::read64(secret + 16 * i) + seed;
    std::uint64_t const high = xxh3::read64(secret + 16 * i + 8) - seed;
    for (std::size_t b = 0; b < 8; ++b) {
      custom[16 * i + b]     = static_cast<std::uint8_t>(low >> (8 * b));
      custom[16 * i + 8 + b] = static_cast<std::uint8_t>(high >> (8 * b));
    }
  }
  return xxh3::hash_long(input, length, custom);
}

}  // namespace spillway::detail::cuda
