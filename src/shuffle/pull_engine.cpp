/**
 * @file pull_engine.cpp
 * @brief The shuffle's read side: partitions read, shards fetched (ahead), fetches served.
 */
#include "shuffle/shard_frame.hpp"
#include "shuffle/shuffle_engine.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <algorithm>
#include <chrono>
#include <exception>
#include <optional>
#include <string>
#include <thread>
#include <utility>

namespace spillway {
namespace detail {
namespace {

/// A reply this short says the producer could not provide the shard (frames are >= 64 bytes).
constexpr std::size_t FAILURE_REPLY_BYTES = 8;
/// A reply this short says the producer had no device memory to send the shard now.
constexpr std::size_t BUSY_REPLY_BYTES = 16;
/// Asks again of a producer that was busy, waiting longer each time (up to MAX_BUSY_WAIT), before
/// the read fails: about 30 s in all.
constexpr std::size_t MAX_BUSY_RETRIES = 320;
constexpr std::chrono::milliseconds MAX_BUSY_WAIT{100};

/// Receives that found no room, in a row, before a reader gives up on a shard.
constexpr std::size_t MAX_NO_ROOM_RETRIES = 8;

/// PULL: the most shard requests a reader sends ahead of the shard it reads (see `read_ahead`).
constexpr std::size_t MAX_FETCHES_AHEAD = 8;

/// A table of no rows with columns of `schema`, from `resource`.
std::unique_ptr<table> make_empty_table(std::vector<data_type> const& schema,
                                        stream_view stream,
                                        resource_ref resource) {
  std::vector<std::unique_ptr<column>> columns;
  for (data_type const type : schema) {
    if (is_fixed_width(type)) {
      columns.push_back(
        make_fixed_width_column(type, 0, mask_state::UNALLOCATED, stream, resource));
      continue;
    }
    auto strings = make_strings_column(0, 0, mask_state::UNALLOCATED, stream, resource, type);
    std::int64_t const zero[1] = {0};
    copy_bytes(
      strings->mutable_offsets(), resource.kind(), zero, memory_kind::HOST, sizeof(zero), stream);
    columns.push_back(std::move(strings));
  }
  return std::make_unique<table>(std::move(columns));
}

}  // namespace

/**
 * @brief PULL: a reader's requests for the remote shards it reads next, sent before it reads
 * them, so that their round trips overlap the reading of the shards before them.
 *
 * Requests go out in reading order while the shards asked for and not yet taken stay within
 * `read_ahead_budget` (and `inbox_budget`) bytes and MAX_FETCHES_AHEAD requests (the next shard
 * is always asked for: a larger one is read alone, as without read-ahead). A received shard waits
 * in its reply, outside the spill store, until the reader next takes a shard, when every reply
 * that has arrived goes into the store (where it can spill). Before a shard is asked for again (a
 * reply that found no room, a corrupt copy), every shard asked for is received into the store and
 * no more are asked for ahead. Local shards and PUSH readers (whose shards come to the inbox) ask
 * for nothing. Every request sent is waited on, at the latest when this is destroyed, so that
 * later receives from the same rank match their own replies; a reply of another size than the
 * directory's is a logic_error.
 */
class shuffle_engine::read_ahead {
 public:
  read_ahead(shuffle_engine& engine, std::vector<shard_location> const& locations)
    : engine_(engine), locations_(locations), slots_(locations.size()) {}
  read_ahead(read_ahead const&)            = delete;
  read_ahead& operator=(read_ahead const&) = delete;
  read_ahead(read_ahead&&)                 = delete;
  read_ahead& operator=(read_ahead&&)      = delete;

  ~read_ahead() {
    for (auto& each : slots_) {
      if (each.asked) {
        drain(*each.asked);
      }
    }
  }

  /// The shard at `index` (taken in increasing order), after asking for those after it.
  spillable_buffer take(std::size_t index) {
    store_arrived(index);
    ask_from(index);
    fetch_slot& at = slots_[index];
    if (at.asked) {
      receive(index);
    }
    if (at.held) {
      return std::move(*at.held);
    }
    if (at.no_room) {  // every reply into the store, where the room is made
      receive_all();
      engine_.gate_.make_room();
    }
    return engine_.obtain(locations_[index], at.attempt);
  }

