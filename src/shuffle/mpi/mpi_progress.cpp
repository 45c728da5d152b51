/**
 * @file mpi_progress.cpp
 * @brief The MPI progress thread: starts and ends MPI, runs posted tasks, tests requests.
 */
#include "shuffle/mpi/mpi_engine.hpp"

namespace spillway::detail {
namespace {

/** How long the progress thread keeps calling MPI without sleeping while a send or receive is
 * under way and nothing completes (see mpi_engine::loop). */
constexpr std::chrono::milliseconds IN_FLIGHT_SPIN{50};

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
  if (finalize_ && !unfinalized_.load(std::memory_order_relaxed)) {
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
        // 7843efc:docs/BENCHMARKS.md, "Buffers of eight lines, and an MPI progress thread that
        // does not sleep on transfers"). Past it (a peer that does not receive
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

}  // namespace spillway::detail
