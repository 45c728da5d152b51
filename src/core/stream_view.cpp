#include <spillway/core/stream_view.hpp>

namespace spillway {

void stream_view::synchronize() const {
  // The CPU backend executes every operation synchronously on the calling thread.
}

}  // namespace spillway
