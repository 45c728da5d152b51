#include <spillway/core/error.hpp>
#include <spillway/core/stream_view.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/shuffle/in_process_communicator.hpp>

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <unordered_map>
#include <utility>
#include <vector>

namespace spillway {
namespace detail {

namespace {

struct pending_send {
  int source;
  std::uint32_t tag;
  std::span<std::byte const> bytes;
  memory_kind kind;
  std::promise<void> done;
};

struct pending_receive {
  int source;  // or any_source
  std::uint32_t tag;
  resource_ref resource;
  std::promise<received_message> done;
};

bool matches(int wanted_source, std::uint32_t wanted_tag, int source, std::uint32_t tag) {
  return tag == wanted_tag && (wanted_source == any_source || wanted_source == source);
}

/** Copies the message into a buffer from the receiver's resource, then completes both sides. */
void deliver(pending_send& send, pending_receive& receive) {
  try {
    // An out-of-memory here fails the receive, whose caller recovers (a push inbox lets the shard
    // be fetched again, a pull fetch makes room and asks again): a retry block of its own.
    retry_block_marker const protected_by_the_receiver;
    buffer data;
    if (!send.bytes.empty()) {
      data =
        buffer(send.bytes.data(), send.kind, send.bytes.size(), default_stream(), receive.resource);
    }
    receive.done.set_value(received_message{send.source, send.tag, std::move(data)});
  } catch (...) {
    receive.done.set_exception(std::current_exception());
  }
  send.done.set_value();
}

}  // namespace

/** The mailboxes and the collective meeting point of one group. */
class in_process_state {
 public:
  explicit in_process_state(int size)
    : size_(size),
      mailboxes_(static_cast<std::size_t>(size)),
      slots_(static_cast<std::size_t>(size)) {}

  [[nodiscard]] int size() const noexcept { return size_; }

  std::future<void> send(int source,
                         int destination,
                         std::uint32_t tag,
                         std::span<std::byte const> bytes,
                         memory_kind kind) {
    pending_send send{source, tag, bytes, kind, {}};
    auto result = send.done.get_future();
    std::optional<pending_receive> receive;
    {
      std::lock_guard lock(mutex_);
      if (failed_) {
        send.done.set_exception(failure());
        return result;
      }
      auto& box     = mailboxes_[static_cast<std::size_t>(destination)];
      auto receives = box.receives.find(tag);
      if (receives != box.receives.end()) {
        auto& queue = receives->second;
        for (auto it = queue.begin(); it != queue.end(); ++it) {
          if (matches(it->source, it->tag, source, tag)) {
            receive.emplace(std::move(*it));
            queue.erase(it);
            break;
          }
        }
        if (queue.empty()) {
          box.receives.erase(receives);
        }
      }
      if (!receive) {
        box.sends[tag].push_back(std::move(send));
        return result;
      }
    }
    deliver(send, *receive);
    return result;
  }

  std::future<received_message> receive(int destination,
                                        int source,
                                        std::uint32_t tag,
                                        resource_ref resource) {
    pending_receive receive{source, tag, resource, {}};
    auto result = receive.done.get_future();
    std::optional<pending_send> send;
    {
      std::lock_guard lock(mutex_);
      if (failed_) {
        receive.done.set_exception(failure());
        return result;
      }
      auto& box  = mailboxes_[static_cast<std::size_t>(destination)];
      auto sends = box.sends.find(tag);
      if (sends != box.sends.end()) {
        auto& queue = sends->second;
        for (auto it = queue.begin(); it != queue.end(); ++it) {
          if (matches(source, tag, it->source, it->tag)) {
            send.emplace(std::move(*it));
            queue.erase(it);
            break;
          }
        }
        if (queue.empty()) {
          box.sends.erase(sends);
        }
      }
      if (!send) {
        box.receives[tag].push_back(std::move(receive));
        return result;
      }
    }
    deliver(*send, receive);
    return result;
  }

