/**
 * @file parquet_encoders.cpp
 * @brief Encoding threads and row group slots shared by Parquet writers.
 */
#include "io/arrow/parquet_encoders.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>

#include <algorithm>
#include <limits>
#include <string>

namespace spillway {

parquet_encoders::parquet_encoders(std::size_t threads, std::size_t groups)
  : threads_(threads), groups_(groups), state_(std::make_shared<state>()) {
  SPILLWAY_EXPECTS(threads > 0 && groups > 0,
                   "parquet_encoders: " + std::to_string(threads) + " threads and " +
                     std::to_string(groups) + " row groups; at least one of each",
                   invalid_argument);
  state_->threads = detail::value_or_throw(
    arrow::internal::ThreadPool::Make(
      static_cast<int>(std::min<std::size_t>(threads, std::numeric_limits<int>::max()))),
    "cannot start Parquet encoding threads");
  scoped_lock const lock(state_->slots_mutex);
  state_->free_slots = groups;
}

bool parquet_encoders::state::try_take_slot() {
  scoped_lock const lock(slots_mutex);
  if (free_slots == 0) {
    return false;
  }
  --free_slots;
  return true;
}

void parquet_encoders::state::take_slot() {
  scoped_lock lock(slots_mutex);
  lock.wait(slot_freed, [&]() SPILLWAY_REQUIRES(slots_mutex) { return free_slots > 0; });
  --free_slots;
}

void parquet_encoders::state::give_back_slot() noexcept {
  {
    scoped_lock const lock(slots_mutex);
    ++free_slots;
  }
  slot_freed.notify_one();
}

}  // namespace spillway
