/**
 * @file parameter_printers.hpp
 * @brief How GoogleTest prints spillway's enums when they are test parameters.
 *
 * Without a printer GoogleTest shows an enum class as its raw bytes ("1-byte object <01>"),
 * in `GetParam() = ...` of test listings (and so in CTest's names) and in failure reports.
 * GoogleTest finds `PrintTo` by argument-dependent lookup, so these live in the enums'
 * namespace. A test's own parameter struct gets its `PrintTo` next to the struct.
 */
#pragma once

#include <spillway/io/file_format.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/shuffle/shuffle_options.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/spill/codec.hpp>

#include <ostream>

namespace spillway {

/** @brief Prints "cpu" or "cuda". */
inline void PrintTo(device_backend backend, std::ostream* os) { *os << to_string(backend); }

/** @brief Prints "none", "lz4" or "zstd". */
inline void PrintTo(codec value, std::ostream* os) { *os << to_string(value); }

/** @brief Prints "parquet", "arrow", "arrows" or "csv". */
inline void PrintTo(file_format format, std::ostream* os) { *os << extension(format); }

/** @brief Prints "MERGE", "SAMPLE" or "AUTO". */
inline void PrintTo(sort_strategy strategy, std::ostream* os) { *os << to_string(strategy); }

/** @brief Prints "pull" or "push". */
inline void PrintTo(shuffle_mode mode, std::ostream* os) {
  *os << (mode == shuffle_mode::PULL ? "pull" : "push");
}

/** @brief Prints "hash" or "range". */
inline void PrintTo(partition_method method, std::ostream* os) {
  *os << (method == partition_method::HASH ? "hash" : "range");
}

}  // namespace spillway
