#include <spillway/core/error.hpp>

#include <cstdio>
#include <string>

namespace spillway {

std::string source_site::to_string() const {
  std::string path{file == nullptr ? "" : file};
  auto const slash = path.find_last_of('/');
  if (slash != std::string::npos) {
    path = path.substr(slash + 1);
  }
  std::string out = path + ":" + std::to_string(line);
  if (function != nullptr && *function != '\0') {
    out += " (";
    out += function;
    out += ")";
  }
  return out;
}

namespace detail {

std::string comparison_message(char const* expression,
                               std::string const& lhs,
                               std::string const& rhs,
                               std::string const& message) {
  std::string out = message;
  if (!out.empty()) {
    out += ": ";
  }
  out += "expected ";
  out += expression;
  out += " (" + lhs + " vs " + rhs + ")";
  return out;
}

std::string to_check_string(long long value) { return std::to_string(value); }
std::string to_check_string(unsigned long long value) { return std::to_string(value); }
std::string to_check_string(double value) {
  char text[64];
  std::snprintf(text, sizeof(text), "%.17g", value);
  return text;
}

}  // namespace detail
}  // namespace spillway
