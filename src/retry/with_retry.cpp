#include <spillway/core/units.hpp>
#include <spillway/retry/with_retry.hpp>

namespace spillway::detail {

void throw_cannot_split(task_id task,
                        std::size_t rows,
                        out_of_memory const& cause,
                        bool splitting_allowed) {
  std::string const why =
    splitting_allowed ? "cannot split an input of " + std::to_string(rows) + " row(s) any further"
                      : "the step cannot split its input of " + std::to_string(rows) + " row(s)";
  throw out_of_memory(to_string(task) + ": " + why + " and it still does not fit: requested " +
                        std::to_string(cause.requested_bytes()) + " bytes (" +
                        format_bytes(cause.requested_bytes()) + "), available " +
                        std::to_string(cause.available_bytes()) + " bytes, capacity " +
                        std::to_string(cause.capacity_bytes()) + " bytes (" + cause.what() + ")",
                      cause.requested_bytes(),
                      cause.available_bytes(),
                      cause.capacity_bytes());
}

}  // namespace spillway::detail
