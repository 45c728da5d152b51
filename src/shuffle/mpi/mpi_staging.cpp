/**
 * @file mpi_staging.cpp
 * @brief MPI sends and receives: receives matched to messages, device bytes staged in host memory.
 */
#include "shuffle/mpi/mpi_engine.hpp"

#include <spillway/retry/retry_coverage.hpp>

namespace spillway {
namespace detail {
namespace {

/** Completes a matched receive: hands the buffer over, or reports the error. */
class receive_completion final : public completion {
 public:
  /** @param staged host memory the message arrives in, copied into the message's device
   * memory on completion; empty when it arrives in place */
  receive_completion(std::shared_ptr<mpi_communicator_state> owner,
                     std::promise<received_message> done,
                     received_message message,
                     buffer staged,
                     stream_view stream)
    : completion(std::move(owner)),
      done_(std::move(done)),
      message_(std::move(message)),
      staged_(std::move(staged)),
      stream_(stream) {}

  void complete(MPI_Status const&, int error) override {
    if (settled_) {
      return;
    }
    settled_ = true;
    if (error != MPI_SUCCESS) {
      done_.set_exception(std::make_exception_ptr(mpi_failure("MPI_Imrecv", error)));
      return;
    }
    if (staged_.size() > 0) {
      try {
        copy_bytes(message_.data.data(),
                   message_.data.kind(),
                   staged_.data(),
                   staged_.kind(),
                   staged_.size(),
                   stream_);
        staged_ = buffer{};
      } catch (...) {
        done_.set_exception(std::current_exception());
        return;
      }
    }
    done_.set_value(std::move(message_));
  }
  void abandon(std::exception_ptr const& error, std::chrono::steady_clock::time_point) override {
    if (!settled_) {
      settled_ = true;
      done_.set_exception(error);
    }
    // MPI may go on writing into the message's memory, and its resource may be gone before MPI
    // is done (a failed rank's device goes with its run): the memory is never freed, but left to
    // the process's exit. (The staged copy is of the communicator's staging resource, which
    // outlives the engine.) Without memory for the holder, the buffer stays here, as before.
    static_cast<void>(new (std::nothrow) buffer(std::move(message_.data)));
  }

 private:
  std::promise<received_message> done_;
  received_message message_;  // its buffer stays alive until MPI is done writing into it
  buffer staged_;             // likewise
  stream_view stream_;
  bool settled_ = false;
};

/** Drops a message whose buffer could not be allocated. */
class discard_completion final : public completion {
 public:
  discard_completion(std::shared_ptr<mpi_communicator_state> owner,
                     std::unique_ptr<std::byte[]> scratch)
    : completion(std::move(owner)), scratch_(std::move(scratch)) {}
  void complete(MPI_Status const&, int) override {}
  void abandon(std::exception_ptr const&, std::chrono::steady_clock::time_point) override {}
  [[nodiscard]] bool background() const noexcept override { return true; }

