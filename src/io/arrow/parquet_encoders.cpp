/**
 * @file parquet_encoders.cpp
 * @brief Encoding threads and row group slots shared by Parquet writers.
 */
#include "io/arrow/parquet_encoders.hpp"
#include "io/arrow/type_conversion.hpp"
#include "io/io_detail.hpp"

#include <algorithm>
#include <limits>

namespace spillway::detail {

std::shared_ptr<parquet_encoders::state> make_parquet_encoders_state(std::size_t threads,
                                                                     std::size_t groups) {
  auto made = std::make_shared<parquet_encoders::state>(
    static_cast<std::ptrdiff_t>(std::min<std::size_t>(groups, std::counting_semaphore<>::max())));
  made->threads = value_or_throw(
    arrow::internal::ThreadPool::Make(
      static_cast<int>(std::min<std::size_t>(threads, std::numeric_limits<int>::max()))),
    "cannot start Parquet encoding threads");
  return made;
}

}  // namespace spillway::detail
