/**
 * @file mpi_engine.hpp
 * @brief The MPI progress thread (`mpi_engine`) and a communicator's state; private to the layer.
 *
 * Defined in mpi_progress.cpp (the progress thread), mpi_staging.cpp (sends and receives, device
 * bytes staged through host memory), mpi_failure.cpp (a failed group and its notices);
 * mpi_communicator.cpp holds `mpi_environment` and the collectives.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>

#include <climits>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <deque>
#include <exception>
#include <memory>
#include <mpi.h>
#include <mutex>
#include <new>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway::detail {

/// How long a send (or collective) of a failed group stays under way before its future fails. The
/// caller frees its bytes once the future is ready, but a peer that matched the message before it
/// heard of the failure still has MPI move the rest: each side goes on progressing its requests,
/// and such a transfer (a shard of tens of MB at 1 GB/s or more) ends within this time. A message
/// no peer matched is never read again. Longer keeps the failed rank alive while its peers exit,
/// which mpirun handles less well.
constexpr std::chrono::milliseconds ABANDONED_SEND_GRACE{500};

inline std::string mpi_error_string(int code) {
  std::string text(static_cast<std::size_t>(MPI_MAX_ERROR_STRING), '\0');
  int length = 0;
  if (MPI_Error_string(code, text.data(), &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  text.resize(static_cast<std::size_t>(length));
  return text;
}

inline communication_error mpi_failure(char const* what, int code) {
  return communication_error(std::string{"spillway MPI: "} + what +
                             " failed: " + mpi_error_string(code));
}

inline void check_mpi(int code, char const* what) {
  if (code != MPI_SUCCESS) {
    throw mpi_failure(what, code);
  }
}

/**
 * @brief `bytes` as (count, datatype): MPI_BYTE up to `large_bytes`, above it one element of a
 * derived type (chunks of `large_bytes` plus the remainder), so no count exceeds INT_MAX. Both
 * forms have the signature "bytes × MPI_BYTE", so sender and receiver may use either.
 */
class byte_type {
 public:
  byte_type(std::size_t bytes, std::size_t large_bytes) {
    if (bytes <= large_bytes) {
      count_ = static_cast<int>(bytes);
      return;
    }
    auto const chunks    = bytes / large_bytes;
    auto const remainder = bytes % large_bytes;
    SPILLWAY_EXPECTS(chunks <= static_cast<std::size_t>(INT_MAX),
                     "message of " + std::to_string(bytes) + " bytes has too many pieces",
                     invalid_argument);
    MPI_Datatype chunk = MPI_DATATYPE_NULL;
    MPI_Datatype body  = MPI_DATATYPE_NULL;
    check_mpi(MPI_Type_contiguous(static_cast<int>(large_bytes), MPI_BYTE, &chunk),
              "MPI_Type_contiguous");
    int code = MPI_Type_contiguous(static_cast<int>(chunks), chunk, &body);
    MPI_Type_free(&chunk);
    check_mpi(code, "MPI_Type_contiguous");
    if (remainder == 0) {
      type_ = body;
    } else {
      int lengths[2]            = {1, static_cast<int>(remainder)};
      MPI_Aint displacements[2] = {0, static_cast<MPI_Aint>(chunks * large_bytes)};
      MPI_Datatype types[2]     = {body, MPI_BYTE};
      code                      = MPI_Type_create_struct(2, lengths, displacements, types, &type_);
      MPI_Type_free(&body);
      check_mpi(code, "MPI_Type_create_struct");
    }
    code = MPI_Type_commit(&type_);
    if (code != MPI_SUCCESS) {
      MPI_Type_free(&type_);
      throw mpi_failure("MPI_Type_commit", code);
    }
    owned_ = true;
    count_ = 1;
  }
  // Freeing a datatype right after starting an operation with it is allowed: MPI keeps it alive.
  ~byte_type() {
    if (owned_) {
      MPI_Type_free(&type_);
    }
  }
  byte_type(byte_type const&)            = delete;
  byte_type& operator=(byte_type const&) = delete;
  byte_type(byte_type&&)                 = delete;
  byte_type& operator=(byte_type&&)      = delete;

  [[nodiscard]] int count() const noexcept { return count_; }
  [[nodiscard]] MPI_Datatype type() const noexcept { return type_; }

 private:
  int count_         = 0;
  MPI_Datatype type_ = MPI_BYTE;
  bool owned_        = false;
};

/** @brief A move-only task for the progress thread. */
class task {
 public:
  virtual ~task()    = default;
  virtual void run() = 0;
};

template <typename F>
class task_of final : public task {
 public:
  explicit task_of(F&& f) : f_(std::move(f)) {}
  void run() override { f_(); }

 private:
  F f_;
};