  /** Every rank contributes; returns every rank's contribution, indexed by rank. */
  std::shared_ptr<std::vector<std::vector<std::vector<std::byte>>> const> exchange(
    int rank, std::vector<std::vector<std::byte>> contribution) {
    std::unique_lock lock(mutex_);
    if (failed_) {
      std::rethrow_exception(failure());
    }
    auto const generation                  = generation_;
    slots_[static_cast<std::size_t>(rank)] = std::move(contribution);
    if (++arrived_ == size_) {
      result_ =
        std::make_shared<std::vector<std::vector<std::vector<std::byte>>> const>(std::exchange(
          slots_,
          std::vector<std::vector<std::vector<std::byte>>>(static_cast<std::size_t>(size_))));
      arrived_ = 0;
      ++generation_;
      met_.notify_all();
      return result_;
    }
    met_.wait(lock, [&] { return failed_ || generation_ != generation; });
    if (generation_ == generation) {
      std::rethrow_exception(failure());
    }
    return result_;
  }

  void fail(std::string const& reason) {
    std::vector<pending_send> sends;
    std::vector<pending_receive> receives;
    {
      std::lock_guard lock(mutex_);
      if (failed_) {
        return;
      }
      failed_ = true;
      reason_ = reason;
      for (auto& box : mailboxes_) {
        for (auto& [tag, queue] : box.sends) {
          for (auto& s : queue) {
            sends.push_back(std::move(s));
          }
        }
        for (auto& [tag, queue] : box.receives) {
          for (auto& r : queue) {
            receives.push_back(std::move(r));
          }
        }
        box.sends.clear();
        box.receives.clear();
      }
      met_.notify_all();
    }
    for (auto& s : sends) {
      s.done.set_exception(failure());
    }
    for (auto& r : receives) {
      r.done.set_exception(failure());
    }
  }

 private:
  struct mailbox {
    // Per tag: sent to this rank and not yet received, in send order; posted by this rank and not
    // yet matched, in post order.
    std::unordered_map<std::uint32_t, std::deque<pending_send>> sends;
    std::unordered_map<std::uint32_t, std::deque<pending_receive>> receives;
  };

  [[nodiscard]] std::exception_ptr failure() const {
    return std::make_exception_ptr(communication_error("in-process group failed: " + reason_));
  }

  int const size_;
  std::mutex mutex_;
  std::condition_variable met_;
  bool failed_ = false;
  std::string reason_;
  std::vector<mailbox> mailboxes_;
  std::vector<std::vector<std::vector<std::byte>>> slots_;
  std::shared_ptr<std::vector<std::vector<std::vector<std::byte>>> const> result_;
  int arrived_              = 0;
  std::uint64_t generation_ = 0;
};

namespace {

class in_process_communicator final : public communicator {
 public:
  in_process_communicator(std::shared_ptr<in_process_state> state, int rank)
    : state_(std::move(state)), rank_(rank) {}

  [[nodiscard]] int rank() const noexcept override { return rank_; }
  [[nodiscard]] int size() const noexcept override { return state_->size(); }

  std::future<void> send(int destination,
                         std::uint32_t tag,
                         std::span<std::byte const> bytes,
                         memory_kind kind) override {
    SPILLWAY_EXPECTS(destination >= 0 && destination < size(),
                     "send: destination rank " + std::to_string(destination) +
                       " is outside the group of " + std::to_string(size()),
                     invalid_argument);
    check_tag(tag);
    return state_->send(rank_, destination, tag, bytes, kind);
  }

  std::future<received_message> receive(int source,
                                        std::uint32_t tag,
                                        resource_ref resource) override {
    SPILLWAY_EXPECTS(source == any_source || (source >= 0 && source < size()),
                     "receive: source rank " + std::to_string(source) +
                       " is outside the group of " + std::to_string(size()),
                     invalid_argument);
    check_tag(tag);
    return state_->receive(rank_, source, tag, resource);
  }

  void barrier() override { static_cast<void>(state_->exchange(rank_, {})); }