  /// Receives every shard asked for into the store and asks for no more ahead.
  void receive_all() {
    stopped_ = true;
    for (std::size_t index = 0; index < slots_.size(); ++index) {
      if (slots_[index].asked) {
        receive(index);
      }
    }
  }

 private:
  /// Requests sent ahead are the first of their shards (the loss hook sees them).
  static constexpr bool FIRST_COPY = true;

  struct fetch_slot {
    std::optional<pending_fetch> asked;    ///< sent, reply not yet waited on
    std::optional<spillable_buffer> held;  ///< received ahead into the store
    std::size_t attempt = 0;               ///< where `obtain` goes on without either
    bool no_room        = false;           ///< the reply found no room on the device
  };

  /// Asks for the remote shards from `index` on that fit.
  void ask_from(std::size_t index) {
    if (engine_.mode_ != shuffle_mode::PULL || stopped_) {
      return;
    }
    next_ = std::max(next_, index);
    for (; next_ < locations_.size(); ++next_) {
      shard_location const& location = locations_[next_];
      if (location.key.rank == engine_.comm_.rank()) {
        continue;
      }
      if (asked_ > 0 && (asked_ == MAX_FETCHES_AHEAD || bytes_ + location.bytes > budget())) {
        return;
      }
      slots_[next_].asked.emplace(engine_.ask(location));
      bytes_ += location.bytes;
      ++asked_;
      engine_.note_fetches_ahead(asked_);
    }
  }

  [[nodiscard]] std::size_t budget() const noexcept {
    return std::min(engine_.options_.read_ahead_budget, engine_.options_.inbox_budget);
  }

  /// `index`'s request is answered or dropped: it no longer counts ahead.
  void forget(std::size_t index) {
    bytes_ -= locations_[index].bytes;
    --asked_;
  }

  /// Receives the reply to `index`'s request into the store (or notes where to ask again).
  void receive(std::size_t index) {
    fetch_slot& each    = slots_[index];
    pending_fetch asked = std::move(*each.asked);
    each.asked.reset();
    forget(index);
    std::optional<spillable_buffer> fetched;
    auto const outcome = engine_.collect(asked, FIRST_COPY, fetched);
    if (outcome == fetch_outcome::RECEIVED) {
      each.held = std::move(fetched);
    } else {
      engine_.fetch_retries_.fetch_add(1, std::memory_order_relaxed);
      each.attempt = outcome == fetch_outcome::LOST ? 1 : 0;
      each.no_room = outcome == fetch_outcome::NO_ROOM;
    }
  }

  /// Puts every reply that has arrived into the store, where it can spill.
  /// Those asked for lie from `from` (the shard about to be taken) up to `next_`.
  void store_arrived(std::size_t from) {
    for (std::size_t index = from; index < std::min(next_, slots_.size()); ++index) {
      if (slots_[index].asked && slots_[index].asked->arrived()) {
        receive(index);
      }
    }
  }

  /// Waits out a request whose shard will not be read (a reader that failed); a request that
  /// was not sent has no reply to wait for.
  static void drain(pending_fetch& asked) noexcept {
    try {
      asked.sent.get();
    } catch (...) {
      return;
    }
    asked.reply.wait();
  }

