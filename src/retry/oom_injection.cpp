#include <spillway/core/error.hpp>
#include <spillway/retry/oom_injection.hpp>

#include <charconv>
#include <string>

namespace spillway {
namespace {

std::size_t parse_count(std::string_view field, std::string_view value, std::string_view text) {
  std::size_t result      = 0;
  auto const [end, error] = std::from_chars(value.data(), value.data() + value.size(), result);
  SPILLWAY_EXPECTS(error == std::errc{} && end == value.data() + value.size(),
                   "OOM injection '" + std::string{text} + "': " + std::string{field} +
                     " must be a non-negative integer, got '" + std::string{value} + "'",
                   invalid_argument);
  return result;
}

}  // namespace

oom_injection parse_oom_injection(std::string_view text) {
  oom_injection result;
  std::string_view rest = text;
  while (!rest.empty()) {
    auto const comma       = rest.find(',');
    std::string_view field = rest.substr(0, comma);
    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
    if (field.empty()) {
      continue;
    }
    auto const equals = field.find('=');
    SPILLWAY_EXPECTS(equals != std::string_view::npos,
                     "OOM injection '" + std::string{text} + "': expected key=value, got '" +
                       std::string{field} + "'",
                     invalid_argument);
    std::string_view const key   = field.substr(0, equals);
    std::string_view const value = field.substr(equals + 1);
    if (key == "task") {
      if (value == "*") {
        result.task.reset();
      } else {
        result.task = task_id{parse_count("task", value, text)};
      }
    } else if (key == "kind") {
      if (value == "retry") {
        result.kind = injected_oom_kind::RETRY;
      } else if (value == "split") {
        result.kind = injected_oom_kind::SPLIT;
      } else if (value == "oom") {
        result.kind = injected_oom_kind::OOM;
      } else {
        SPILLWAY_FAIL("OOM injection '" + std::string{text} +
                        "': kind must be retry, split or oom, got '" + std::string{value} + "'",
                      invalid_argument);
      }
    } else if (key == "skip") {
      result.skip = parse_count("skip", value, text);
    } else if (key == "count") {
      result.count = parse_count("count", value, text);
    } else {
      SPILLWAY_FAIL("OOM injection '" + std::string{text} + "': unknown field '" +
                      std::string{key} + "' (expected task, kind, skip, count)",
                    invalid_argument);
    }
  }
  return result;
}

std::string to_string(oom_injection const& injection) {
  std::string const kind = injection.kind == injected_oom_kind::RETRY   ? "retry"
                           : injection.kind == injected_oom_kind::SPLIT ? "split"
                                                                        : "oom";
  return "task=" + (injection.task ? std::to_string(injection.task->value) : std::string{"*"}) +
         ",kind=" + kind + ",skip=" + std::to_string(injection.skip) +
         ",count=" + std::to_string(injection.count);
}

}  // namespace spillway
