#include <spillway/core/error_message.hpp>

#include <algorithm>
#include <string>
#include <string_view>

namespace spillway {
namespace {

constexpr std::string_view LIBRARY_PREFIX = "spillway failure at ";

}  // namespace

std::string user_message(std::string_view what) {
  // Each "spillway failure at file.cpp:12 (function signature): " goes, at the start and inside
  // (a message that carries another's, such as a disk error behind a spill failure).
  std::string message;
  std::size_t at = 0;
  while (true) {
    auto const found = what.find(LIBRARY_PREFIX, at);
    if (found == std::string_view::npos) {
      message += what.substr(at);
      break;
    }
    message += what.substr(at, found - at);
    auto const rest        = what.substr(found + LIBRARY_PREFIX.size());
    auto const after_site  = rest.find("): ");
    auto const after_colon = rest.find(": ");
    auto const cut         = after_site != std::string_view::npos    ? after_site + 3
                             : after_colon != std::string_view::npos ? after_colon + 2
                                                                     : 0;
    at                     = found + LIBRARY_PREFIX.size() + cut;
  }
  std::replace(message.begin(), message.end(), '\n', ' ');
  return message;
}

}  // namespace spillway
