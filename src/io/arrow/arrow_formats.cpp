/**
 * @file arrow_formats.cpp
 * @brief Parquet and Arrow IPC through Arrow C++: whether they are built in, and Arrow's thread
 * pools. The readers and writers are in parquet_reader.cpp, parquet_writer.cpp and arrow_ipc.cpp.
 */
#include <spillway/core/error.hpp>
#include <spillway/io/file_format.hpp>

#include <arrow/io/interfaces.h>
#include <arrow/util/thread_pool.h>

#include <algorithm>
#include <cstddef>

namespace spillway {

bool arrow_io_available() noexcept { return true; }

void set_arrow_thread_pools(std::size_t threads) {
  SPILLWAY_EXPECTS(threads >= 1, "Arrow's thread pools need at least one thread");
  int const capacity = static_cast<int>(std::min<std::size_t>(threads, 1024));
  auto const cpu     = arrow::SetCpuThreadPoolCapacity(capacity);
  SPILLWAY_EXPECTS(cpu.ok(), "sizing Arrow's CPU thread pool: " + cpu.ToString(), io_error);
  auto const io = arrow::io::SetIOThreadPoolCapacity(capacity);
  SPILLWAY_EXPECTS(io.ok(), "sizing Arrow's I/O thread pool: " + io.ToString(), io_error);
}

}  // namespace spillway
