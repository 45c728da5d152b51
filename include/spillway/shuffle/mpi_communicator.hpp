/**
 * @file mpi_communicator.hpp
 * @brief One rank per process over MPI: `mpi_environment` (MPI's lifetime and its progress
 * thread) and `mpi_communicator` (the `communicator` interface over a duplicate of
 * MPI_COMM_WORLD).
 *
 * Declared in every build; built only when SPILLWAY_ENABLE_MPI finds MPI (`mpi_backend_available()`
 * says whether it was). Without it, the constructors throw `not_supported` naming why. The header
 * does not include MPI headers.
 *
 * Threading: all MPI calls of the process are made by one progress thread, owned by the
 * environment (MPI_THREAD_SERIALIZED); callers queue operations to it and wait on futures. The
 * thread starts non-blocking MPI operations, matches receives with MPI_Improbe (allocating each
 * message from the receiver's resource once its size is known), tests outstanding requests and
 * completes the promises. It was chosen over MPI_THREAD_MULTIPLE by measurement
 * (docs/BENCHMARKS.md, "Communicator"). Blocking collectives are never called: `barrier`,
 * `allgather` and `alltoall` run as non-blocking MPI collectives, so a rank waiting in one still
 * matches its peers' point-to-point messages.
 *
 * Each communicator duplicates MPI_COMM_WORLD three times: point-to-point messages, collectives
 * and failure notices never match one another, nor anything else in the process.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_resource.hpp>
#include <spillway/shuffle/communicator.hpp>

#include <climits>

#include <cstddef>
#include <memory>
#include <string>

namespace spillway {

namespace detail {
class mpi_engine;
class mpi_communicator_state;
}  // namespace detail

/** @return true when this build contains the MPI communicator */
bool mpi_backend_available() noexcept;

/** @return why MPI cannot be used here ("" when it can) */
std::string mpi_unavailable_reason();

/**
 * @brief MPI's lifetime in this process: MPI_Init_thread on construction, MPI_Finalize on
 * destruction, and the progress thread that makes every MPI call in between.
 *
 * MPI can be initialized once per process: construct one environment, early (in `main`), and
 * destroy it after every communicator. When MPI was initialized by someone else (with at least
 * MPI_THREAD_SERIALIZED), the environment uses it and leaves finalizing to them.
 * @note Thread-safe.
 */
class mpi_environment {
 public:
  /**
   * @brief Initializes MPI with `argc`/`argv` (may be null) and starts the progress thread.
   * @throws logic_error when an environment exists or existed in this process
   * @throws communication_error when MPI cannot be initialized with MPI_THREAD_SERIALIZED
   * @throws not_supported in a build without MPI
   */
  explicit mpi_environment(int* argc = nullptr, char*** argv = nullptr);
  /** @brief Stops the progress thread and finalizes MPI. Every communicator must be gone. */
  ~mpi_environment();
  mpi_environment(mpi_environment const&)            = delete;
  mpi_environment& operator=(mpi_environment const&) = delete;
  mpi_environment(mpi_environment&&)                 = delete;
  mpi_environment& operator=(mpi_environment&&)      = delete;

  /** @return this process's rank in MPI_COMM_WORLD */
  [[nodiscard]] int world_rank() const noexcept;
  /** @return the number of processes in MPI_COMM_WORLD */
  [[nodiscard]] int world_size() const noexcept;
  /** @return the MPI library's version string */
  [[nodiscard]] std::string library_version() const;
  /**
   * @brief For a process whose job failed: the destructor stops the progress thread but does not
   * call MPI_Finalize, which waits for every process (a failed peer may never come, and mpirun
   * then ends this one with signals). The process should exit soon after, with its error.
   */
  void leave_unfinalized() noexcept;

 private:
  friend class mpi_communicator;
  std::unique_ptr<detail::mpi_engine> engine_;
};

