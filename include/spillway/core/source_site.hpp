/**
 * @file source_site.hpp
 * @brief A call site (file, line, function) that errors and validation messages name.
 */
#pragma once

#include <cstdint>
#include <source_location>
#include <string>

namespace spillway {

/**
 * @brief Where in the source something happened. Cheap to copy; points at static strings.
 */
struct source_site {
  char const* file         = "";
  std::uint_least32_t line = 0;
  char const* function     = "";

  /** @brief The site of the caller when used as a default argument. */
  static constexpr source_site current(
    std::source_location location = std::source_location::current()) noexcept {
    return source_site{location.file_name(), location.line(), location.function_name()};
  }

  /** @return "file:line (function)" with the file's directories removed. */
  [[nodiscard]] std::string to_string() const;
};

}  // namespace spillway

#define SPILLWAY_HERE (::spillway::source_site::current())
