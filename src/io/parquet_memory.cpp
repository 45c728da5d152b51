/**
 * @file parquet_memory.cpp
 * @brief A Parquet writer's encode threads and row group size within its memory bound, and the
 * encoders writers share.
 */
#include "io/io_detail.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/parquet.hpp>

#include <algorithm>
#include <cstddef>
#include <string>

namespace spillway {

parquet_encoders::parquet_encoders(std::size_t threads, std::size_t groups)
  : threads_(threads), groups_(groups) {
  SPILLWAY_EXPECTS(threads > 0 && groups > 0,
                   "parquet_encoders: " + std::to_string(threads) + " threads and " +
                     std::to_string(groups) + " row groups; at least one of each",
                   invalid_argument);
  state_ = detail::make_parquet_encoders_state(threads, groups);
}

parquet_write_options parquet_write_options_within(parquet_write_options options) {
  std::size_t const bytes = options.memory_bytes;
  if (bytes == 0) {
    return options;
  }
  constexpr std::size_t copies = 2;  // Arrow's arrays and the encoded pages
  constexpr std::size_t least  = PARQUET_LEAST_BOUNDED_ROW_GROUP_BYTES;
  if (options.encoders) {
    // Shared encoders bound the row groups in flight: the bound is the one being filled's.
    options.row_group_bytes = std::min(
      options.row_group_bytes, std::max(bytes / copies, PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES));
    return options;
  }
  if (options.encode_threads > 0) {
    // One row group being filled, the others encoding; fewer threads before smaller row groups.
    std::size_t const groups_at_least = std::max<std::size_t>(bytes / (copies * least), 2);
    options.encode_threads            = std::min(options.encode_threads, groups_at_least - 1);
  }
  // Within the bound, down to the smallest row group a reader still reads well.
  std::size_t const fitting = bytes / (copies * (options.encode_threads + 1));
  options.row_group_bytes =
    std::min(options.row_group_bytes, std::max(fitting, PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES));
  return options;
}

}  // namespace spillway
