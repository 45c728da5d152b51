/**
 * @file delayed_communicator.hpp
 * @brief A communicator that hands each point-to-point message to the one it wraps only a fixed
 * time after it was sent: a network's one-way latency, for measuring what round trips cost on
 * machines whose ranks share memory.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/shuffle/communicator.hpp>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <future>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <thread>
#include <utility>
#include <vector>

namespace spillway::bench {

/**
 * @brief Delays every `send` by `latency` before the wrapped communicator sends it.
 *
 * Messages leave in the order they were sent (one thread hands them on when due), so the order
 * between two ranks is kept; the send's future completes when the wrapped send does (a second
 * thread checks those every 20 us, each on its own). Receives and collectives go straight to the
 * wrapped communicator.
 */
class delayed_communicator final : public communicator {
 public:
  delayed_communicator(communicator& inner, std::chrono::microseconds latency)
    : inner_(inner),
      latency_(latency),
      mover_([this] { move(); }),
      completer_([this] { complete(); }) {}

  ~delayed_communicator() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    changed_.notify_all();
    mover_.join();  // every message handed on
    {
      std::lock_guard lock(mutex_);
      moved_all_ = true;
    }
    changed_.notify_all();
    completer_.join();
  }
  delayed_communicator(delayed_communicator const&)            = delete;
  delayed_communicator& operator=(delayed_communicator const&) = delete;
  delayed_communicator(delayed_communicator&&)                 = delete;
  delayed_communicator& operator=(delayed_communicator&&)      = delete;

  [[nodiscard]] int rank() const noexcept override { return inner_.rank(); }
  [[nodiscard]] int size() const noexcept override { return inner_.size(); }

  [[nodiscard]] std::future<void> send(int destination,
                                       std::uint32_t tag,
                                       std::span<std::byte const> bytes,
                                       memory_kind kind) override {
    if (destination < 0 || destination >= size() || tag > max_message_tag) {
      throw invalid_argument("delayed send: destination " + std::to_string(destination) +
                             " or tag " + std::to_string(tag) + " out of range");
    }
    auto done   = std::make_shared<std::promise<void>>();
    auto result = done->get_future();
    {
      std::lock_guard lock(mutex_);
      waiting_.push_back(
        message{clock::now() + latency_, destination, tag, bytes, kind, std::move(done)});
    }
    changed_.notify_all();
    return result;
  }

  [[nodiscard]] std::future<received_message> receive(int source,
                                                      std::uint32_t tag,
                                                      resource_ref resource) override {
    return inner_.receive(source, tag, resource);
  }

  void barrier() override { inner_.barrier(); }

  [[nodiscard]] std::vector<std::vector<std::byte>> allgather(
    std::span<std::byte const> mine) override {
    return inner_.allgather(mine);
  }

  [[nodiscard]] std::vector<std::vector<std::byte>> alltoall(
    std::vector<std::vector<std::byte>> const& outgoing) override {
    return inner_.alltoall(outgoing);
  }

  [[nodiscard]] std::string describe() const override {
    return inner_.describe() + " with " + std::to_string(latency_.count()) + " us latency";
  }

 private:
  using clock = std::chrono::steady_clock;

  struct message {
    clock::time_point due;
    int destination;
    std::uint32_t tag;
    std::span<std::byte const> bytes;
    memory_kind kind;
    std::shared_ptr<std::promise<void>> done;
  };

  struct sent_message {
    std::future<void> sent;
    std::shared_ptr<std::promise<void>> done;
  };

  /// Hands each message on when it is due, in order.
  void move() {
    std::unique_lock lock(mutex_);
    while (true) {
      changed_.wait(lock, [this] { return stop_ || !waiting_.empty(); });
      if (waiting_.empty()) {
        return;  // stopping, and nothing left
      }
      auto const due = waiting_.front().due;
      if (clock::now() < due) {
        changed_.wait_until(lock, due);
        continue;
      }
      message next = std::move(waiting_.front());
      waiting_.pop_front();
      lock.unlock();
      sent_message handed{{}, std::move(next.done)};
      try {
        handed.sent = inner_.send(next.destination, next.tag, next.bytes, next.kind);
      } catch (...) {
        handed.done->set_exception(std::current_exception());
        lock.lock();
        continue;
      }
      lock.lock();
      sending_.push_back(std::move(handed));
      changed_.notify_all();
    }
  }

  /// Completes each send's future when the wrapped send completes, each on its own: a send that
  /// waits for its receive must not hold up the others (that receive may depend on them).
  void complete() {
    std::vector<sent_message> pending;
    std::unique_lock lock(mutex_);
    while (true) {
      while (!sending_.empty()) {
        pending.push_back(std::move(sending_.front()));
        sending_.pop_front();
      }
      if (moved_all_) {
        return;  // (being destroyed: sends still pending are abandoned, their futures broken)
      }
      if (pending.empty()) {
        changed_.wait(lock, [this] { return moved_all_ || !sending_.empty(); });
        continue;
      }
      lock.unlock();
      std::erase_if(pending, [](sent_message& each) {
        if (each.sent.wait_for(std::chrono::seconds{0}) != std::future_status::ready) {
          return false;
        }
        try {
          each.sent.get();
          each.done->set_value();
        } catch (...) {
          each.done->set_exception(std::current_exception());
        }
        return true;
      });
      lock.lock();
      if (!pending.empty() && sending_.empty()) {
        changed_.wait_for(lock, POLL);
      }
    }
  }

  /// How often sends handed on are checked for completion while some are not complete.
  static constexpr std::chrono::microseconds POLL{20};

  communicator& inner_;
  std::chrono::microseconds const latency_;
  std::mutex mutex_;
  std::condition_variable changed_;
  std::deque<message> waiting_;
  std::deque<sent_message> sending_;
  bool stop_      = false;
  bool moved_all_ = false;  ///< the mover has stopped: nothing more comes to `sending_`
  std::thread mover_;
  std::thread completer_;
};

}  // namespace spillway::bench