  shuffle_engine& engine_;
  std::vector<shard_location> const& locations_;
  std::vector<fetch_slot> slots_;
  std::size_t next_  = 0;  ///< the next location to consider asking for
  std::size_t asked_ = 0;  ///< requests sent and not yet taken
  std::size_t bytes_ = 0;  ///< their shards' bytes
  bool stopped_      = false;
};

template <typename Read>
void shuffle_engine::read_each_shard(std::size_t partition, Read const& read) {
  auto const locations = locations_to_read(partition);
  auto const start     = clock_type::now();
  scoped_lock read_lock(read_mutex_);
  read_ahead ahead(*this, locations);
  for (std::size_t index = 0; index < locations.size(); ++index) {
    shard_location const& location = locations[index];
    spillable_buffer handle        = ahead.take(index);
    std::vector<std::uint8_t> metadata;
    auto pinned = pin(location, handle, metadata, &ahead);
    read(location, handle, pinned, metadata);
    count_read(location);
  }
  read_time_.fetch_add((clock_type::now() - start).count(), std::memory_order_relaxed);
}

void shuffle_engine::for_each_batch(std::size_t partition,
                                    std::function<void(table_view const&)> const& consume) {
  read_each_shard(partition, [&](shard_location const&, spillable_buffer&, auto& pinned, auto&) {
    consume(pinned.second);
  });
}

void shuffle_engine::take_each_batch(std::size_t partition,
                                     std::function<void(std::unique_ptr<table>)> const& consume) {
  read_each_shard(partition,
                  [&](shard_location const& location,
                      spillable_buffer& handle,
                      std::pair<pinned_buffer, table_view>& pinned,
                      std::vector<std::uint8_t>& metadata) {
                    void const* const at    = pinned.first.data();
                    table_view const viewed = pinned.second;
                    pinned.first.reset();
                    std::unique_ptr<table> rows;
                    buffer frame = handle.take_if_resident();
                    if (!frame.empty()) {
                      // The frame becomes the table; viewed again only if it moved since it
                      // was checked (spilled and brought back in between).
                      table_view const view =
                        frame.data() == at
                          ? viewed
                          : view_shard_frame(
                              frame.data(), frame.size(), frame.kind(), stream_, metadata);
                      rows = detail::adopt_shard_frame(std::move(frame), view, stream_);
                      shards_taken_in_place_.fetch_add(1, std::memory_order_relaxed);
                    } else {
                      auto again = pin(location, handle, metadata);
                      rows = gate_.run([&] { return detail::copy(again.second, stream_, mrs_); });
                    }
                    consume(std::move(rows));
                  });
}

std::unique_ptr<table> shuffle_engine::read_partition(std::size_t partition) {
  auto const locations = locations_to_read(partition);
  auto const start     = clock_type::now();
  scoped_lock read_lock(read_mutex_);
  // Everything arrives in the spill store first, so shards can spill while others arrive.
  std::vector<spillable_buffer> handles;
  handles.reserve(locations.size());
  {
    read_ahead ahead(*this, locations);
    for (std::size_t index = 0; index < locations.size(); ++index) {
      handles.push_back(ahead.take(index));
    }
  }
  std::vector<std::vector<std::uint8_t>> metadata(locations.size());
  std::vector<pinned_buffer> pins;
  std::vector<table_view> views;
  for (std::size_t index = 0; index < locations.size(); ++index) {
    auto pinned = pin(locations[index], handles[index], metadata[index]);
    pins.push_back(std::move(pinned.first));
    views.push_back(pinned.second);
    count_read(locations[index]);
  }
  std::unique_ptr<table> result;
  if (views.empty()) {
    std::optional<std::vector<data_type>> schema;
    {
      scoped_lock lock(mutex_);
      schema = schema_;
    }
    result = gate_.run([&] {
      return make_empty_table(schema.value_or(std::vector<data_type>{}), stream_, mrs_.output());
    });
  } else {
    result = gate_.run([&] { return detail::concatenate(views, stream_, mrs_); });
  }
  read_time_.fetch_add((clock_type::now() - start).count(), std::memory_order_relaxed);
  return result;
}

std::vector<shard_location> shuffle_engine::locations_to_read(std::size_t partition) const {
  SPILLWAY_EXPECTS(directory_ready_.load(std::memory_order_acquire),
                   "shuffle: partitions are read after finish_maps",
                   logic_error);
  SPILLWAY_EXPECTS_LT(partition, num_partitions_, "shuffle: no such partition", invalid_argument);
  SPILLWAY_EXPECTS(
    mode_ == shuffle_mode::PULL || partition_owner(partition, comm_.size()) == comm_.rank(),
    "shuffle: a push shuffle's partition " + std::to_string(partition) +
      " is read by its owner, rank " + std::to_string(partition_owner(partition, comm_.size())),
    invalid_argument);
  return directory_.shards_of(partition);
}

spillable_buffer shuffle_engine::obtain(shard_location const& location, std::size_t attempt) {
  shard_key const& key = location.key;
  if (key.rank == comm_.rank()) {
    serving taken = take_for_serving(key.map, key.partition);
    if (taken.pinned) {
      taken.pinned.reset();
      return std::move(taken.held);
    }
    return store_.make_spillable(std::move(taken.rebuilt), options_.shard_priority);
  }
  if (mode_ == shuffle_mode::PUSH && attempt == 0) {
    scoped_lock lock(mutex_);
    auto found = inbox_.find(inbox_key{key.rank, key.map, key.partition});
    if (found != inbox_.end()) {
      spillable_buffer handle = std::move(found->second);
      inbox_.erase(found);
      return handle;
    }
    lost_shards_.fetch_add(1, std::memory_order_relaxed);  // never arrived
  }
  std::size_t no_room = 0;
  std::size_t busy    = 0;
  while (attempt < options_.max_fetch_attempts) {
    // Only the first copy of a shard is offered to the loss hook: a refetch always counts.
    bool const first_copy = attempt == 0 && mode_ == shuffle_mode::PULL;
    std::optional<spillable_buffer> fetched;
    auto const outcome = fetch(location, first_copy, fetched);
    if (outcome == fetch_outcome::RECEIVED) {
      return std::move(*fetched);
    }
    fetch_retries_.fetch_add(1, std::memory_order_relaxed);
    if (outcome == fetch_outcome::NO_ROOM) {
      SPILLWAY_EXPECTS(no_room < MAX_NO_ROOM_RETRIES,
                       "shuffle: no device memory to receive shard (rank " +
                         std::to_string(key.rank) + ", map " + std::to_string(key.map) +
                         ", partition " + std::to_string(key.partition) + ") of " +
                         std::to_string(location.bytes) + " bytes, even with the store spilled",
                       out_of_memory);
      ++no_room;
      gate_.make_room();  // a receive that found no room is not a loss: it does not count
      continue;
    }
    if (outcome == fetch_outcome::BUSY) {
      // The producer's device is held by what its own readers pinned, which they let go of
      // without waiting on this rank.
      SPILLWAY_EXPECTS(busy < MAX_BUSY_RETRIES,
                       "shuffle: rank " + std::to_string(key.rank) +
                         " had no device memory to send shard (map " + std::to_string(key.map) +
                         ", partition " + std::to_string(key.partition) + ") of " +
                         std::to_string(location.bytes) + " bytes, asked " +
                         std::to_string(MAX_BUSY_RETRIES) + " times",
                       out_of_memory);
      ++busy;
      std::this_thread::sleep_for(
        std::min(MAX_BUSY_WAIT, std::chrono::milliseconds{static_cast<std::int64_t>(busy)}));
      continue;
    }
    ++attempt;
  }
  SPILLWAY_FAIL("shuffle: shard (rank " + std::to_string(key.rank) + ", map " +
                  std::to_string(key.map) + ", partition " + std::to_string(key.partition) +
                  ") lost " + std::to_string(options_.max_fetch_attempts) + " times",
                io_error);
}

shuffle_engine::pending_fetch shuffle_engine::ask(shard_location const& location) {
  shard_key const& key = location.key;
  pending_fetch asked{location, {FETCH, key.map, key.partition}, {}, {}};
  asked.reply = comm_.receive(key.rank, tag(REPLY_TAG), mrs_.output());
  asked.sent  = comm_.send(key.rank, tag(REQUEST_TAG), bytes_of(asked.request));
  return asked;
}

shuffle_engine::fetch_outcome shuffle_engine::collect(pending_fetch& asked,
                                                      bool first_copy,
                                                      std::optional<spillable_buffer>& fetched) {
  shard_key const& key = asked.location.key;
  asked.sent.get();
  count_sent(asked.request.size() * sizeof(std::uint64_t));
  received_message message;
  try {
    message = asked.reply.get();
  } catch (out_of_memory const&) {  // no room to receive it: the producer sends it again
    lost_shards_.fetch_add(1, std::memory_order_relaxed);
    return fetch_outcome::NO_ROOM;
  }
  count_received(message.data.size());
  if (message.data.size() == BUSY_REPLY_BYTES) {
    return fetch_outcome::BUSY;
  }
  SPILLWAY_EXPECTS(message.data.size() != FAILURE_REPLY_BYTES,
                   "shuffle: rank " + std::to_string(key.rank) + " could not provide shard (map " +
                     std::to_string(key.map) + ", partition " + std::to_string(key.partition) + ")",
                   io_error);
  SPILLWAY_EXPECTS_EQ(message.data.size(),
                      asked.location.bytes,
                      "shuffle: the reply for shard (rank " + std::to_string(key.rank) + ", map " +
                        std::to_string(key.map) + ", partition " + std::to_string(key.partition) +
                        ") is not of the directory's size: replies matched the wrong requests",
                      logic_error);
  std::size_t const size  = message.data.size();
  spillable_buffer handle = store_.make_spillable(std::move(message.data), options_.shard_priority);
  emit(event_kind::SHARD_RECEIVED, key, size);
  if (first_copy && lose(shard_loss_point::AFTER_RECEIVE, key)) {
    return fetch_outcome::LOST;
  }
  fetched.emplace(std::move(handle));
  return fetch_outcome::RECEIVED;
}

shuffle_engine::fetch_outcome shuffle_engine::fetch(shard_location const& location,
                                                    bool first_copy,
                                                    std::optional<spillable_buffer>& fetched) {
  pending_fetch asked = ask(location);
  return collect(asked, first_copy, fetched);
}

std::pair<pinned_buffer, table_view> shuffle_engine::pin(shard_location const& location,
                                                         spillable_buffer& handle,
                                                         std::vector<std::uint8_t>& metadata,
                                                         read_ahead* ahead) {
  for (std::size_t attempt = 1;; ++attempt) {
    try {
      return gate_.run([&] {
        pinned_buffer pinned = handle.acquire();
        table_view view =
          view_shard_frame(pinned.data(), pinned.size(), mrs_.output().kind(), stream_, metadata);
        return std::pair<pinned_buffer, table_view>{std::move(pinned), view};
      });
    } catch (io_error const&) {
      lost_shards_.fetch_add(1, std::memory_order_relaxed);
      if (attempt >= options_.max_fetch_attempts) {
        throw;
      }
      handle.release();
      fetch_retries_.fetch_add(1, std::memory_order_relaxed);
      if (ahead != nullptr) {
        ahead->receive_all();  // (replies waiting outside the store must not block this one)
      }
      handle = obtain(location, attempt);
    }
  }
}

void shuffle_engine::service_loop() {
  try {
    for (;;) {
      received_message request = comm_.receive(any_source, tag(REQUEST_TAG), options_.host).get();
      auto const words         = words_of(request, 3);
      if (words[0] == STOP && request.source == comm_.rank()) {
        return;
      }
      count_received(request.data.size());
      serving reply;
      std::vector<std::uint64_t> const failure{0};
      std::vector<std::uint64_t> const busy{0, 0};
      std::span<std::byte const> bytes = bytes_of(failure);
      memory_kind kind                 = memory_kind::HOST;
      bool served                      = false;
      try {
        SPILLWAY_EXPECTS(words[0] == FETCH, "shuffle: unknown request", corruption_error);
        reply  = take_for_serving(words[1], words[2]);
        bytes  = {static_cast<std::byte const*>(reply.data()), reply.size()};
        kind   = reply.pinned ? mrs_.output().kind() : reply.rebuilt.kind();
        served = true;
      } catch (communication_error const&) {
        throw;
      } catch (out_of_memory const&) {  // the shard stays; the reader asks again
        bytes = bytes_of(busy);
        kind  = memory_kind::HOST;
      } catch (std::exception const&) {  // answered with a failure reply; the reader throws
        bytes = bytes_of(failure);
        kind  = memory_kind::HOST;
      }
      {
        device_gate::hand_over const handing(gate_);
        comm_.send(request.source, tag(REPLY_TAG), bytes, kind).get();
        reply = serving{};
      }
      count_sent(bytes.size());
      if (served) {
        emit(event_kind::SHARD_SENT, shard_key{comm_.rank(), words[1], words[2]}, bytes.size());
      }
    }
  } catch (communication_error const&) {
    // The group failed; every rank's pending operations fail the same way.
  }
}

}  // namespace detail
}  // namespace spillway
