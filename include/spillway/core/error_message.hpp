/**
 * @file error_message.hpp
 * @brief The message of a spillway error as its user should read it.
 */
#pragma once

#include <string>
#include <string_view>

namespace spillway {

/**
 * @brief The message of a library exception without its "spillway failure at file:line (fn): "
 * prefixes (at the start, and inside a message that carries another's), on one line: what
 * failed and where (the path), not the call site.
 */
[[nodiscard]] std::string user_message(std::string_view what);

}  // namespace spillway