template <typename F>
std::unique_ptr<task> make_task(F&& f) {
  return std::make_unique<task_of<std::decay_t<F>>>(std::forward<F>(f));
}

class mpi_communicator_state;

/** @brief What happens when a tracked request completes, or when its group fails first. */
class completion {
 public:
  explicit completion(std::shared_ptr<mpi_communicator_state> owner) : owner_(std::move(owner)) {}
  virtual ~completion()                    = default;
  completion(completion const&)            = delete;
  completion& operator=(completion const&) = delete;
  completion(completion&&)                 = delete;
  completion& operator=(completion&&)      = delete;

  /** @brief The request completed; `error` is MPI_SUCCESS or the MPI error code. */
  virtual void complete(MPI_Status const& status, int error) = 0;
  /** @brief The group failed before completion: settle the promise with `error` (at once, or by
   * `settle_if_due`). */
  virtual void abandon(std::exception_ptr const& error,
                       std::chrono::steady_clock::time_point due) = 0;
  /** @brief Settles an abandoned request whose settling was put off, once `now` is past its time.
   */
  virtual void settle_if_due(std::chrono::steady_clock::time_point /*now*/) {}
  /** @return true for requests that are not user work (failure notices) */
  [[nodiscard]] virtual bool background() const noexcept { return false; }
  [[nodiscard]] mpi_communicator_state* owner() const noexcept { return owner_.get(); }

 private:
  std::shared_ptr<mpi_communicator_state> owner_;
};

/**
 * @brief The process's progress thread and the requests it tests. Every MPI call after
 * initialization happens on this thread.
 */
class mpi_engine {
 public:
  mpi_engine(int* argc, char*** argv);
  ~mpi_engine();
  mpi_engine(mpi_engine const&)            = delete;
  mpi_engine& operator=(mpi_engine const&) = delete;
  mpi_engine(mpi_engine&&)                 = delete;
  mpi_engine& operator=(mpi_engine&&)      = delete;

  /** @brief Queues `t` to run on the progress thread. */
  void post(std::unique_ptr<task> t) {
    {
      std::lock_guard lock(mutex_);
      queue_.push_back(std::move(t));
    }
    wake_.notify_one();
  }

  /** @brief Runs `f` on the progress thread and returns what it returns (or throws). */
  template <typename F>
  auto call(F&& f) -> decltype(f()) {
    using result_type = decltype(f());
    std::promise<result_type> done;
    auto result = done.get_future();
    post(make_task([&f, &done]() {
      try {
        if constexpr (std::is_void_v<result_type>) {
          f();
          done.set_value();
        } else {
          done.set_value(f());
        }
      } catch (...) {
        done.set_exception(std::current_exception());
      }
    }));
    return result.get();
  }

  /** @brief Tests `request` until it completes, then calls `on_done`. Progress thread only. */
  void track(MPI_Request request, std::unique_ptr<completion> on_done) {
    requests_.push_back(request);
    completions_.push_back(std::move(on_done));
  }

  /** @brief Settles the promises of `owner`'s tracked requests with `error`. Progress thread. */
  void abandon(mpi_communicator_state const* owner, std::exception_ptr const& error) {
    // One time for all: a caller waiting on several of them (a shard's header and data) finds
    // them all settled together.
    auto const due = std::chrono::steady_clock::now() + ABANDONED_SEND_GRACE;
    for (auto& c : completions_) {
      if (c->owner() == owner) {
        c->abandon(error, due);
      }
    }
  }

  void attach(mpi_communicator_state* state) { states_.push_back(state); }
  void detach(mpi_communicator_state* state) { std::erase(states_, state); }

  [[nodiscard]] int world_rank() const noexcept { return world_rank_; }
  [[nodiscard]] int world_size() const noexcept { return world_size_; }
  [[nodiscard]] std::string const& library_version() const noexcept { return version_; }
  /** @see mpi_environment::leave_unfinalized */
  void leave_unfinalized() noexcept { unfinalized_.store(true, std::memory_order_relaxed); }
  std::atomic<int> communicators{0};

 private:
  void loop();
  bool test_requests();

  bool finalize_ = false;
  std::atomic<bool> unfinalized_{false};
  int world_rank_ = 0;
  int world_size_ = 1;
  std::string version_;

  std::mutex mutex_;
  std::condition_variable wake_;
  std::vector<std::unique_ptr<task>> queue_;
  bool stop_ = false;

  // Progress thread only:
  bool user_completed_ = false;  ///< the last test_requests completed a non-background request
  std::vector<MPI_Request> requests_;
  std::vector<std::unique_ptr<completion>> completions_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  std::vector<mpi_communicator_state*> states_;

  std::thread thread_;
};