 private:
  std::unique_ptr<std::byte[]> scratch_;
};

int mpi_source(int source) { return source == any_source ? MPI_ANY_SOURCE : source; }

}  // namespace

bool mpi_communicator_state::poll_receives() {
  if (receives_.empty()) {
    return false;
  }
  bool progressed = false;
  for (auto& [tag, entry] : blocked_) {
    entry.any = false;
    entry.sources.clear();
  }
  for (auto it = receives_.begin(); it != receives_.end();) {
    // A receive may look only if no earlier receive that could take the same message found
    // nothing this round (a message arriving in between must go to the earlier receive).
    auto& blocked = blocked_[it->tag];
    bool const skip =
      blocked.any || (it->source == any_source
                        ? !blocked.sources.empty()
                        : std::find(blocked.sources.begin(), blocked.sources.end(), it->source) !=
                            blocked.sources.end());
    if (skip) {
      if (it->source == any_source) {
        blocked.any = true;
      }
      ++it;
      continue;
    }
    int found           = 0;
    MPI_Message message = MPI_MESSAGE_NULL;
    MPI_Status status{};
    int const code = MPI_Improbe(
      mpi_source(it->source), static_cast<int>(it->tag), p2p_, &found, &message, &status);
    if (code != MPI_SUCCESS) {
      it->done.set_exception(std::make_exception_ptr(mpi_failure("MPI_Improbe", code)));
      it         = receives_.erase(it);
      progressed = true;
      continue;
    }
    if (found == 0) {
      if (it->source == any_source) {
        blocked.any = true;
      } else {
        blocked.sources.push_back(it->source);
      }
      ++it;
      continue;
    }
    auto receive = std::move(*it);
    it           = receives_.erase(it);
    start_matched_receive(std::move(receive), message, status);
    progressed = true;
  }
  return progressed;
}

void mpi_communicator_state::start_matched_receive(pending_receive receive,
                                                   MPI_Message message,
                                                   MPI_Status const& status) {
  MPI_Count bytes = 0;
  int code        = MPI_Get_elements_x(&status, MPI_BYTE, &bytes);
  received_message out;
  buffer staged;  // host memory the message lands in when `out.data` is device memory
  out.source = status.MPI_SOURCE;
  out.tag    = static_cast<std::uint32_t>(status.MPI_TAG);
  std::exception_ptr error;
  if (code != MPI_SUCCESS || bytes < 0) {
    error = std::make_exception_ptr(mpi_failure("MPI_Get_elements_x", code));
  } else if (bytes > 0) {
    try {
      // An out-of-memory here fails the receive, whose caller recovers (see the shuffle's
      // engines): a retry block of its own.
      retry_block_marker const protected_by_the_receiver;
      out.data = buffer(static_cast<std::size_t>(bytes), default_stream(), receive.resource);
      if (needs_staging(out.data.data(), out.data.kind())) {
        staged = buffer(static_cast<std::size_t>(bytes), default_stream(), *staging_);
      }
    } catch (...) {
      error = std::current_exception();
    }
  }
  MPI_Request request = MPI_REQUEST_NULL;
  if (error) {
    // The message is lost to this receive: take it off the queue into scratch host memory that
    // lives until MPI is done (truncating into zero bytes instead crashes OpenMPI 4.1's self
    // transport and raises a fatal error on the others).
    std::unique_ptr<std::byte[]> scratch;
    try {
      scratch = std::make_unique_for_overwrite<std::byte[]>(static_cast<std::size_t>(bytes));
    } catch (std::bad_alloc const&) {
    }
    code = MPI_ERR_OTHER;
    if (scratch) {
      try {
        byte_type const type(static_cast<std::size_t>(bytes), large_bytes_);
        code = MPI_Imrecv(scratch.get(), type.count(), type.type(), &message, &request);
      } catch (...) {
        code = MPI_ERR_OTHER;
      }
    }
    if (code == MPI_SUCCESS) {
      engine_.track(request,
                    std::make_unique<discard_completion>(shared_from_this(), std::move(scratch)));
    } else {
      // The message can be neither received nor dropped: the group cannot go on correctly.
      receive.done.set_exception(error);
      fail_group("a message of " + std::to_string(bytes) + " bytes could not be dropped", true);
      return;
    }
    receive.done.set_exception(error);
    return;
  }
  try {
    byte_type const type(out.data.size(), large_bytes_);
    void* const target = staged.size() > 0 ? staged.data() : out.data.data();
    code               = MPI_Imrecv(target, type.count(), type.type(), &message, &request);
  } catch (...) {
    receive.done.set_exception(std::current_exception());
    return;
  }
  if (code != MPI_SUCCESS) {
    receive.done.set_exception(std::make_exception_ptr(mpi_failure("MPI_Imrecv", code)));
    return;
  }
  if (staged.size() > 0) {
    staged_bytes_.fetch_add(staged.size(), std::memory_order_relaxed);
  }
  engine_.track(
    request,
    std::make_unique<receive_completion>(
      shared_from_this(), std::move(receive.done), std::move(out), std::move(staged), stream_));
}

}  // namespace detail

std::future<void> mpi_communicator::send(int destination,
                                         std::uint32_t tag,
                                         std::span<std::byte const> bytes,
                                         memory_kind kind) {
  SPILLWAY_EXPECTS(destination >= 0 && destination < state_->size_,
                   "send: destination " + std::to_string(destination) + " is not a rank of " +
                     std::to_string(state_->size_),
                   invalid_argument);
  SPILLWAY_EXPECTS(tag <= max_message_tag,
                   "send: tag " + std::to_string(tag) + " is above max_message_tag",
                   invalid_argument);
  SPILLWAY_EXPECTS(
    kind != memory_kind::DISK, "send: disk is not addressable memory", invalid_argument);
  auto done   = std::make_shared<std::promise<void>>();
  auto result = done->get_future();
  // MPI moves host memory: device bytes go through a host copy that lives until MPI is done. A
  // failure to make it (no memory, a failed copy) is the send's, in its future.
  std::shared_ptr<buffer const> staged;
  if (!bytes.empty() && state_->needs_staging(bytes.data(), kind)) {
    try {
      staged = std::make_shared<buffer const>(
        bytes.data(), kind, bytes.size(), state_->stream_, *state_->staging_);
    } catch (...) {
      done->set_exception(std::current_exception());
      return result;
    }
    bytes = {static_cast<std::byte const*>(staged->data()), staged->size()};
    state_->staged_bytes_.fetch_add(staged->size(), std::memory_order_relaxed);
  }
  state_->engine_.post(detail::make_task([state = state_, destination, tag, bytes, done, staged] {
    if (auto failure = state->failure()) {
      done->set_exception(failure);
      return;
    }
    MPI_Request request = MPI_REQUEST_NULL;
    try {
      detail::byte_type const type(bytes.size(), state->large_bytes_);
      detail::check_mpi(MPI_Isend(bytes.data(),
                                  type.count(),
                                  type.type(),
                                  destination,
                                  static_cast<int>(tag),
                                  state->p2p_,
                                  &request),
                        "MPI_Isend");
    } catch (...) {
      done->set_exception(std::current_exception());
      return;
    }
    state->engine_.track(request,
                         std::make_unique<detail::void_completion>(
                           state, done, std::make_shared<int>(1), "MPI_Isend", staged));
  }));
  return result;
}

std::size_t mpi_communicator::staged_bytes() const noexcept {
  return state_->staged_bytes_.load(std::memory_order_relaxed);
}

std::future<received_message> mpi_communicator::receive(int source,
                                                        std::uint32_t tag,
                                                        resource_ref resource) {
  SPILLWAY_EXPECTS(source == any_source || (source >= 0 && source < state_->size_),
                   "receive: source " + std::to_string(source) + " is not a rank of " +
                     std::to_string(state_->size_),
                   invalid_argument);
  SPILLWAY_EXPECTS(tag <= max_message_tag,
                   "receive: tag " + std::to_string(tag) + " is above max_message_tag",
                   invalid_argument);
  std::promise<received_message> done;
  auto result = done.get_future();
  state_->engine_.post(
    detail::make_task([state = state_, source, tag, resource, done = std::move(done)]() mutable {
      if (auto failure = state->failure()) {
        done.set_exception(failure);
        return;
      }
      state->receives_.push_back({source, tag, resource, std::move(done)});
    }));
  return result;
}

}  // namespace spillway
