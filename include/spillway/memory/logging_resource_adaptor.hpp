/**
 * @file logging_resource_adaptor.hpp
 * @brief Writes every allocate and free to a CSV log, and replays such a log against a resource.
 */
#pragma once

#include <spillway/core/mutex.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <chrono>
#include <cstddef>
#include <fstream>
#include <iosfwd>
#include <memory>
#include <string>

namespace spillway {

/**
 * @brief Logs `thread,time_ns,action,pointer,bytes,alignment` for each event, action being
 * `allocate`, `free` or `failure` (an allocation that threw). The first line is that header.
 * @note Thread-safe; lines are written whole under a lock. Times are nanoseconds since the
 * adaptor was made.
 */
class logging_resource_adaptor final : public memory_resource {
 public:
  /** @brief Logs to `output`, which must outlive the adaptor. */
  logging_resource_adaptor(resource_ref upstream, std::ostream& output);
  /**
   * @brief Logs to a new file at `path`.
   * @throws spillway::io_error when the file cannot be opened
   */
  logging_resource_adaptor(resource_ref upstream, std::string const& path);
  ~logging_resource_adaptor() override;

  /** @brief Flushes the log. */
  void flush();
  [[nodiscard]] resource_ref upstream() const noexcept { return upstream_; }

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override;
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override;
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }
  void write(char const* action, void const* pointer, std::size_t bytes, std::size_t alignment);

  resource_ref upstream_;
  std::unique_ptr<std::ofstream> file_;
  mutex mutex_;
  std::ostream* output_ SPILLWAY_GUARDED_BY(mutex_);
  std::chrono::steady_clock::time_point const start_;
};

/** @brief What a replay did. */
struct replay_result {
  std::size_t allocations = 0;
  std::size_t frees       = 0;
  std::size_t failures    = 0;  ///< allocations that threw during the replay
  std::size_t peak_bytes  = 0;  ///< the most bytes outstanding during the replay
  std::chrono::nanoseconds elapsed{0};
};

/**
 * @brief Replays a log written by `logging_resource_adaptor` against `resource` on one thread, in
 * log order, mapping logged pointers to the new ones; frees whatever is outstanding at the end.
 * @throws spillway::invalid_argument naming the line when the log is malformed
 */
replay_result replay_allocation_log(std::istream& log, resource_ref resource);

}  // namespace spillway
