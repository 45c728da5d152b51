// The MPI declarations of a build without MPI: every constructor says why.
#include <spillway/core/error.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>

namespace spillway {
namespace detail {
class mpi_engine {};
class mpi_communicator_state {};
}  // namespace detail

namespace {

[[noreturn]] void throw_unavailable() {
  throw not_supported("MPI communicator unavailable: " + mpi_unavailable_reason());
}

}  // namespace

bool mpi_backend_available() noexcept { return false; }
std::string mpi_unavailable_reason() {
  return "this build has no MPI (install libopenmpi-dev and configure with "
         "-DSPILLWAY_ENABLE_MPI=ON)";
}

mpi_environment::mpi_environment(int*, char***) { throw_unavailable(); }
mpi_environment::~mpi_environment() = default;
int mpi_environment::world_rank() const noexcept { return 0; }
int mpi_environment::world_size() const noexcept { return 1; }
std::string mpi_environment::library_version() const { throw_unavailable(); }
void mpi_environment::leave_unfinalized() noexcept {}

mpi_communicator::mpi_communicator(mpi_environment&) { throw_unavailable(); }
mpi_communicator::mpi_communicator(mpi_environment&, options) { throw_unavailable(); }
mpi_communicator::~mpi_communicator() = default;
int mpi_communicator::rank() const noexcept { return 0; }
int mpi_communicator::size() const noexcept { return 1; }
std::future<void> mpi_communicator::send(int,
                                         std::uint32_t,
                                         std::span<std::byte const>,
                                         memory_kind) {
  throw_unavailable();
}
std::future<received_message> mpi_communicator::receive(int, std::uint32_t, resource_ref) {
  throw_unavailable();
}
void mpi_communicator::barrier() { throw_unavailable(); }
std::vector<std::vector<std::byte>> mpi_communicator::allgather(std::span<std::byte const>) {
  throw_unavailable();
}
std::vector<std::vector<std::byte>> mpi_communicator::alltoall(
  std::vector<std::vector<std::byte>> const&) {
  throw_unavailable();
}
std::string mpi_communicator::describe() const { throw_unavailable(); }
void mpi_communicator::fail(std::string const&) { throw_unavailable(); }
bool mpi_communicator::failed() const { throw_unavailable(); }
std::size_t mpi_communicator::staged_bytes() const noexcept { return 0; }

}  // namespace spillway
