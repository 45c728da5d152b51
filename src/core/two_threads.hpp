/**
 * @file two_threads.hpp
 * @brief Internal: running one piece of work on both cores, for every layer that needs it.
 */
#pragma once

#include <cstddef>
#include <exception>
#include <thread>

namespace spillway::detail {

/** @brief Runs `work(0)` here and `work(1)` on a second thread; rethrows the first failure. */
template <typename Work>
void run_on_two_threads(Work const& work) {
  std::exception_ptr failure;
  std::thread helper{[&] {
    try {
      work(std::size_t{1});
    } catch (...) {
      failure = std::current_exception();
    }
  }};
  std::exception_ptr own_failure;
  try {
    work(std::size_t{0});
  } catch (...) {
    own_failure = std::current_exception();
  }
  helper.join();
  if (own_failure) {
    std::rethrow_exception(own_failure);
  }
  if (failure) {
    std::rethrow_exception(failure);
  }
}

}  // namespace spillway::detail
