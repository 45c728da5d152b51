/**
 * @file communicator.hpp
 * @brief How ranks talk: tagged asynchronous point-to-point messages and three small collectives.
 *
 * One interface, two backends: `in_process_communicator` (N ranks as threads of one process, the
 * default) and `mpi_communicator` (one rank per process). The shuffle layer is written against this
 * interface only, so the same shuffle code and the same test bodies run on both.
 *
 * Semantics shared by every backend:
 * - Point to point: `send` and `receive` return futures. Messages from one rank to another with
 *   the same tag are received in the order they were sent (MPI's non-overtaking rule). A send may
 *   not complete before its receive is posted (rendezvous), so a rank must not wait on a send
 *   whose receive its peer posts only after it hears from this rank.
 * - Received bytes are allocated from the resource the receiver names, when the message is
 *   matched: every byte that arrives is under the memory layer's control.
 * - Tags are at most `max_message_tag` (23 bits, so transports with a narrow tag space work).
 * - Collectives (`barrier`, `allgather`, `alltoall`) block; every rank calls them in the same
 * order. They carry small host metadata (sizes, splitters), not data.
 * - A failure of the group (a rank threw, a peer vanished) makes pending and later operations fail
 *   with `communication_error` instead of hanging.
 */
#pragma once

#include <spillway/memory/buffer.hpp>
#include <spillway/memory/memory_kind.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <cstdint>
#include <future>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

namespace spillway {

/** @brief The largest tag a message may carry (23 bits). */
inline constexpr std::uint32_t max_message_tag = (1U << 23U) - 1U;

/** @brief `receive` from whichever rank sends first. */
inline constexpr int any_source = -1;

/** @brief The group of ranks failed: a rank threw or vanished, or the transport reported an error.
 */
class communication_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

/** @brief A message as received. */
struct received_message {
  int source        = -1;  ///< the sending rank
  std::uint32_t tag = 0;   ///< the tag it was sent with
  buffer data;             ///< the bytes, allocated from the resource given to `receive`
};

/**
 * @brief A rank's endpoint in a group of ranks.
 * @note Thread-safe: several threads of one rank may send, receive and wait at once. Collectives
 * must be called by one thread per rank at a time.
 */
class communicator {
 public:
  virtual ~communicator()                      = default;
  communicator()                               = default;
  communicator(communicator const&)            = delete;
  communicator& operator=(communicator const&) = delete;
  communicator(communicator&&)                 = delete;
  communicator& operator=(communicator&&)      = delete;

  /** @return this rank, in [0, size()) */
  [[nodiscard]] virtual int rank() const noexcept = 0;
  /** @return the number of ranks */
  [[nodiscard]] virtual int size() const noexcept = 0;

  /**
   * @brief Starts sending `bytes` to `destination` (which may be this rank) with `tag`.
   * @param kind the memory kind `bytes` live in; the bytes must stay valid and unchanged until the
   * returned future is ready
   * @return ready when the bytes have been handed over (copied or delivered); it holds
   * `communication_error` if the group failed first
   * @throws invalid_argument for a destination out of range or a tag above max_message_tag
   */
  [[nodiscard]] virtual std::future<void> send(int destination,
                                               std::uint32_t tag,
                                               std::span<std::byte const> bytes,
                                               memory_kind kind = memory_kind::HOST) = 0;

  /**
   * @brief Starts receiving the next message with `tag` from `source` (or `any_source`).
   * @param resource where the message's bytes are allocated when it is matched; an allocation
   * failure is stored in the future, and the message is lost to this receive
   * @throws invalid_argument for a source out of range or a tag above max_message_tag
   */
  [[nodiscard]] virtual std::future<received_message> receive(int source,
                                                              std::uint32_t tag,
                                                              resource_ref resource) = 0;

  /** @brief Returns once every rank has called it. @throws communication_error */
  virtual void barrier() = 0;

  /**
   * @brief Every rank contributes `mine`; every rank gets all contributions, indexed by rank.
   * @throws communication_error
   */
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> allgather(
    std::span<std::byte const> mine) = 0;

  /**
   * @brief Rank r sends `to_each[d]` to rank d (`to_each.size() == size()`); returns what each
   * rank sent to this one, indexed by source rank.
   * @throws invalid_argument when `to_each.size() != size()`; communication_error
   */
  [[nodiscard]] virtual std::vector<std::vector<std::byte>> alltoall(
    std::vector<std::vector<std::byte>> const& to_each) = 0;

  /** @return a short description of the backend, e.g. "in-process rank 2 of 4" */
  [[nodiscard]] virtual std::string describe() const = 0;
};

}  // namespace spillway
