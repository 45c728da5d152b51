/**
 * @file error.hpp
 * @brief The spillway exception tree and the checking macros that throw into it.
 *
 * Every error is rooted in a standard exception type so that callers who do not know spillway can
 * still catch it. The tree says who handles a failure:
 *
 * | type               | base                 | who handles it                                  |
 * |--------------------|----------------------|-------------------------------------------------|
 * | `logic_error`      | `std::logic_error`   | nobody: a bug in spillway or in its caller      |
 * | `invalid_argument` | `std::invalid_argument` | the caller: bad input, fix the call          |
 * | `out_of_memory`    | `std::bad_alloc`     | the memory layer: spill, retry, split (retry/)  |
 * | `io_error`         | `std::runtime_error` | the user: a file, a directory, a full disk      |
 * | `corruption_error` | `io_error`           | the user: data on disk is not what was written  |
 * | `not_supported`    | `std::logic_error`   | the caller: a type or backend that is absent    |
 * | `cancelled_error`  | `std::runtime_error` | the task's owner: the task was killed           |
 * | `timeout_error`    | `std::runtime_error` | the task's owner: an optional wait limit passed |
 */
#pragma once

#include <spillway/core/source_site.hpp>

#include <cstddef>
#include <new>
#include <source_location>
#include <stdexcept>
#include <string>

namespace spillway {

/** @brief A broken invariant: a bug, never caused by user input. */
class logic_error : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/** @brief An argument the caller can fix: an unknown column, a bad size, mismatched types. */
class invalid_argument : public std::invalid_argument {
 public:
  using std::invalid_argument::invalid_argument;
};

/** @brief A feature, type or backend that this build does not provide. */
class not_supported : public std::logic_error {
 public:
  using std::logic_error::logic_error;
};

/** @brief A failure of the file system or of a file's contents. */
class io_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** @brief Stored data that fails its checksum or is truncated; never returned as wrong data. */
class corruption_error : public io_error {
 public:
  using io_error::io_error;
};

/** @brief A waiting operation was cancelled (its task was killed). */
class cancelled_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** @brief A waiting operation gave up after its optional timeout. */
class timeout_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/**
 * @brief A resource could not satisfy an allocation.
 *
 * Carries the sizes involved so that the message and the retry layer both see them.
 * @note `std::bad_alloc` has no string constructor; the message lives here.
 */
class out_of_memory : public std::bad_alloc {
 public:
  /**
   * @param message what failed, ending with the sizes
   * @param requested_bytes the size of the failed request
   * @param available_bytes what the resource had left when it failed (0 when unknown)
   * @param capacity_bytes the resource's capacity (0 when unbounded or unknown)
   */
  explicit out_of_memory(std::string message,
                         std::size_t requested_bytes = 0,
                         std::size_t available_bytes = 0,
                         std::size_t capacity_bytes  = 0)
    : message_(std::move(message)),
      requested_bytes_(requested_bytes),
      available_bytes_(available_bytes),
      capacity_bytes_(capacity_bytes) {}

  [[nodiscard]] char const* what() const noexcept override { return message_.c_str(); }
  [[nodiscard]] std::size_t requested_bytes() const noexcept { return requested_bytes_; }
  [[nodiscard]] std::size_t available_bytes() const noexcept { return available_bytes_; }
  [[nodiscard]] std::size_t capacity_bytes() const noexcept { return capacity_bytes_; }

 private:
  std::string message_;
  std::size_t requested_bytes_;
  std::size_t available_bytes_;
  std::size_t capacity_bytes_;
};

namespace detail {

/** @brief Builds "spillway failure at file:line: message" and throws it as `Exception`. */
template <typename Exception>
[[noreturn]] void throw_at(source_site site, std::string const& message) {
  throw Exception(std::string{"spillway failure at "} + site.to_string() + ": " + message);
}

/** @brief Formats a comparison failure: "a <= b failed (3 vs 2): message". */
std::string comparison_message(char const* expression,
                               std::string const& lhs,
                               std::string const& rhs,
                               std::string const& message);

std::string to_check_string(long long value);
std::string to_check_string(unsigned long long value);
std::string to_check_string(double value);
inline std::string to_check_string(std::string const& value) { return value; }

template <typename T>
std::string to_check_string_any(T const& value) {
  if constexpr (std::is_floating_point_v<T>) {
    return to_check_string(static_cast<double>(value));
  } else if constexpr (std::is_integral_v<T> && std::is_signed_v<T>) {
    return to_check_string(static_cast<long long>(value));
  } else if constexpr (std::is_integral_v<T> || std::is_enum_v<T>) {
    return to_check_string(static_cast<unsigned long long>(value));
  } else {
    return to_check_string(std::string{value});
  }
}

}  // namespace detail
}  // namespace spillway

/**
 * @brief Throws `exception_type` (default `spillway::logic_error`) with the site and `message` when
 * `condition` is false. `condition` must be free of side effects.
 *
 * `SPILLWAY_EXPECTS(bytes <= limit, "limit exceeded: " + std::to_string(bytes), invalid_argument)`
 */
#define SPILLWAY_EXPECTS(...) \
  SPILLWAY_EXPECTS_SELECT(__VA_ARGS__, SPILLWAY_EXPECTS_3, SPILLWAY_EXPECTS_2, )(__VA_ARGS__)
#define SPILLWAY_EXPECTS_SELECT(_1, _2, _3, NAME, ...) NAME
#define SPILLWAY_EXPECTS_2(condition, message) \
  SPILLWAY_EXPECTS_3(condition, message, ::spillway::logic_error)
#define SPILLWAY_EXPECTS_3(condition, message, exception_type)                           \
  do {                                                                                   \
    if (!(condition)) [[unlikely]] {                                                     \
      ::spillway::detail::throw_at<exception_type>(SPILLWAY_HERE, std::string{message}); \
    }                                                                                    \
  } while (0)

/** @brief Throws `exception_type` unconditionally with the site and `message`. */
#define SPILLWAY_FAIL(message, exception_type) \
  ::spillway::detail::throw_at<exception_type>(SPILLWAY_HERE, std::string{message})

#define SPILLWAY_EXPECTS_OP(op, lhs, rhs, message, exception_type) \
  do {                                                             \
    auto const& spillway_lhs_ = (lhs);                             \
    auto const& spillway_rhs_ = (rhs);                             \
    if (!(spillway_lhs_ op spillway_rhs_)) [[unlikely]] {          \
      ::spillway::detail::throw_at<exception_type>(                \
        SPILLWAY_HERE,                                             \
        ::spillway::detail::comparison_message(                    \
          #lhs " " #op " " #rhs,                                   \
          ::spillway::detail::to_check_string_any(spillway_lhs_),  \
          ::spillway::detail::to_check_string_any(spillway_rhs_),  \
          std::string{message}));                                  \
    }                                                              \
  } while (0)

/** @brief Checks `lhs <= rhs`, printing both operands on failure. */
#define SPILLWAY_EXPECTS_LE(lhs, rhs, message, exception_type) \
  SPILLWAY_EXPECTS_OP(<=, lhs, rhs, message, exception_type)
/** @brief Checks `lhs < rhs`, printing both operands on failure. */
#define SPILLWAY_EXPECTS_LT(lhs, rhs, message, exception_type) \
  SPILLWAY_EXPECTS_OP(<, lhs, rhs, message, exception_type)
/** @brief Checks `lhs == rhs`, printing both operands on failure. */
#define SPILLWAY_EXPECTS_EQ(lhs, rhs, message, exception_type) \
  SPILLWAY_EXPECTS_OP(==, lhs, rhs, message, exception_type)
