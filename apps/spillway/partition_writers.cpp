/**
 * @file partition_writers.cpp
 * @brief Partition writers closed in the background (see partition_writers.hpp).
 */
#include "partition_writers.hpp"

#include <spillway/core/units.hpp>

#include <algorithm>
#include <exception>
#include <utility>

namespace spillway::cli {

parquet_write_options partition_parquet_options(std::size_t writers_bytes, std::size_t threads) {
  constexpr std::size_t GROUPS_IN_BOUND = 32;
  std::size_t const group_bytes =
    std::clamp(writers_bytes / GROUPS_IN_BOUND, PARQUET_SMALLEST_BOUNDED_ROW_GROUP_BYTES, 64_MiB);
  std::size_t const filling = PARTITION_WRITERS * group_bytes;
  std::size_t const slots   = std::max<std::size_t>(
    1, writers_bytes > filling ? (writers_bytes - filling) / (2 * group_bytes) : 0);
  parquet_write_options options;
  options.row_group_bytes = group_bytes;
  options.encoders =
    std::make_shared<parquet_encoders>(std::clamp<std::size_t>(threads, 1, slots), slots);
  return options;
}

partition_writers::~partition_writers() {
  for (auto& each : closing_) {
    if (each.valid()) {
      each.wait();
    }
  }
}

void partition_writers::close(std::unique_ptr<batch_writer> writer) {
  if (at_once_ == 0) {
    for (auto& path : writer->close()) {
      paths_.push_back(std::move(path));
    }
    return;
  }
  // Its close starts before the oldest is waited for: the writer may hold a slot of shared
  // encoders (a row group in flight) that the oldest close is waiting for, which only its own
  // close gives back.
  closing_.push_back(
    std::async(std::launch::async, [writer = std::move(writer)] { return writer->close(); }));
  while (closing_.size() > at_once_) {
    wait_oldest();
  }
}

void partition_writers::wait_oldest() {
  auto oldest = std::move(closing_.front());
  closing_.pop_front();
  for (auto& path : oldest.get()) {
    paths_.push_back(std::move(path));
  }
}

std::vector<std::string> partition_writers::finish() {
  std::exception_ptr failure;
  while (!closing_.empty()) {
    try {
      wait_oldest();
    } catch (...) {
      if (!failure) {
        failure = std::current_exception();
      }
    }
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
  return std::exchange(paths_, {});
}

}  // namespace spillway::cli
