// The MPI communicator: one progress thread per process makes every MPI call (see the header).
#include "shuffle/mpi/mpi_engine.hpp"

namespace spillway {
namespace detail {
namespace {

std::atomic<bool> environment_created{false};

}  // namespace
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
void mpi_environment::leave_unfinalized() noexcept { engine_->leave_unfinalized(); }

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
  // while the processes meet; one after the other: OpenMPI's duplicates of one parent under way
  // at once may agree on different context ids on different ranks (open-mpi/ompi#2025), and then
  // one rank waited in its duplicates for ever while the others had theirs (seen under
  // `mpirun -np 3`, after a communicator where a message was dropped).
  for (MPI_Comm* comm : {&state->p2p_, &state->collective_, &state->control_}) {
    auto duplicated = engine.call([&engine, comm] {
      std::vector<MPI_Request> requests(1, MPI_REQUEST_NULL);
      detail::check_mpi(MPI_Comm_idup(MPI_COMM_WORLD, comm, requests.data()), "MPI_Comm_idup");
      return track_group(engine, nullptr, requests, "MPI_Comm_idup");
    });
    duplicated.get();
  }
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

}  // namespace spillway
