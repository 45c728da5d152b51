/**
 * @file in_process_communicator.hpp
 * @brief N ranks as threads of one process: the default backend, and what most tests use.
 *
 * An `in_process_group` holds the mailboxes of its ranks. A message is copied once, from the
 * sender's bytes into a buffer the receiver allocates from its resource, when send and receive
 * match (rendezvous: the send's future becomes ready then). Collectives meet at a generation
 * barrier. `fail()` (called by `run_in_process` when a rank throws) makes every pending and later
 * operation of every rank fail with `communication_error`, so no rank hangs on a dead peer.
 */
#pragma once

#include <spillway/shuffle/communicator.hpp>

#include <functional>
#include <memory>
#include <string>

namespace spillway {

namespace detail {
class in_process_state;
}

/** @brief The shared state of `size` in-process ranks; owns their communicators. */
class in_process_group {
 public:
  /** @throws invalid_argument unless 1 <= size <= 4096 */
  explicit in_process_group(int size);
  ~in_process_group();
  in_process_group(in_process_group const&)            = delete;
  in_process_group& operator=(in_process_group const&) = delete;
  in_process_group(in_process_group&&)                 = delete;
  in_process_group& operator=(in_process_group&&)      = delete;

  /** @return the number of ranks */
  [[nodiscard]] int size() const noexcept;
  /** @return rank `r`'s communicator; lives as long as the group */
  [[nodiscard]] communicator& rank(int r);
  /** @brief Fails the group: pending and later operations throw `communication_error(reason)`. */
  void fail(std::string const& reason);

 private:
  std::shared_ptr<detail::in_process_state> state_;
  std::vector<std::unique_ptr<communicator>> ranks_;
};

/**
 * @brief Runs `body` on `size` ranks of a new group, one thread each, and waits for all.
 *
 * When a rank throws, the group is failed (so peers blocked on it throw `communication_error`
 * instead of hanging) and, once all threads have returned, the first exception thrown by a rank
 * is rethrown, preferring one that is not a `communication_error` caused by the failure.
 */
void run_in_process(int size, std::function<void(communicator&)> const& body);

}  // namespace spillway
