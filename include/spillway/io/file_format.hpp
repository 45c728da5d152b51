/**
 * @file file_format.hpp
 * @brief The file formats spillway reads and writes.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace spillway {

/** @brief A file format. PARQUET and the Arrow IPC formats need a build with Arrow. */
enum class file_format : std::uint8_t {
  PARQUET,           ///< Apache Parquet
  ARROW_IPC_FILE,    ///< Arrow IPC file format (Feather v2), random access
  ARROW_IPC_STREAM,  ///< Arrow IPC streaming format
  CSV,               ///< comma-separated values with a header row
};

/** @return "parquet", "arrow", "arrows" or "csv": the file extension and the format's name */
constexpr std::string_view extension(file_format format) noexcept {
  switch (format) {
    case file_format::PARQUET:
      return "parquet";
    case file_format::ARROW_IPC_FILE:
      return "arrow";
    case file_format::ARROW_IPC_STREAM:
      return "arrows";
    case file_format::CSV:
      return "csv";
  }
  return "unknown";
}

/** @return true when this build reads and writes Parquet and Arrow IPC */
bool arrow_io_available() noexcept;

/**
 * @brief Sizes Arrow's CPU and I/O thread pools (Parquet and Arrow IPC decoding) to `threads`
 * (at least 1; capped at 1024), to match the worker pool; does nothing in a build without
 * Arrow. Call it at start-up, before any file is read.
 * @throws io_error when Arrow refuses
 */
void set_arrow_thread_pools(std::size_t threads);

}  // namespace spillway
