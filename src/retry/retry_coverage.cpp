#include <spillway/core/mutex.hpp>
#include <spillway/retry/retry_coverage.hpp>

#include <atomic>
#include <cstdlib>
#include <execinfo.h>
#include <memory>
#include <string>

namespace spillway {
namespace {

/// Frames of the allocating stack recorded per unprotected allocation.
constexpr int RECORDED_FRAMES = 12;

bool coverage_from_environment() {
  char const* value = std::getenv("SPILLWAY_RETRY_COVERAGE");
  return value != nullptr && std::string{value} != "0" && *value != '\0';
}

std::atomic<bool>& coverage_switch() {
  static std::atomic<bool> enabled{coverage_from_environment()};
  return enabled;
}

struct coverage_log {
  mutex lock;
  std::vector<unprotected_allocation> records SPILLWAY_GUARDED_BY(lock);
};

coverage_log& records() {
  static coverage_log instance;
  return instance;
}

thread_local int retry_depth = 0;

std::string capture_call_site() {
  void* frames[RECORDED_FRAMES];
  int const count = ::backtrace(frames, RECORDED_FRAMES);
  std::unique_ptr<char*, decltype(&std::free)> symbols{::backtrace_symbols(frames, count),
                                                       &std::free};
  std::string out;
  // Skip this function and the recording function.
  for (int index = 2; index < count; ++index) {
    if (!out.empty()) {
      out += '\n';
    }
    out += symbols ? symbols.get()[index] : "?";
  }
  return out;
}

}  // namespace

bool set_retry_coverage(bool enabled) { return coverage_switch().exchange(enabled); }

bool retry_coverage_enabled() { return coverage_switch().load(); }

std::vector<unprotected_allocation> unprotected_allocations() {
  auto& log = records();
  scoped_lock lock{log.lock};
  return log.records;
}

void clear_unprotected_allocations() {
  auto& log = records();
  scoped_lock lock{log.lock};
  log.records.clear();
}

bool in_retry_block() noexcept { return retry_depth > 0; }

retry_block_marker::retry_block_marker() noexcept { ++retry_depth; }
retry_block_marker::~retry_block_marker() { --retry_depth; }

namespace detail {

void note_allocation_for_coverage(task_id task, std::size_t bytes) {
  if (retry_depth > 0 || !coverage_switch().load(std::memory_order_relaxed)) {
    return;
  }
  unprotected_allocation record{task, bytes, capture_call_site()};
  auto& log = records();
  scoped_lock lock{log.lock};
  log.records.push_back(std::move(record));
}

}  // namespace detail
}  // namespace spillway
