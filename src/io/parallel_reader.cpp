/**
 * @file parallel_reader.cpp
 * @brief `read_in_parallel`: pieces of a dataset read side by side, each on a thread of its own.
 */
#include <spillway/core/error.hpp>
#include <spillway/io/batch_reader.hpp>

#include <algorithm>
#include <condition_variable>
#include <deque>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/**
 * The reader of `read_in_parallel`. Each thread takes the next piece nobody has taken, opens it,
 * and reads its batches one by one into `ready_`, waiting while `ready_` is full; `next()` takes
 * the oldest ready batch. The state below is guarded by `mutex_`.
 */
class parallel_reader final : public batch_reader {
 public:
  parallel_reader(table_schema schema,
                  std::size_t pieces,
                  piece_opener open,
                  std::size_t threads,
                  std::size_t max_ready)
    : schema_(std::move(schema)), pieces_(pieces), open_(std::move(open)), max_ready_(max_ready) {
    threads  = std::min(threads, pieces_);
    working_ = threads;
    threads_.reserve(threads);
    try {
      for (std::size_t thread = 0; thread < threads; ++thread) {
        threads_.emplace_back([this] { run(); });
      }
    } catch (...) {  // no thread: stop those that started
      stop();
      throw;
    }
  }
  ~parallel_reader() override { stop(); }
  parallel_reader(parallel_reader const&)            = delete;
  parallel_reader& operator=(parallel_reader const&) = delete;
  parallel_reader(parallel_reader&&)                 = delete;
  parallel_reader& operator=(parallel_reader&&)      = delete;

  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }

  [[nodiscard]] std::unique_ptr<table> next() override {
    std::unique_lock lock(mutex_);
    changed_.wait(lock, [this] { return failure_ || !ready_.empty() || working_ == 0; });
    if (failure_) {
      std::rethrow_exception(failure_);
    }
    if (ready_.empty()) {
      return nullptr;  // every piece read: the end, for every later call too
    }
    auto batch = std::move(ready_.front());
    ready_.pop_front();
    lock.unlock();
    changed_.notify_all();
    return batch;
  }

 private:
  void stop() noexcept {
    {
      std::lock_guard const lock(mutex_);
      stopping_ = true;
    }
    changed_.notify_all();
    for (auto& thread : threads_) {
      thread.join();  // after the read in progress, if any
    }
    threads_.clear();
  }

  /// One thread's work: pieces until none is left, the reader stops, or a read fails.
  void run() {
    try {
      while (true) {
        std::size_t piece = 0;
        {
          std::lock_guard const lock(mutex_);
          if (stopping_ || failure_ || next_piece_ == pieces_) {
            break;
          }
          piece = next_piece_++;
        }
        auto source = open_(piece);
        SPILLWAY_EXPECTS(source != nullptr,
                         "read_in_parallel: piece " + std::to_string(piece) + " opened no reader",
                         invalid_argument);
        while (auto batch = source->next()) {
          std::unique_lock lock(mutex_);
          changed_.wait(lock,
                        [this] { return stopping_ || failure_ || ready_.size() < max_ready_; });
          if (stopping_ || failure_) {
            break;
          }
          ready_.push_back(std::move(batch));
          lock.unlock();
          changed_.notify_all();
        }
      }
    } catch (...) {
      std::lock_guard const lock(mutex_);
      if (!failure_) {
        failure_ = std::current_exception();
      }
    }
    {
      std::lock_guard const lock(mutex_);
      --working_;
    }
    changed_.notify_all();
  }

  table_schema schema_;
  std::size_t pieces_;
  piece_opener open_;
  std::size_t max_ready_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<std::unique_ptr<table>> ready_;  ///< batches read, oldest first
  std::size_t next_piece_ = 0;                ///< the next piece no thread has taken
  std::size_t working_    = 0;                ///< threads not yet done
  std::exception_ptr failure_;                ///< the first read that failed
  bool stopping_ = false;
  std::vector<std::thread> threads_;  ///< last: they start once the state above exists
};

}  // namespace

std::unique_ptr<batch_reader> read_in_parallel(table_schema schema,
                                               std::size_t pieces,
                                               piece_opener open,
                                               std::size_t threads,
                                               std::size_t max_ready) {
  SPILLWAY_EXPECTS(open != nullptr, "read_in_parallel: no opener", invalid_argument);
  SPILLWAY_EXPECTS(threads > 0 && max_ready > 0,
                   "read_in_parallel: at least one thread and one ready batch",
                   invalid_argument);
  return std::make_unique<parallel_reader>(
    std::move(schema), pieces, std::move(open), threads, max_ready);
}

}  // namespace spillway