/**
 * @brief A rank's endpoint among all processes of MPI_COMM_WORLD.
 *
 * Beyond the `communicator` contract:
 * - Messages above `options::large_message_bytes` (default INT_MAX) travel as one message of a
 *   derived datatype, so any size up to the memory at hand works.
 * - `allgather` uses MPI_Iallgatherv when the total fits in an `int` and tagged point-to-point
 *   messages otherwise; `alltoall` always uses point-to-point messages on the collective
 *   duplicate (sizes first, with MPI_Ialltoall), so sizes are not limited by `int` counts.
 * - `fail(reason)` fails this rank's pending and later operations and sends a failure notice to
 *   every other rank, whose pending and later operations then fail too. A peer process that dies
 *   is handled by the MPI runtime: OpenMPI's mpirun ends the whole job, so nobody hangs.
 * - A message still arriving when its group fails is left in its memory, never freed, until the
 *   process ends: MPI may go on writing into it, and its resource may be gone before MPI is done.
 *   A sender's bytes must stay valid until its future is ready; fail the group (`fail`) before
 *   freeing memory that sends under way may still read.
 * - A failure of an MPI call becomes `communication_error` carrying MPI's error string.
 * @note Thread-safe as `communicator` requires. Constructing one is collective over
 * MPI_COMM_WORLD: every process constructs its communicators in the same order.
 */
class mpi_communicator final : public communicator {
 public:
  /** @brief Tuning. */
  struct options {
    /** Messages larger than this travel with a derived datatype (lower it to test that path). */
    std::size_t large_message_bytes = INT_MAX;
    /**
     * Host memory that stages messages of CUDA device memory, which MPI does not move: a send from
     * it is copied here first, and a receive into a device resource lands here and is copied
     * over before its future is ready. Null: plain host memory of the communicator's own. Must
     * outlive the `mpi_environment`: requests still pending when a failed communicator goes may
     * hold staged copies until the environment ends.
     */
    memory_resource* staging = nullptr;
    /** The stream of the staging copies. */
    stream_view stream{};
    /**
     * Stage every message of `memory_kind::DEVICE`, emulated device memory too (host memory that
     * MPI could move as it is): the staging path, tested without a GPU.
     */
    bool stage_all_device_memory = false;
  };

  /**
   * @brief Joins every process of MPI_COMM_WORLD in a new communicator (collective).
   * @param environment must outlive the communicator
   * @throws invalid_argument when `large_message_bytes` is 0 or above INT_MAX
   * @throws communication_error when MPI fails; not_supported in a build without MPI
   */
  explicit mpi_communicator(mpi_environment& environment);
  mpi_communicator(mpi_environment& environment, options opts);
  /** @brief Fails what is still pending (`communication_error`) and frees the duplicates. */
  ~mpi_communicator() override;
  mpi_communicator(mpi_communicator const&)            = delete;
  mpi_communicator& operator=(mpi_communicator const&) = delete;
  mpi_communicator(mpi_communicator&&)                 = delete;
  mpi_communicator& operator=(mpi_communicator&&)      = delete;

  [[nodiscard]] int rank() const noexcept override;
  [[nodiscard]] int size() const noexcept override;

  /** @throws invalid_argument also for `memory_kind::DISK`, which is not addressable memory */
  [[nodiscard]] std::future<void> send(int destination,
                                       std::uint32_t tag,
                                       std::span<std::byte const> bytes,
                                       memory_kind kind = memory_kind::HOST) override;
  [[nodiscard]] std::future<received_message> receive(int source,
                                                      std::uint32_t tag,
                                                      resource_ref resource) override;
  void barrier() override;
  [[nodiscard]] std::vector<std::vector<std::byte>> allgather(
    std::span<std::byte const> mine) override;
  [[nodiscard]] std::vector<std::vector<std::byte>> alltoall(
    std::vector<std::vector<std::byte>> const& to_each) override;
  /** @return e.g. "mpi rank 2 of 4 (Open MPI v4.1.4)" */
  [[nodiscard]] std::string describe() const override;

  /**
   * @brief Fails the group: pending and later operations of this rank throw
   * `communication_error(reason)`, and every other rank is told to do the same. Idempotent.
   */
  void fail(std::string const& reason);

  /** @return true once the group failed (here, or by a notice from another rank) */
  [[nodiscard]] bool failed() const;

  /** @return bytes of device memory staged through host memory so far, sent and received */
  [[nodiscard]] std::size_t staged_bytes() const noexcept;

 private:
  std::shared_ptr<detail::mpi_communicator_state> state_;
};

}  // namespace spillway
