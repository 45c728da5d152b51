/**
 * @file parquet_encoders.hpp
 * @brief What Parquet writers that share encoding threads share: the threads, and the slots of
 * the row groups in flight (see `parquet_encoders`).
 */
#pragma once

#include <spillway/io/parquet.hpp>

#include <arrow/util/thread_pool.h>

#include <cstddef>
#include <memory>
#include <semaphore>

namespace spillway {

struct parquet_encoders::state {
  explicit state(std::ptrdiff_t groups) : slots(groups) {}
  std::shared_ptr<arrow::internal::ThreadPool> threads;
  std::counting_semaphore<> slots;  ///< one for each row group in flight
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
      owner_->slots.release();
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
