/**
 * @file mpi_failure.cpp
 * @brief A failed MPI group: settled promises, failure notices to and from the other ranks.
 */
#include "shuffle/mpi/mpi_engine.hpp"

namespace spillway {
namespace detail {
namespace {

/** The longest failure reason a notice carries. */
constexpr int max_notice_bytes = 1024;

/** Keeps a failure notice's text alive until MPI has sent it. */
class notice_send_completion final : public completion {
 public:
  notice_send_completion(std::shared_ptr<mpi_communicator_state> owner,
                         std::shared_ptr<std::string const> text)
    : completion(std::move(owner)), text_(std::move(text)) {}
  void complete(MPI_Status const&, int) override {}
  void abandon(std::exception_ptr const&, std::chrono::steady_clock::time_point) override {}
  [[nodiscard]] bool background() const noexcept override { return true; }

 private:
  std::shared_ptr<std::string const> text_;
};

/** A failure notice from another rank arrived: fail here too (without notifying again). */
class notice_completion final : public completion {
 public:
  using completion::completion;
  void complete(MPI_Status const& status, int error) override {
    auto* state            = owner();
    state->notice_request_ = MPI_REQUEST_NULL;
    if (error != MPI_SUCCESS) {
      state->fail_group("failure notice receive failed: " + mpi_error_string(error), false);
      return;
    }
    int cancelled = 0;
    MPI_Test_cancelled(&status, &cancelled);
    if (cancelled != 0) {
      return;
    }
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string reason(state->notice_.data(), static_cast<std::size_t>(std::max(length, 0)));
    state->fail_group("rank " + std::to_string(status.MPI_SOURCE) + " failed: " + reason, false);
  }
  void abandon(std::exception_ptr const&, std::chrono::steady_clock::time_point) override {}
  [[nodiscard]] bool background() const noexcept override { return true; }
};

}  // namespace

// ---- mpi_communicator_state ----------------------------------------------------------------

void mpi_communicator_state::fail_group(std::string const& reason, bool notify) {
  std::exception_ptr error;
  {
    std::lock_guard lock(mutex_);
    if (failure_) {
      return;
    }
    failure_ = std::make_exception_ptr(
      communication_error("spillway MPI rank " + std::to_string(rank_) + ": " + reason));
    error = failure_;
  }
  for (auto& receive : receives_) {
    receive.done.set_exception(error);
  }
  receives_.clear();
  engine_.abandon(this, error);
  if (notify && control_ != MPI_COMM_NULL) {
    auto text = std::make_shared<std::string const>(
      reason.substr(0, static_cast<std::size_t>(max_notice_bytes)));
    for (int peer = 0; peer < size_; ++peer) {
      if (peer == rank_) {
        continue;
      }
      MPI_Request request = MPI_REQUEST_NULL;
      if (MPI_Isend(
            text->data(), static_cast<int>(text->size()), MPI_CHAR, peer, 0, control_, &request) ==
          MPI_SUCCESS) {
        engine_.track(request, std::make_unique<notice_send_completion>(shared_from_this(), text));
      }
    }
  }
}

void mpi_communicator_state::post_notice_receive() {
  notice_.resize(static_cast<std::size_t>(max_notice_bytes));
  check_mpi(
    MPI_Irecv(
      notice_.data(), max_notice_bytes, MPI_CHAR, MPI_ANY_SOURCE, 0, control_, &notice_request_),
    "MPI_Irecv");
  engine_.track(notice_request_, std::make_unique<notice_completion>(shared_from_this()));
}

}  // namespace detail

void mpi_communicator::fail(std::string const& reason) {
  state_->engine_.call([state = state_, &reason] { state->fail_group(reason, true); });
}

bool mpi_communicator::failed() const { return state_->failure() != nullptr; }
}  // namespace spillway