/** @brief One communicator's duplicates, pending receives and failure state. */
class mpi_communicator_state : public std::enable_shared_from_this<mpi_communicator_state> {
 public:
  struct pending_receive {
    int source;
    std::uint32_t tag;
    resource_ref resource;
    std::promise<received_message> done;
  };

  mpi_communicator_state(mpi_engine& engine, mpi_communicator::options const& opts)
    : engine_(engine),
      large_bytes_(opts.large_message_bytes),
      own_staging_(opts.staging == nullptr ? std::make_unique<host_memory_resource>() : nullptr),
      staging_(opts.staging != nullptr ? opts.staging : own_staging_.get()),
      stream_(opts.stream),
      stage_all_(opts.stage_all_device_memory) {}

  /** @return whether `data` of `kind` goes through host staging (MPI moves host memory) */
  [[nodiscard]] bool needs_staging(void const* data, memory_kind kind) const noexcept {
    return kind == memory_kind::DEVICE && (stage_all_ || is_cuda_device_pointer(data));
  }

  mpi_engine& engine_;
  std::size_t const large_bytes_;
  std::unique_ptr<host_memory_resource> const own_staging_;
  memory_resource* const staging_;
  stream_view const stream_;
  bool const stage_all_;
  std::atomic<std::size_t> staged_bytes_{0};
  MPI_Comm p2p_        = MPI_COMM_NULL;
  MPI_Comm collective_ = MPI_COMM_NULL;
  MPI_Comm control_    = MPI_COMM_NULL;
  int rank_            = 0;
  int size_            = 1;

  // Progress thread only:
  std::deque<pending_receive> receives_;
  std::vector<char> notice_;
  MPI_Request notice_request_ = MPI_REQUEST_NULL;
  bool attached_              = false;

  /** @return the failure as an exception, or null while the group is healthy */
  [[nodiscard]] std::exception_ptr failure() const {
    std::lock_guard lock(mutex_);
    return failure_;
  }

  /**
   * @brief Fails the group (progress thread): settles every pending promise with
   * communication_error(reason); when `notify`, tells every other rank.
   */
  void fail_group(std::string const& reason, bool notify);

  /** @brief Matches pending receives against arrived messages (progress thread). */
  bool poll_receives();

  /** @brief Starts the receive of a matched message (progress thread). */
  void start_matched_receive(pending_receive receive,
                             MPI_Message message,
                             MPI_Status const& status);

  /** @brief Posts the receive of a failure notice (progress thread). */
  void post_notice_receive();

 private:
  mutable std::mutex mutex_;
  std::exception_ptr failure_;
  // Reused by poll_receives: tags whose earlier receive found nothing this round.
  struct blocked_tag {
    bool any = false;
    std::vector<int> sources;
  };
  std::unordered_map<std::uint32_t, blocked_tag> blocked_;
};

/** Settles a promise<void> when its request (or every request of a group) completes. */
class void_completion final : public completion {
 public:
  /** @param keep held until MPI is done with the request (a staged copy it sends from) */
  void_completion(std::shared_ptr<mpi_communicator_state> owner,
                  std::shared_ptr<std::promise<void>> done,
                  std::shared_ptr<int> remaining,
                  char const* what,
                  std::shared_ptr<void const> keep = nullptr)
    : completion(std::move(owner)),
      done_(std::move(done)),
      remaining_(std::move(remaining)),
      what_(what),
      keep_(std::move(keep)) {}

  void complete(MPI_Status const&, int error) override {
    if (error != MPI_SUCCESS) {
      settle(std::make_exception_ptr(mpi_failure(what_, error)));
    } else if (--*remaining_ == 0) {
      settle(nullptr);
    }
  }
  /// MPI may still read the caller's bytes: they stay the caller's until the request completes or
  /// ABANDONED_SEND_GRACE has passed.
  void abandon(std::exception_ptr const& error,
               std::chrono::steady_clock::time_point due) override {
    if (!abandoned_) {
      abandoned_ = error;
      due_       = due;
    }
  }
  void settle_if_due(std::chrono::steady_clock::time_point now) override {
    if (abandoned_ && now >= due_) {
      settle(abandoned_);
    }
  }

 private:
  // A group's requests share `done`; the first error or the last success settles it.
  void settle(std::exception_ptr const& error) {
    if (*remaining_ < 0) {
      return;
    }
    *remaining_ = -1;
    if (error) {
      done_->set_exception(error);
    } else {
      done_->set_value();
    }
  }

  std::shared_ptr<std::promise<void>> done_;
  std::shared_ptr<int> remaining_;
  char const* what_;
  std::shared_ptr<void const> keep_;
  std::exception_ptr abandoned_;  ///< the group's failure, once abandoned
  std::chrono::steady_clock::time_point due_;
};

}  // namespace spillway::detail
