/**
 * @file push_engine.cpp
 * @brief PUSH: the sender thread within its credits, and the inbox that returns them.
 */
#include "shuffle/shuffle_engine.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/mutex.hpp>

#include <algorithm>
#include <deque>
#include <exception>
#include <optional>
#include <utility>

namespace spillway::detail {

void shuffle_engine::inbox_loop() {
  std::deque<std::pair<std::vector<std::uint64_t>, std::future<void>>> credits;
  auto const reap = [&](bool all) {
    while (!credits.empty() && (all || credits.front().second.wait_for(std::chrono::seconds(0)) ==
                                         std::future_status::ready)) {
      credits.front().second.get();
      credits.pop_front();
    }
  };
  try {
    for (;;) {
      received_message header =
        comm_.receive(any_source, tag(PUSH_HEADER_TAG), options_.host).get();
      auto const words = words_of(header, 4);
      if (words[0] == STOP && header.source == comm_.rank()) {
        break;
      }
      count_received(header.data.size());
      shard_key const key{header.source, words[1], words[2]};
      try {
        received_message data =
          comm_.receive(header.source, tag(PUSH_DATA_TAG), mrs_.output()).get();
        count_received(data.data.size());
        std::size_t const size = data.data.size();
        spillable_buffer handle =
          store_.make_spillable(std::move(data.data), options_.shard_priority);
        emit(event_kind::SHARD_RECEIVED, key, size);
        if (!lose(shard_loss_point::AFTER_RECEIVE, key)) {
          scoped_lock lock(mutex_);
          inbox_.emplace(inbox_key{key.rank, key.map, key.partition}, std::move(handle));
        }
      } catch (out_of_memory const&) {  // lost: the reader fetches it from its producer
        lost_shards_.fetch_add(1, std::memory_order_relaxed);
      }
      credits.emplace_back(std::vector<std::uint64_t>{CREDIT, words[3]}, std::future<void>{});
      credits.back().second =
        comm_.send(header.source, tag(CREDIT_TAG), bytes_of(credits.back().first));
      count_sent(2 * sizeof(std::uint64_t));
      reap(false);
    }
    reap(true);
  } catch (communication_error const&) {
    // The group failed; pending credits fail the same way, once MPI is done with their bytes.
    for (auto& pending : credits) {
      if (pending.second.valid()) {
        pending.second.wait();
      }
    }
  }
}

void shuffle_engine::sender_loop() {
  std::size_t const limit =
    std::max<std::size_t>(1, options_.inbox_budget / static_cast<std::size_t>(comm_.size()));
  std::size_t expected_credits = 0;
  std::optional<std::future<received_message>> credit;
  auto const take_credit = [&](bool wait) {
    if (expected_credits == 0) {
      return false;
    }
    if (!credit) {
      credit.emplace(comm_.receive(any_source, tag(CREDIT_TAG), options_.host));
    }
    if (!wait && credit->wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
      return false;
    }
    received_message message = credit->get();
    credit.reset();
    auto const words = words_of(message, 2);
    count_received(message.data.size());
    --expected_credits;
    auto& outstanding = outstanding_[static_cast<std::size_t>(message.source)];
    outstanding -= std::min<std::size_t>(outstanding, words[1]);
    return true;
  };
  try {
    for (;;) {
      local_key next;
      std::optional<stored_shard> shard;
      {
        scoped_lock lock(mutex_);
        lock.wait(queue_changed_, [&]() SPILLWAY_REQUIRES(mutex_) {
          return !send_queue_.empty() || maps_finished_ || stopping_;
        });
        if (stopping_ || (send_queue_.empty() && maps_finished_)) {
          break;
        }
        next = send_queue_.front();
        send_queue_.pop_front();
        auto found = local_shards_.find(next);
        if (found != local_shards_.end()) {
          shard.emplace(std::move(found->second));
          local_shards_.erase(found);
        }
      }
      if (!shard) {
        continue;  // dropped: its owner fetches it, and this rank recomputes it then
      }
      shard_key const key{comm_.rank(), next.first, next.second};
      if (lose(shard_loss_point::BEFORE_SEND, key)) {
        continue;
      }
      int const owner        = partition_owner(next.second, comm_.size());
      auto& outstanding      = outstanding_[static_cast<std::size_t>(owner)];
      std::size_t const size = shard->data.size();
      if (outstanding > 0 && outstanding + size > limit) {
        backpressure_waits_.fetch_add(1, std::memory_order_relaxed);
        while (outstanding > 0 && outstanding + size > limit) {
          take_credit(true);
        }
      }
      std::optional<pinned_buffer> pinned;
      try {
        gate_.run([&] { pinned.emplace(shard->data.acquire()); });
      } catch (io_error const&) {  // corrupt: its owner fetches it, this rank recomputes it
        lost_shards_.fetch_add(1, std::memory_order_relaxed);
        continue;
      }
      {
        device_gate::hand_over const handing(gate_);
        std::vector<std::uint64_t> const header{PUSH, next.first, next.second, size};
        auto header_sent = comm_.send(owner, tag(PUSH_HEADER_TAG), bytes_of(header));
        auto data_sent   = comm_.send(owner,
                                    tag(PUSH_DATA_TAG),
                                    {static_cast<std::byte const*>(pinned->data()), size},
                                    mrs_.output().kind());
        header_sent.wait();  // both done with their bytes before either may throw
        data_sent.wait();
        header_sent.get();
        data_sent.get();
        count_sent(header.size() * sizeof(std::uint64_t));
        count_sent(size);
        pinned.reset();
      }
      shard->data.release();
      emit(event_kind::SHARD_SENT, key, size);
      outstanding += size;
      ++expected_credits;
      if (outstanding > peak_unacknowledged_.load(std::memory_order_relaxed)) {
        peak_unacknowledged_.store(outstanding, std::memory_order_relaxed);
      }
      while (take_credit(false)) {
      }
    }
    while (expected_credits > 0) {
      take_credit(true);
    }
  } catch (...) {
    scoped_lock lock(mutex_);
    sender_error_ = std::current_exception();
  }
}

}  // namespace spillway::detail
