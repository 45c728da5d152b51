/**
 * @file watchdog.hpp
 * @brief Runs a test body that could hang on its own thread and aborts the test binary when the
 * body does not finish in time, so that a hang fails CI instead of blocking it; and polls
 * observable state without deciding anything by the clock.
 *
 * Used by the lease and retry suites (tests/retry includes it as "lease/watchdog.hpp").
 */
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <mutex>
#include <stdexcept>
#include <thread>
#include <utility>

namespace spillway::test {

/// How long a body may run before the watchdog declares it hung (sanitizer builds included).
inline constexpr std::chrono::seconds WATCHDOG_LIMIT{30};

/**
 * @brief Runs `body` on a new thread and waits up to `limit` for it. When it does not finish,
 * prints the test's name and aborts the process (a hung thread cannot be stopped safely).
 * Exceptions thrown by `body` are rethrown here; gtest assertions inside `body` report as usual
 * (an `ASSERT_*` returns from `body`).
 */
template <typename Body>
void run_with_watchdog(Body&& body, std::chrono::seconds limit = WATCHDOG_LIMIT) {
  std::mutex mutex;
  std::condition_variable finished;
  bool done = false;
  std::exception_ptr error;
  std::thread runner([&] {
    try {
      body();
    } catch (...) {
      error = std::current_exception();
    }
    std::lock_guard lock{mutex};
    done = true;
    finished.notify_all();
  });
  {
    std::unique_lock lock{mutex};
    if (!finished.wait_for(lock, limit, [&] { return done; })) {
      auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
      std::fprintf(stderr,
                   "WATCHDOG: %s.%s did not finish within %lld s; it hangs. Aborting.\n",
                   info != nullptr ? info->test_suite_name() : "?",
                   info != nullptr ? info->name() : "?",
                   static_cast<long long>(limit.count()));
      std::fflush(stderr);
      std::abort();
    }
  }
  runner.join();
  if (error) {
    std::rethrow_exception(error);
  }
}

/**
 * @brief A thread running `body` whose exceptions become test failures instead of
 * `std::terminate`, so that a protocol bug fails one test rather than the whole binary.
 */
template <typename Body>
std::thread checked_thread(Body body) {
  return std::thread([body = std::move(body)]() mutable {
    try {
      body();
    } catch (std::exception const& error) {
      ADD_FAILURE() << "a test thread threw: " << error.what();
    } catch (...) {
      ADD_FAILURE() << "a test thread threw a non-standard exception";
    }
  });
}

/**
 * @brief Polls `predicate` until it holds. Use inside `run_with_watchdog`: a state that is never
 * reached is then a failure, not a hang. The pause between polls only saves CPU; it decides
 * nothing.
 */
template <typename Predicate>
void wait_until(Predicate&& predicate) {
  while (!predicate()) {
    std::this_thread::sleep_for(std::chrono::microseconds{200});
  }
}

}  // namespace spillway::test
