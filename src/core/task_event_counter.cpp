#include <spillway/core/task_event_counter.hpp>

namespace spillway {

void task_event_counter::record(event const& e) {
  auto const kind = static_cast<std::size_t>(e.kind);
  if (kind < KINDS) {
    scoped_lock const lock{mutex_};
    auto [at, added] = counts_.try_emplace(e.task.value);
    if (added) {
      at->second.fill(0);
    }
    ++at->second[kind];
  }
  record_event(next_, e);
}

std::size_t task_event_counter::count(task_id task, event_kind kind) const {
  auto const index = static_cast<std::size_t>(kind);
  scoped_lock const lock{mutex_};
  auto const at = counts_.find(task.value);
  return at == counts_.end() || index >= KINDS ? 0 : at->second[index];
}

}  // namespace spillway
