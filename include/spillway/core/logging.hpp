/**
 * @file logging.hpp
 * @brief The process logger: levels, a thin formatting-free API, and a capture hook for tests.
 *
 * Logging goes through spdlog in one translation unit so that headers stay light. The level is
 * read from SPILLWAY_LOG_LEVEL (trace, debug, info, warn, error, off) at first use; default warn.
 */
#pragma once

#include <functional>
#include <string>
#include <string_view>

namespace spillway {

/** @brief Severity of a log line, in increasing order. */
enum class log_level { TRACE, DEBUG, INFO, WARN, ERROR, OFF };

/** @brief Writes one line at `level` if the logger's level lets it through. Thread-safe. */
void log(log_level level, std::string_view message);

/** @brief Sets the least severe level that is written. */
void set_log_level(log_level level);

/** @return the current level */
log_level get_log_level();

/** @return the name of `level` in lower case ("warn") */
std::string_view to_string(log_level level);

/**
 * @brief Receives every line that passes the level filter, in addition to stderr.
 */
using log_observer = std::function<void(log_level, std::string_view)>;

/**
 * @brief Adds an observer for the life of the returned guard (tests capture warnings this way).
 * @note Observers are called under the logger's lock: they must not log.
 */
class scoped_log_observer {
 public:
  explicit scoped_log_observer(log_observer observer);
  ~scoped_log_observer();
  scoped_log_observer(scoped_log_observer const&)            = delete;
  scoped_log_observer& operator=(scoped_log_observer const&) = delete;
  scoped_log_observer(scoped_log_observer&&)                 = delete;
  scoped_log_observer& operator=(scoped_log_observer&&)      = delete;

 private:
  std::size_t id_;
};

}  // namespace spillway
