#include "spill/io_pool.hpp"

namespace spillway::detail {

io_pool::io_pool(std::size_t threads) {
  threads_.reserve(threads);
  for (std::size_t index = 0; index < threads; ++index) {
    threads_.emplace_back([this] { run(); });
  }
}

io_pool::~io_pool() {
  {
    scoped_lock lock(mutex_);
    stopping_ = true;
  }
  work_available_.notify_all();
  for (auto& thread : threads_) {
    thread.join();
  }
}

void io_pool::submit(io_kind kind, std::function<void()> job) {
  {
    scoped_lock lock(mutex_);
    (kind == io_kind::READ ? reads_ : writes_).push_back(std::move(job));
  }
  work_available_.notify_one();
}

void io_pool::drain() {
  scoped_lock lock(mutex_);
  lock.wait(idle_, [this]() SPILLWAY_REQUIRES(mutex_) {
    return reads_.empty() && writes_.empty() && running_ == 0;
  });
}

void io_pool::run() {
  scoped_lock lock(mutex_);
  while (true) {
    lock.wait(work_available_, [this]() SPILLWAY_REQUIRES(mutex_) {
      return stopping_ || !reads_.empty() || !writes_.empty();
    });
    if (reads_.empty() && writes_.empty()) {
      return;
    }  // stopping with nothing left
    auto& queue = reads_.empty() ? writes_ : reads_;
    auto job    = std::move(queue.front());
    queue.pop_front();
    ++running_;
    lock.unlock();
    job();
    job = nullptr;
    lock.lock();
    --running_;
    if (reads_.empty() && writes_.empty() && running_ == 0) {
      idle_.notify_all();
    }
  }
}

}  // namespace spillway::detail
