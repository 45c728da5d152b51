// The MPI communicator: one progress thread per process makes every MPI call (see the header).
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

namespace spillway {
namespace detail {
namespace {

std::atomic<bool> environment_created{false};

/** The longest failure reason a notice carries. */
constexpr int max_notice_bytes = 1024;

/** How long the progress thread keeps calling MPI without sleeping while a send or receive is
 * under way and nothing completes (see mpi_engine::loop). */
constexpr std::chrono::milliseconds IN_FLIGHT_SPIN{50};
/// How long a send (or collective) of a failed group stays under way before its future fails. The
/// caller frees its bytes once the future is ready, but a peer that matched the message before it
/// heard of the failure still has MPI move the rest: each side goes on progressing its requests,
/// and such a transfer (a shard of tens of MB at 1 GB/s or more) ends within this time. A message
/// no peer matched is never read again. Longer keeps the failed rank alive while its peers exit,
/// which mpirun handles less well.
constexpr std::chrono::milliseconds ABANDONED_SEND_GRACE{500};

std::string mpi_error_string(int code) {
  std::string text(static_cast<std::size_t>(MPI_MAX_ERROR_STRING), '\0');
  int length = 0;
  if (MPI_Error_string(code, text.data(), &length) != MPI_SUCCESS) {
    return "MPI error code " + std::to_string(code);
  }
  text.resize(static_cast<std::size_t>(length));
  return text;
}

communication_error mpi_failure(char const* what, int code) {
  return communication_error(std::string{"spillway MPI: "} + what +
                             " failed: " + mpi_error_string(code));
}

void check_mpi(int code, char const* what) {
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

}  // namespace

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
  std::atomic<int> communicators{0};

 private:
  void loop();
  bool test_requests();

