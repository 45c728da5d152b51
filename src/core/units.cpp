#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>

#include <array>
#include <cctype>
#include <cmath>
#include <cstdio>
#include <string>

namespace spillway {

std::string format_bytes(std::size_t bytes) {
  static constexpr std::array<char const*, 5> suffixes{"KiB", "MiB", "GiB", "TiB", "PiB"};
  if (bytes < 1024) {
    return std::to_string(bytes) + " B";
  }
  double value      = static_cast<double>(bytes);
  std::size_t index = 0;
  value /= 1024.0;
  while (value >= 1024.0 && index + 1 < suffixes.size()) {
    value /= 1024.0;
    ++index;
  }
  char text[32];
  std::snprintf(text, sizeof(text), "%.2f %s", value, suffixes[index]);
  return text;
}

std::size_t parse_bytes(std::string_view text) {
  auto const fail = [&] {
    SPILLWAY_FAIL("not a byte size: '" + std::string{text} +
                    "' (expected e.g. 4096, 64KiB, 512MiB, 2GiB, 1.5GB)",
                  invalid_argument);
  };
  std::size_t position = 0;
  while (position < text.size() && std::isspace(static_cast<unsigned char>(text[position]))) {
    ++position;
  }
  std::size_t const number_begin = position;
  bool seen_digit                = false;
  bool seen_point                = false;
  while (position < text.size()) {
    char const c = text[position];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      seen_digit = true;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
    ++position;
  }
  if (!seen_digit) {
    fail();
  }
  double const number = std::stod(std::string{text.substr(number_begin, position - number_begin)});
  while (position < text.size() && std::isspace(static_cast<unsigned char>(text[position]))) {
    ++position;
  }
  std::string suffix;
  for (; position < text.size(); ++position) {
    char const c = text[position];
    if (std::isspace(static_cast<unsigned char>(c))) {
      break;
    }
    suffix += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  }
  while (position < text.size() && std::isspace(static_cast<unsigned char>(text[position]))) {
    ++position;
  }
  if (position != text.size()) {
    fail();
  }
  double multiplier = 1.0;
  if (suffix.empty() || suffix == "b") {
    multiplier = 1.0;
  } else if (suffix == "k" || suffix == "kib" || suffix == "ki") {
    multiplier = 1024.0;
  } else if (suffix == "m" || suffix == "mib" || suffix == "mi") {
    multiplier = 1024.0 * 1024.0;
  } else if (suffix == "g" || suffix == "gib" || suffix == "gi") {
    multiplier = 1024.0 * 1024.0 * 1024.0;
  } else if (suffix == "t" || suffix == "tib" || suffix == "ti") {
    multiplier = 1024.0 * 1024.0 * 1024.0 * 1024.0;
  } else if (suffix == "kb") {
    multiplier = 1e3;
  } else if (suffix == "mb") {
    multiplier = 1e6;
  } else if (suffix == "gb") {
    multiplier = 1e9;
  } else if (suffix == "tb") {
    multiplier = 1e12;
  } else {
    fail();
  }
  double const bytes = std::round(number * multiplier);
  if (!(bytes >= 0.0) || bytes > 1.8e19) {
    fail();
  }
  return static_cast<std::size_t>(bytes);
}

}  // namespace spillway
