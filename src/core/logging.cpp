#include <spillway/core/logging.hpp>

#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <string>

namespace spillway {
namespace {

spdlog::level::level_enum to_spdlog(log_level level) {
  switch (level) {
    case log_level::TRACE:
      return spdlog::level::trace;
    case log_level::DEBUG:
      return spdlog::level::debug;
    case log_level::INFO:
      return spdlog::level::info;
    case log_level::WARN:
      return spdlog::level::warn;
    case log_level::ERROR:
      return spdlog::level::err;
    case log_level::OFF:
      return spdlog::level::off;
  }
  return spdlog::level::warn;
}

log_level level_from_environment() {
  char const* text = std::getenv("SPILLWAY_LOG_LEVEL");
  if (text == nullptr) {
    return log_level::WARN;
  }
  std::string const value{text};
  for (auto level : {log_level::TRACE,
                     log_level::DEBUG,
                     log_level::INFO,
                     log_level::WARN,
                     log_level::ERROR,
                     log_level::OFF}) {
    if (value == to_string(level)) {
      return level;
    }
  }
  return log_level::WARN;
}

struct logger_state {
  std::mutex mutex;
  std::shared_ptr<spdlog::logger> logger;
  log_level level = level_from_environment();
  std::map<std::size_t, log_observer> observers;
  std::size_t next_observer_id = 0;

  logger_state()
    : logger(std::make_shared<spdlog::logger>(
        "spillway", std::make_shared<spdlog::sinks::stderr_color_sink_mt>())) {
    logger->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [spillway] [%l] %v");
    logger->set_level(spdlog::level::trace);
  }
};

logger_state& state() {
  static logger_state instance;
  return instance;
}

}  // namespace

std::string_view to_string(log_level level) {
  switch (level) {
    case log_level::TRACE:
      return "trace";
    case log_level::DEBUG:
      return "debug";
    case log_level::INFO:
      return "info";
    case log_level::WARN:
      return "warn";
    case log_level::ERROR:
      return "error";
    case log_level::OFF:
      return "off";
  }
  return "unknown";
}

void log(log_level level, std::string_view message) {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  if (level < s.level || level == log_level::OFF) {
    return;
  }
  s.logger->log(to_spdlog(level), "{}", message);
  for (auto const& [id, observer] : s.observers) {
    observer(level, message);
  }
}

void set_log_level(log_level level) {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  s.level = level;
}

log_level get_log_level() {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  return s.level;
}

scoped_log_observer::scoped_log_observer(log_observer observer) {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  id_ = s.next_observer_id++;
  s.observers.emplace(id_, std::move(observer));
}

scoped_log_observer::~scoped_log_observer() {
  auto& s = state();
  std::lock_guard lock{s.mutex};
  s.observers.erase(id_);
}

}  // namespace spillway