  bool finalize_  = false;
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

namespace {

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

int mpi_source(int source) { return source == any_source ? MPI_ANY_SOURCE : source; }

}  // namespace

// ---- mpi_engine ----------------------------------------------------------------------------

mpi_engine::mpi_engine(int* argc, char*** argv) {
  int initialized = 0;
  check_mpi(MPI_Initialized(&initialized), "MPI_Initialized");
  int provided = MPI_THREAD_SINGLE;
  if (initialized == 0) {
    int finalized = 0;
    check_mpi(MPI_Finalized(&finalized), "MPI_Finalized");
    if (finalized != 0) {
      throw communication_error("spillway MPI: MPI was finalized and cannot start again");
    }
    check_mpi(MPI_Init_thread(argc, argv, MPI_THREAD_SERIALIZED, &provided), "MPI_Init_thread");
    finalize_ = true;
    // Errors of calls that name no communicator (datatypes) return instead of aborting.
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  } else {
    check_mpi(MPI_Query_thread(&provided), "MPI_Query_thread");
  }
  if (provided < MPI_THREAD_SERIALIZED) {
    if (finalize_) {
      MPI_Finalize();
    }
    throw communication_error("spillway MPI: the MPI library provides only thread level " +
                              std::to_string(provided) +
                              "; the progress thread needs MPI_THREAD_SERIALIZED");
  }
  check_mpi(MPI_Comm_rank(MPI_COMM_WORLD, &world_rank_), "MPI_Comm_rank");
  check_mpi(MPI_Comm_size(MPI_COMM_WORLD, &world_size_), "MPI_Comm_size");
  void* tag_ub = nullptr;
  int found    = 0;
  check_mpi(MPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &tag_ub, &found), "MPI_Comm_get_attr");
  if (found != 0 && static_cast<std::uint32_t>(*static_cast<int*>(tag_ub)) < max_message_tag) {
    if (finalize_) {
      MPI_Finalize();
    }
    throw communication_error("spillway MPI: MPI_TAG_UB is " +
                              std::to_string(*static_cast<int*>(tag_ub)) + ", below " +
                              std::to_string(max_message_tag));
  }
  std::string version(static_cast<std::size_t>(MPI_MAX_LIBRARY_VERSION_STRING), '\0');
  int length = 0;
  if (MPI_Get_library_version(version.data(), &length) == MPI_SUCCESS) {
    version.resize(static_cast<std::size_t>(length));
    version_ = version.substr(0, version.find_first_of(",\n"));
  }
  thread_ = std::thread([this] { loop(); });
}

mpi_engine::~mpi_engine() {
  {
    std::lock_guard lock(mutex_);
    stop_ = true;
  }
  wake_.notify_one();
  thread_.join();
  // Abandoned requests not yet due fail now, rather than leave their waiters a broken promise.
  for (auto& c : completions_) {
    c->settle_if_due(std::chrono::steady_clock::time_point::max());
  }
  // Requests still outstanding belong to failed groups: their peers will never match them, and
  // MPI_Finalize would wait for them forever. Leave MPI unfinalized then: the process exits and
  // mpirun reports it (a failed run is failed anyway).
  if (!requests_.empty()) {
    std::fprintf(stderr,
                 "spillway MPI rank %d: %zu operations of failed groups still pending; not "
                 "calling MPI_Finalize\n",
                 world_rank_,
                 requests_.size());
    return;
  }
  if (finalize_) {
    MPI_Finalize();
  }
}

bool mpi_engine::test_requests() {
  if (requests_.empty()) {
    return false;
  }
  auto const n = requests_.size();
  indices_.resize(n);
  statuses_.resize(n);
  int done = 0;
  int code =
    MPI_Testsome(static_cast<int>(n), requests_.data(), &done, indices_.data(), statuses_.data());
  if (code != MPI_SUCCESS && code != MPI_ERR_IN_STATUS) {
    // The requests are unusable: fail every group that has one.
    auto const error = std::make_exception_ptr(mpi_failure("MPI_Testsome", code));
    for (auto& c : completions_) {
      c->complete(MPI_Status{}, code);
    }
    requests_.clear();
    completions_.clear();
    user_completed_ = true;
    return true;
  }
  if (done == MPI_UNDEFINED || done == 0) {
    return false;
  }
  // Complete in request order, then remove from the back so indices stay valid.
  std::vector<int> finished(indices_.begin(), indices_.begin() + done);
  std::vector<MPI_Status> statuses(statuses_.begin(), statuses_.begin() + done);
  for (int i = 0; i < done; ++i) {
    auto const index   = static_cast<std::size_t>(finished[static_cast<std::size_t>(i)]);
    auto const& status = statuses[static_cast<std::size_t>(i)];
    int const error    = code == MPI_ERR_IN_STATUS ? status.MPI_ERROR : MPI_SUCCESS;
    user_completed_    = user_completed_ || !completions_[index]->background();
    completions_[index]->complete(status, error == MPI_ERR_PENDING ? MPI_SUCCESS : error);
  }
  std::sort(finished.begin(), finished.end(), std::greater<>{});
  for (int index : finished) {
    auto const i    = static_cast<std::size_t>(index);
    requests_[i]    = requests_.back();
    completions_[i] = std::move(completions_.back());
    requests_.pop_back();
    completions_.pop_back();
  }
  return true;
}

void mpi_engine::loop() {
  using namespace std::chrono_literals;
  using clock = std::chrono::steady_clock;
  std::vector<std::unique_ptr<task>> tasks;
  int idle                = 0;
  clock::time_point moved = clock::now();  // when user work last started or completed
  while (true) {
    {
      std::unique_lock lock(mutex_);
      if (queue_.empty() && idle > 0) {
        if (stop_) {
          break;
        }
        // Nothing moved: spin a little (a reply is often near), then sleep longer and longer.
        // While user work is pending the sleep stays short; otherwise only notices are awaited.
        // A send or receive under way is not slept on for up to IN_FLIGHT_SPIN since the last
        // user work started or completed: a large message moves a shared-memory fragment at a time,
        // each needing a call here, and sleeps between them held 16 MiB messages to 1.0 GB/s
        // (1.5-2.4 without; the in-memory shuffle over 2 processes, pull, 0.82-0.94 -> 0.69-0.80 s;
        // see docs/BENCHMARKS.md, "Buffers of eight lines"). Past it (a peer that does not receive
        // yet), the sleeps come back and the core is not burnt.
        bool const in_flight = std::any_of(
          completions_.begin(), completions_.end(), [](auto const& c) { return !c->background(); });
        bool const user_work =
          in_flight || std::any_of(states_.begin(), states_.end(), [](auto* s) {
            return !s->receives_.empty();
          });
        bool const spin = idle <= 64 || (in_flight && clock::now() - moved < IN_FLIGHT_SPIN);
        if (!spin) {
          auto const sleep = user_work ? std::min(std::chrono::microseconds{(idle - 64) * 20},
                                                  std::chrono::microseconds{500})
                                       : std::chrono::microseconds{20000};
          wake_.wait_for(lock, sleep, [this] { return !queue_.empty() || stop_; });
        } else {
          lock.unlock();
          std::this_thread::yield();
          lock.lock();
        }
      }
      tasks.swap(queue_);
    }
    bool started = !tasks.empty();  // user work posted, or a matched message's receive
    for (auto& t : tasks) {
      t->run();
    }
    tasks.clear();
    for (auto* state : states_) {
      started = state->poll_receives() || started;
    }
    user_completed_       = false;
    bool const progressed = test_requests() || started;
    auto const now        = clock::now();
    for (auto& c : completions_) {
      c->settle_if_due(now);
    }
    idle = progressed ? 0 : std::min(idle + 1, 1 << 20);  // (bounded: no overflow)
    if (started || user_completed_) {
      moved = clock::now();  // (background completions, such as notices, do not count)
    }
  }
}

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

// ---- public API ----------------------------------------------------------------------------

bool mpi_backend_available() noexcept { return true; }
std::string mpi_unavailable_reason() { return ""; }

mpi_environment::mpi_environment(int* argc, char*** argv) {
  SPILLWAY_EXPECTS(!detail::environment_created.exchange(true),
                   "an mpi_environment exists or existed in this process: MPI starts once",
                   logic_error);
  engine_ = std::make_unique<detail::mpi_engine>(argc, argv);
}

mpi_environment::~mpi_environment() = default;

int mpi_environment::world_rank() const noexcept { return engine_->world_rank(); }
int mpi_environment::world_size() const noexcept { return engine_->world_size(); }
std::string mpi_environment::library_version() const { return engine_->library_version(); }

mpi_communicator::mpi_communicator(mpi_environment& environment)
  : mpi_communicator(environment, options{}) {}

namespace {

/** Tracks `requests` as one group whose promise settles when all complete (progress thread). */
std::future<void> track_group(detail::mpi_engine& engine,
                              std::shared_ptr<detail::mpi_communicator_state> const& owner,
                              std::vector<MPI_Request> const& requests,
                              char const* what) {
  auto done      = std::make_shared<std::promise<void>>();
  auto result    = done->get_future();
  auto remaining = std::make_shared<int>(static_cast<int>(requests.size()));
  if (requests.empty()) {
    done->set_value();
    return result;
  }
  for (auto request : requests) {
    engine.track(request, std::make_unique<detail::void_completion>(owner, done, remaining, what));
  }
  return result;
}

}  // namespace

mpi_communicator::mpi_communicator(mpi_environment& environment, options opts) {
  SPILLWAY_EXPECTS(
    opts.large_message_bytes > 0 && opts.large_message_bytes <= static_cast<std::size_t>(INT_MAX),
    "large_message_bytes must be in [1, INT_MAX], not " + std::to_string(opts.large_message_bytes),
    invalid_argument);
  auto& engine = *environment.engine_;
  auto state   = std::make_shared<detail::mpi_communicator_state>(engine, opts);
  // Three non-blocking duplicates, so that the progress thread keeps serving other communicators
  // while the processes meet.
  auto duplicated = engine.call([&engine, state] {
    std::vector<MPI_Request> requests(3, MPI_REQUEST_NULL);
    MPI_Comm* comms[3] = {&state->p2p_, &state->collective_, &state->control_};
    for (std::size_t i = 0; i < 3; ++i) {
      detail::check_mpi(MPI_Comm_idup(MPI_COMM_WORLD, comms[i], &requests[i]), "MPI_Comm_idup");
    }
    return track_group(engine, nullptr, requests, "MPI_Comm_idup");
  });
  duplicated.get();
  engine.call([&engine, state] {
    for (MPI_Comm comm : {state->p2p_, state->collective_, state->control_}) {
      detail::check_mpi(MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN),
                        "MPI_Comm_set_errhandler");
    }
    detail::check_mpi(MPI_Comm_rank(state->p2p_, &state->rank_), "MPI_Comm_rank");
    detail::check_mpi(MPI_Comm_size(state->p2p_, &state->size_), "MPI_Comm_size");
    state->post_notice_receive();
    engine.attach(state.get());
  });
  ++engine.communicators;
  state_ = std::move(state);
}

mpi_communicator::~mpi_communicator() {
  auto& engine = state_->engine_;
  engine.call([&engine, state = state_] {
    state->fail_group("the communicator was destroyed", false);
    if (state->notice_request_ != MPI_REQUEST_NULL) {
      // Completes as cancelled on a later test; the notice completion ignores it.
      MPI_Cancel(&state->notice_request_);
    }
    engine.detach(state.get());
    for (MPI_Comm* comm : {&state->p2p_, &state->collective_, &state->control_}) {
      if (*comm != MPI_COMM_NULL) {
        MPI_Comm_free(comm);  // pending operations on it still complete
      }
    }
  });
  --engine.communicators;
}

int mpi_communicator::rank() const noexcept { return state_->rank_; }
int mpi_communicator::size() const noexcept { return state_->size_; }

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

namespace {

/** Runs one step of a collective on the progress thread and waits for its requests. */
template <typename Start>
void collective_step(detail::mpi_communicator_state& state,
                     std::shared_ptr<detail::mpi_communicator_state> const& owner,
                     Start&& start,
                     char const* what) {
  auto& engine  = state.engine_;
  auto finished = engine.call([&]() -> std::future<void> {
    if (auto failure = state.failure()) {
      std::rethrow_exception(failure);
    }
    return track_group(engine, owner, start(), what);
  });
  finished.get();
}

/**
 * Sends `to_each[r]` to and receives `from_each[r]` (sizes known) from every other rank r, on the
 * collective duplicate; this rank's own part is left to the caller.
 */
void exchange_point_to_point(detail::mpi_communicator_state& state,
                             std::shared_ptr<detail::mpi_communicator_state> const& owner,
                             std::vector<std::span<std::byte const>> const& to_each,
                             std::vector<std::span<std::byte>> const& from_each) {
  collective_step(
    state,
    owner,
    [&] {
      std::vector<MPI_Request> requests;
      auto const n  = to_each.size();
      auto const me = static_cast<std::size_t>(state.rank_);
      requests.reserve(2 * n);
      try {
        for (std::size_t r = 0; r < n; ++r) {
          if (r == me) {
            continue;
          }
          detail::byte_type const in(from_each[r].size(), state.large_bytes_);
          requests.push_back(MPI_REQUEST_NULL);
          detail::check_mpi(MPI_Irecv(from_each[r].data(),
                                      in.count(),
                                      in.type(),
                                      static_cast<int>(r),
                                      1,
                                      state.collective_,
                                      &requests.back()),
                            "MPI_Irecv");
          detail::byte_type const out(to_each[r].size(), state.large_bytes_);
          requests.push_back(MPI_REQUEST_NULL);
          detail::check_mpi(MPI_Isend(to_each[r].data(),
                                      out.count(),
                                      out.type(),
                                      static_cast<int>(r),
                                      1,
                                      state.collective_,
                                      &requests.back()),
                            "MPI_Isend");
        }
      } catch (...) {
        // Peers cannot finish this collective with us: fail the group rather than hang it.
        std::erase(requests, MPI_REQUEST_NULL);
        track_group(state.engine_, owner, requests, "exchange");
        state.fail_group("a collective exchange could not start", true);
        throw;
      }
      return requests;
    },
    "collective exchange");
}

}  // namespace

void mpi_communicator::barrier() {
  collective_step(
    *state_,
    state_,
    [this] {
      std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
      detail::check_mpi(MPI_Ibarrier(state_->collective_, requests.data()), "MPI_Ibarrier");
      return requests;
    },
    "MPI_Ibarrier");
}

std::vector<std::vector<std::byte>> mpi_communicator::allgather(std::span<std::byte const> mine) {
  auto const n = static_cast<std::size_t>(state_->size_);
  std::vector<std::uint64_t> sizes(n);
  std::uint64_t const my_size = mine.size();
  collective_step(
    *state_,
    state_,
    [&] {
      std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
      detail::check_mpi(MPI_Iallgather(&my_size,
                                       1,
                                       MPI_UINT64_T,
                                       sizes.data(),
                                       1,
                                       MPI_UINT64_T,
                                       state_->collective_,
                                       requests.data()),
                        "MPI_Iallgather");
      return requests;
    },
    "MPI_Iallgather");
  std::vector<std::vector<std::byte>> out(n);
  std::uint64_t total = 0;
  for (std::size_t r = 0; r < n; ++r) {
    out[r].resize(sizes[r]);
    total += sizes[r];
  }
  auto const me = static_cast<std::size_t>(state_->rank_);
  if (total <= static_cast<std::uint64_t>(INT_MAX)) {
    // Every rank knows every size, so every rank takes the same branch.
    std::vector<int> counts(n);
    std::vector<int> displacements(n);
    std::vector<std::byte> flat(total);
    int offset = 0;
    for (std::size_t r = 0; r < n; ++r) {
      counts[r]        = static_cast<int>(sizes[r]);
      displacements[r] = offset;
      offset += counts[r];
    }
    collective_step(
      *state_,
      state_,
      [&] {
        std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
        detail::check_mpi(MPI_Iallgatherv(mine.data(),
                                          static_cast<int>(mine.size()),
                                          MPI_BYTE,
                                          flat.data(),
                                          counts.data(),
                                          displacements.data(),
                                          MPI_BYTE,
                                          state_->collective_,
                                          requests.data()),
                          "MPI_Iallgatherv");
        return requests;
      },
      "MPI_Iallgatherv");
    for (std::size_t r = 0; r < n; ++r) {
      std::copy_n(flat.begin() + displacements[r], sizes[r], out[r].begin());
    }
    return out;
  }
  std::vector<std::span<std::byte const>> to_each(n, mine);
  std::vector<std::span<std::byte>> from_each(out.begin(), out.end());
  exchange_point_to_point(*state_, state_, to_each, from_each);
  std::copy(mine.begin(), mine.end(), out[me].begin());
  return out;
}

std::vector<std::vector<std::byte>> mpi_communicator::alltoall(
  std::vector<std::vector<std::byte>> const& to_each) {
  auto const n = static_cast<std::size_t>(state_->size_);
  SPILLWAY_EXPECTS(
    to_each.size() == n,
    "alltoall: " + std::to_string(to_each.size()) + " parts for " + std::to_string(n) + " ranks",
    invalid_argument);
  std::vector<std::uint64_t> send_sizes(n);
  std::vector<std::uint64_t> receive_sizes(n);
  for (std::size_t r = 0; r < n; ++r) {
    send_sizes[r] = to_each[r].size();
  }
  collective_step(
    *state_,
    state_,
    [&] {
      std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
      detail::check_mpi(MPI_Ialltoall(send_sizes.data(),
                                      1,
                                      MPI_UINT64_T,
                                      receive_sizes.data(),
                                      1,
                                      MPI_UINT64_T,
                                      state_->collective_,
                                      requests.data()),
                        "MPI_Ialltoall");
      return requests;
    },
    "MPI_Ialltoall");
  // Point-to-point rather than MPI_Ialltoallv: no rank knows every size, so only this way do all
  // ranks agree on a method whatever the sizes (MPI_Ialltoallv counts are ints).
  std::vector<std::vector<std::byte>> out(n);
  std::vector<std::span<std::byte const>> sends(n);
  std::vector<std::span<std::byte>> receives(n);
  for (std::size_t r = 0; r < n; ++r) {
    out[r].resize(receive_sizes[r]);
    sends[r]    = to_each[r];
    receives[r] = out[r];
  }
  exchange_point_to_point(*state_, state_, sends, receives);
  auto const me = static_cast<std::size_t>(state_->rank_);
  out[me]       = to_each[me];
  return out;
}

std::string mpi_communicator::describe() const {
  auto version = state_->engine_.library_version();
  return "mpi rank " + std::to_string(state_->rank_) + " of " + std::to_string(state_->size_) +
         (version.empty() ? std::string{} : " (" + version + ")");
}

void mpi_communicator::fail(std::string const& reason) {
  state_->engine_.call([state = state_, &reason] { state->fail_group(reason, true); });
}

bool mpi_communicator::failed() const { return state_->failure() != nullptr; }
}  // namespace spillway