  std::vector<std::vector<std::byte>> allgather(std::span<std::byte const> mine) override {
    std::vector<std::vector<std::byte>> contribution;
    contribution.emplace_back(mine.begin(), mine.end());
    auto const all = state_->exchange(rank_, std::move(contribution));
    std::vector<std::vector<std::byte>> result;
    result.reserve(all->size());
    for (auto const& from : *all) {
      result.push_back(from.front());
    }
    return result;
  }

  std::vector<std::vector<std::byte>> alltoall(
    std::vector<std::vector<std::byte>> const& to_each) override {
    SPILLWAY_EXPECTS(to_each.size() == static_cast<std::size_t>(size()),
                     "alltoall: " + std::to_string(to_each.size()) + " parts for a group of " +
                       std::to_string(size()),
                     invalid_argument);
    auto const all = state_->exchange(rank_, to_each);
    std::vector<std::vector<std::byte>> result;
    result.reserve(all->size());
    for (auto const& from : *all) {
      result.push_back(from[static_cast<std::size_t>(rank_)]);
    }
    return result;
  }

  [[nodiscard]] std::string describe() const override {
    return "in-process rank " + std::to_string(rank_) + " of " + std::to_string(size());
  }

 private:
  static void check_tag(std::uint32_t tag) {
    SPILLWAY_EXPECTS(tag <= max_message_tag,
                     "message tag " + std::to_string(tag) + " exceeds the largest tag " +
                       std::to_string(max_message_tag),
                     invalid_argument);
  }

  std::shared_ptr<in_process_state> state_;
  int rank_;
};

}  // namespace
}  // namespace detail

in_process_group::in_process_group(int size) {
  SPILLWAY_EXPECTS(size >= 1 && size <= 4096,
                   "an in-process group needs 1 to 4096 ranks, not " + std::to_string(size),
                   invalid_argument);
  state_ = std::make_shared<detail::in_process_state>(size);
  ranks_.reserve(static_cast<std::size_t>(size));
  for (int r = 0; r < size; ++r) {
    ranks_.push_back(std::make_unique<detail::in_process_communicator>(state_, r));
  }
}

in_process_group::~in_process_group() { state_->fail("the group was destroyed"); }

int in_process_group::size() const noexcept { return state_->size(); }

communicator& in_process_group::rank(int r) {
  SPILLWAY_EXPECTS(
    r >= 0 && r < size(),
    "rank " + std::to_string(r) + " is outside the group of " + std::to_string(size()),
    invalid_argument);
  return *ranks_[static_cast<std::size_t>(r)];
}

void in_process_group::fail(std::string const& reason) { state_->fail(reason); }

void run_in_process(int size, std::function<void(communicator&)> const& body) {
  in_process_group group(size);
  std::vector<std::exception_ptr> errors(static_cast<std::size_t>(size));
  std::vector<char> caused_by_failure(static_cast<std::size_t>(size), 0);
  {
    std::vector<std::jthread> threads;
    threads.reserve(static_cast<std::size_t>(size));
    for (int r = 0; r < size; ++r) {
      threads.emplace_back([&, r] {
        auto const index = static_cast<std::size_t>(r);
        try {
          body(group.rank(r));
        } catch (communication_error const& e) {
          errors[index]            = std::current_exception();
          caused_by_failure[index] = 1;
          group.fail("rank " + std::to_string(r) + ": " + e.what());
        } catch (std::exception const& e) {
          errors[index] = std::current_exception();
          group.fail("rank " + std::to_string(r) + " threw: " + e.what());
        } catch (...) {
          errors[index] = std::current_exception();
          group.fail("rank " + std::to_string(r) + " threw");
        }
      });
    }
  }
  for (std::size_t r = 0; r < errors.size(); ++r) {
    if (errors[r] && caused_by_failure[r] == 0) {
      std::rethrow_exception(errors[r]);
    }
  }
  for (auto const& error : errors) {
    if (error) {
      std::rethrow_exception(error);
    }
  }
}

}  // namespace spillway
