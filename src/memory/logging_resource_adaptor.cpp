#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/logging_resource_adaptor.hpp>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <functional>
#include <istream>
#include <ostream>
#include <sstream>
#include <system_error>
#include <thread>
#include <unordered_map>
#include <vector>

namespace spillway {

logging_resource_adaptor::logging_resource_adaptor(resource_ref upstream, std::ostream& output)
  : upstream_(upstream), output_(&output), start_(std::chrono::steady_clock::now()) {
  scoped_lock lock{mutex_};
  *output_ << "thread,time_ns,action,pointer,bytes,alignment\n";
}

logging_resource_adaptor::logging_resource_adaptor(resource_ref upstream, std::string const& path)
  : upstream_(upstream),
    file_(std::make_unique<std::ofstream>(path, std::ios::out | std::ios::trunc)),
    output_(file_.get()),
    start_(std::chrono::steady_clock::now()) {
  SPILLWAY_EXPECTS(file_->is_open(), "cannot open allocation log for writing: " + path, io_error);
  scoped_lock lock{mutex_};
  *output_ << "thread,time_ns,action,pointer,bytes,alignment\n";
}

logging_resource_adaptor::~logging_resource_adaptor() { flush(); }

void logging_resource_adaptor::flush() {
  scoped_lock lock{mutex_};
  output_->flush();
}

void logging_resource_adaptor::write(char const* action,
                                     void const* pointer,
                                     std::size_t bytes,
                                     std::size_t alignment) {
  auto const elapsed =
    std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start_)
      .count();
  auto const thread = std::hash<std::thread::id>{}(std::this_thread::get_id());
  scoped_lock lock{mutex_};
  *output_ << thread << ',' << elapsed << ',' << action << ','
           << reinterpret_cast<std::uintptr_t>(pointer) << ',' << bytes << ',' << alignment << '\n';
}

void* logging_resource_adaptor::do_allocate(std::size_t bytes,
                                            std::size_t alignment,
                                            stream_view stream) {
  void* pointer = nullptr;
  try {
    pointer = upstream_.allocate(bytes, alignment, stream);
  } catch (...) {
    write("failure", nullptr, bytes, alignment);
    throw;
  }
  write("allocate", pointer, bytes, alignment);
  return pointer;
}

void logging_resource_adaptor::do_deallocate(void* pointer,
                                             std::size_t bytes,
                                             std::size_t alignment,
                                             stream_view stream) noexcept {
  try {
    write("free", pointer, bytes, alignment);
  } catch (...) {  // NOLINT(bugprone-empty-catch): a log line is not worth a leak
  }
  upstream_.deallocate(pointer, bytes, alignment, stream);
}

namespace {

/// Parses all of `field` as an unsigned number; false when it is empty, signed or has trailing
/// text.
template <typename Unsigned>
bool parse_unsigned(std::string const& field, Unsigned& value) noexcept {
  char const* const end    = field.data() + field.size();
  auto const [stop, error] = std::from_chars(field.data(), end, value);
  return !field.empty() && error == std::errc{} && stop == end;
}

}  // namespace

replay_result replay_allocation_log(std::istream& log, resource_ref resource) {
  struct live {
    void* pointer;
    std::size_t bytes;
    std::size_t alignment;
  };
  // A multimap: every zero-byte allocation is logged at pointer 0, and each of their frees must
  // still find one.
  using live_map = std::unordered_multimap<std::uintptr_t, live>;
  live_map outstanding;
  // When a malformed line throws, frees what the replay allocated before it. (The normal path
  // frees and clears the map at the end, inside the timed part.)
  struct release_outstanding {
    live_map& outstanding;
    resource_ref resource;
    ~release_outstanding() {
      for (auto const& [logged, allocation] : outstanding) {
        resource.deallocate(allocation.pointer, allocation.bytes, allocation.alignment);
      }
    }
  } const release{outstanding, resource};
  replay_result result;
  std::size_t current = 0;
  std::string line;
  std::size_t line_number = 0;
  auto const start        = std::chrono::steady_clock::now();
  while (std::getline(log, line)) {
    ++line_number;
    if (line_number == 1 || line.empty()) {
      continue;
    }
    std::vector<std::string> fields;
    std::stringstream split{line};
    for (std::string field; std::getline(split, field, ',');) {
      fields.push_back(field);
    }
    SPILLWAY_EXPECTS(fields.size() == 6,
                     "malformed allocation log line " + std::to_string(line_number) + ": '" + line +
                       "' (expected 6 fields)",
                     invalid_argument);
    std::uintptr_t logged_pointer = 0;
    std::size_t bytes             = 0;
    std::size_t alignment         = 0;
    bool const numbers_parsed     = parse_unsigned(fields[3], logged_pointer) &&
                                parse_unsigned(fields[4], bytes) &&
                                parse_unsigned(fields[5], alignment);
    SPILLWAY_EXPECTS(
      numbers_parsed,
      "malformed number in allocation log line " + std::to_string(line_number) + ": '" + line + "'",
      invalid_argument);
    if (fields[2] == "allocate") {
      // A logged allocation succeeded, so its alignment was valid; a failure line may carry the
      // invalid alignment that made it fail, and is not checked.
      SPILLWAY_EXPECTS(is_power_of_two(alignment),
                       "malformed allocation log line " + std::to_string(line_number) +
                         ": alignment " + std::to_string(alignment) + " is not a power of two",
                       invalid_argument);
      try {
        void* pointer = resource.allocate(bytes, alignment);
        outstanding.emplace(logged_pointer, live{pointer, bytes, alignment});
        ++result.allocations;
        current += bytes;
        result.peak_bytes = std::max(result.peak_bytes, current);
      } catch (out_of_memory const&) {
        ++result.failures;
      }
    } else if (fields[2] == "free") {
      auto const found = outstanding.find(logged_pointer);
      if (found != outstanding.end()) {
        resource.deallocate(found->second.pointer, found->second.bytes, found->second.alignment);
        current -= found->second.bytes;
        outstanding.erase(found);
        ++result.frees;
      }
    } else if (fields[2] != "failure") {
      SPILLWAY_FAIL(
        "unknown action '" + fields[2] + "' in allocation log line " + std::to_string(line_number),
        invalid_argument);
    }
  }
  for (auto const& [logged, allocation] : outstanding) {
    resource.deallocate(allocation.pointer, allocation.bytes, allocation.alignment);
  }
  outstanding.clear();
  result.elapsed = std::chrono::steady_clock::now() - start;
  return result;
}

}  // namespace spillway
