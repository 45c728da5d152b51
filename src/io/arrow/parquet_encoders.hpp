/**
 * @file parquet_encoders.hpp
 * @brief What Parquet writers that share encoding threads share: the threads, and the slots of
 * the row groups in flight (see `parquet_encoders`).
 */
#pragma once

#include <spillway/core/mutex.hpp>
#include <spillway/io/parquet.hpp>

#include <arrow/util/thread_pool.h>

#include <condition_variable>
#include <cstddef>
#include <memory>

namespace spillway {

struct parquet_encoders::state {
  std::shared_ptr<arrow::internal::ThreadPool> threads;
  mutex slots_mutex;
  std::condition_variable slot_freed;
  std::size_t free_slots SPILLWAY_GUARDED_BY(slots_mutex) = 0;

  /** @return whether a slot was free (and is now taken) */
  [[nodiscard]] bool try_take_slot();
  /** @brief Waits until a slot is free, and takes it. */
  void take_slot();
  void give_back_slot() noexcept;
};

namespace detail {

/** @brief A row group's slot of shared encoders, given back when it goes (empty: none). */
class encode_slot {
 public:
  encode_slot() = default;
  explicit encode_slot(std::shared_ptr<parquet_encoders::state> owner) noexcept
    : owner_(std::move(owner)) {}
  ~encode_slot() {
    if (owner_) {
      owner_->give_back_slot();
    }
  }
  encode_slot(encode_slot&&) noexcept            = default;
  encode_slot& operator=(encode_slot&&) noexcept = delete;
  encode_slot(encode_slot const&)                = delete;
  encode_slot& operator=(encode_slot const&)     = delete;

 private:
  std::shared_ptr<parquet_encoders::state> owner_;
};

}  // namespace detail
}  // namespace spillway
