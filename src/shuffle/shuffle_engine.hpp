/**
 * @file shuffle_engine.hpp
 * @brief One rank's shuffle state (`shuffle_engine`) behind `shuffler`; private to the layer.
 *
 * Its members are defined by side: shuffle_engine.cpp (the map side: map tasks, lineage,
 * checkpoints, recompute), pull_engine.cpp (the read side of both modes: partitions read, shards
 * fetched ahead and served) and push_engine.cpp (PUSH: the sender thread within its credits and
 * the inbox that returns them). Device steps run through `device_gate` (device_gate.hpp).
 */
#pragma once

#include "shuffle/device_gate.hpp"
#include "shuffle/map_checkpoint.hpp"
#include "shuffle/shard_frame.hpp"

#include <spillway/core/mutex.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/pack.hpp>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <exception>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

namespace spillway::detail {

/// Offsets of the shuffle's tags from `shuffle_id * TAGS_PER_SHUFFLE`.
enum tag_offset : std::uint32_t {
  REQUEST_TAG     = 0,  ///< fetch requests and the service thread's stop message
  REPLY_TAG       = 1,  ///< packed shards answering a request
  PUSH_HEADER_TAG = 2,  ///< PUSH: (map, partition, bytes) before each shard, and the inbox stop
  PUSH_DATA_TAG   = 3,  ///< PUSH: the packed shard
  CREDIT_TAG      = 4,  ///< PUSH: bytes acknowledged by a receiver
};
constexpr std::uint32_t TAGS_PER_SHUFFLE = 8;

/// The first word of a control message.
enum message_kind : std::uint64_t { FETCH = 1, STOP = 2, PUSH = 3, CREDIT = 4 };

using clock_type = std::chrono::steady_clock;

std::vector<std::uint64_t> words_of(received_message const& message, std::size_t count);

std::span<std::byte const> bytes_of(std::vector<std::uint64_t> const& words);

/** @brief The state of one rank's shuffle; see shuffler.hpp for the protocol. */
class shuffle_engine {
 public:
  shuffle_engine(shuffle_mode mode,
                 communicator& comm,
                 spill_store& store,
                 shuffle_options options,
                 stream_view stream,
                 memory_resources mrs);

  ~shuffle_engine() { stop_threads(); }
  shuffle_engine(shuffle_engine const&)            = delete;
  shuffle_engine& operator=(shuffle_engine const&) = delete;
  shuffle_engine(shuffle_engine&&)                 = delete;
  shuffle_engine& operator=(shuffle_engine&&)      = delete;

  std::size_t add_map(map_input input, std::string const& identity = {});

  std::size_t add_map(map_view_input input, std::string const& identity = {});

  /// The next map number, held for `add_reserved_map`.
  std::size_t reserve_map();

  /// `add_map(input, identity)` as the map number `reserved` (from `reserve_map`).
  std::size_t add_reserved_map(std::size_t reserved,
                               map_input input,
                               std::string const& identity = {});

  std::size_t add_map(table_view const& batch);

  /// The map task of `add_map` and `add_reserved_map`: number `reserved`, or the next one.
  std::size_t run_map(map_view_input input,
                      std::string const& identity,
                      std::optional<std::size_t> reserved);

  /// `add_map(batch)` without the split: the batch's rows as one map task.
  std::size_t add_lineage_map(table_view const& batch);

  void finish_maps();

  shard_directory const& directory() const {
    SPILLWAY_EXPECTS(directory_ready_.load(std::memory_order_acquire),
                     "shuffle: the directory exists after finish_maps",
                     logic_error);
    return directory_;
  }

  std::vector<std::size_t> owned_partitions() const {
    std::vector<std::size_t> result;
    for (auto partition = static_cast<std::size_t>(comm_.rank()); partition < num_partitions_;
         partition += static_cast<std::size_t>(comm_.size())) {
      result.push_back(partition);
    }
    return result;
  }

  /// Calls `read(location, handle, pinned)` with each shard of `partition` in order, pinned and
  /// checked (fetched again or recomputed if lost or corrupt), under the read lock, timed.
  template <typename Read>
  void read_each_shard(std::size_t partition, Read const& read);

  void for_each_batch(std::size_t partition, std::function<void(table_view const&)> const& consume);

  void take_each_batch(std::size_t partition,
                       std::function<void(std::unique_ptr<table>)> const& consume);

  std::unique_ptr<table> read_partition(std::size_t partition);

  void close() {
    comm_.barrier();
    stop_threads();
  }

  shuffle_statistics statistics() const;

  [[nodiscard]] std::size_t num_partitions() const noexcept { return num_partitions_; }
  [[nodiscard]] shuffle_mode mode() const noexcept { return mode_; }

 private:
  /// A shard held by this rank; `first_copy` is false for recomputed shards (the loss hook skips
  /// them).
  struct stored_shard {
    spillable_buffer data;
    bool first_copy = true;
  };
  using local_key = std::pair<std::size_t, std::size_t>;        ///< (map, partition)
  using inbox_key = std::tuple<int, std::size_t, std::size_t>;  ///< (rank, map, partition)

  /// Bytes to send for one request: pinned from the store, or rebuilt by recomputation.
  struct serving {
    spillable_buffer held;
    std::optional<pinned_buffer> pinned;
    buffer rebuilt;
    [[nodiscard]] void const* data() const { return pinned ? pinned->data() : rebuilt.data(); }
    [[nodiscard]] std::size_t size() const { return pinned ? pinned->size() : rebuilt.size(); }
  };

  [[nodiscard]] std::uint32_t tag(tag_offset offset) const noexcept { return tag_base_ + offset; }

  /// What a fetch ended with.
  enum class fetch_outcome : std::uint8_t {
    RECEIVED,  ///< the shard is in this rank's store
    LOST,      ///< dropped on the way: ask again
    NO_ROOM,   ///< no device memory to receive it: make room and ask again
    BUSY,      ///< no device memory on its producer to send it now: wait, then ask again
  };

  static void append(std::vector<std::byte>& out, std::uint64_t word) {
    std::size_t const at = out.size();
    out.resize(at + sizeof(word));
    std::memcpy(out.data() + at, &word, sizeof(word));
  }

  /// Removes the schema a rank published from the front of `published`; empty when it had none.
  static std::optional<std::vector<data_type>> take_schema(std::vector<std::byte>& published);

  void emit(event_kind kind, shard_key const& key, std::size_t bytes) const {
    if (options_.events == nullptr) {
      return;
    }
    event e{};
    e.time  = std::chrono::steady_clock::now();
    e.kind  = kind;
    e.bytes = bytes;
    e.value = static_cast<std::int64_t>(key.partition);
    options_.events->record(e);
  }

  bool lose(shard_loss_point point, shard_key const& key) {
    if (options_.testing_shard_loss && options_.testing_shard_loss(point, key)) {
      lost_shards_.fetch_add(1, std::memory_order_relaxed);
      return true;
    }
    return false;
  }

  /// Runs `input` and partitions its rows; `schema` (when given) receives their column types.
  /** @return a hash of everything that decides which rows go to which partition */
  [[nodiscard]] std::uint64_t fingerprint() const;

  /**
   * @brief Reads the shards of map task `identity` from the checkpoint into the store.
   * @return false when it has no (usable) checkpoint
   */
  template <typename MadeShard>
  bool resume_map(std::string const& identity,
                  std::vector<MadeShard>& made,
                  std::vector<data_type>& schema);

  /** @brief Writes the shards of map task `identity`; a failure is a warning, not an error. */
  template <typename MadeShard>
  void persist_map(std::string const& identity, std::vector<MadeShard> const& made);

  /// Runs map task `input` and packs each of its partitions, in one pass, into a frame whose
  /// header is still to be written (`finish_shard_frame`).
  std::vector<packed_partition> partition_input(map_view_input const& input,
                                                std::vector<data_type>* schema = nullptr);

  /// Reruns map task `map` of this rank and returns its shard of `partition`, packed.
  buffer recompute(std::size_t map, std::size_t partition);

  /// Takes this rank's shard (map, partition) to hand it out; rebuilds it when it is gone.
  serving take_for_serving(std::size_t map, std::size_t partition);

  std::vector<shard_location> locations_to_read(std::size_t partition) const;

  /// The shard at `location`, in this rank's store; `attempt` > 0 skips the push inbox.
  spillable_buffer obtain(shard_location const& location, std::size_t attempt);

  /// A request for a shard: the reply's receive is posted before the request is sent.
  struct pending_fetch {
    shard_location location;
    std::vector<std::uint64_t> request;  ///< the request's words, kept until it is sent
    std::future<received_message> reply;
    std::future<void> sent;

    [[nodiscard]] bool arrived() const {
      return reply.wait_for(std::chrono::seconds{0}) == std::future_status::ready;
    }
  };

  /// PULL: a reader's requests sent ahead of its reading (defined in pull_engine.cpp).
  class read_ahead;

  /// Asks `key.rank` for the shard without waiting. Replies from one rank come in the order of the
  /// requests (one service thread answers them in turn; messages do not overtake), so the
  /// receives posted here match them in order, as long as each is waited on (`collect`) or
  /// drained.
  pending_fetch ask(shard_location const& location);

  /// Waits for the reply to `asked`, into `fetched` when it arrived whole.
  fetch_outcome collect(pending_fetch& asked,
                        bool first_copy,
                        std::optional<spillable_buffer>& fetched);

  /// Asks `key.rank` for the shard, into `fetched` when it arrives.
  fetch_outcome fetch(shard_location const& location,
                      bool first_copy,
                      std::optional<spillable_buffer>& fetched);

  /// Pins `handle` and views its table; a corrupt copy is fetched (or rebuilt) again.
  std::pair<pinned_buffer, table_view> pin(shard_location const& location,
                                           spillable_buffer& handle,
                                           std::vector<std::uint8_t>& metadata,
                                           read_ahead* ahead = nullptr);

  void note_fetches_ahead(std::size_t asked) {
    if (asked > peak_fetches_ahead_.load(std::memory_order_relaxed)) {
      peak_fetches_ahead_.store(asked, std::memory_order_relaxed);  // (one reader at a time)
    }
  }

  void count_read(shard_location const& location) {
    shards_read_.fetch_add(1, std::memory_order_relaxed);
    rows_read_.fetch_add(location.rows, std::memory_order_relaxed);
    bytes_read_.fetch_add(location.bytes, std::memory_order_relaxed);
  }
  void count_sent(std::size_t bytes) {
    messages_sent_.fetch_add(1, std::memory_order_relaxed);
    bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  }
  void count_received(std::size_t bytes) {
    messages_received_.fetch_add(1, std::memory_order_relaxed);
    bytes_received_.fetch_add(bytes, std::memory_order_relaxed);
  }

  /// Answers fetch requests until this rank sends itself STOP.
  void service_loop();

  /// PUSH: stores arriving shards and returns credits until this rank sends itself STOP.
  void inbox_loop();

  /// PUSH: sends queued shards to their owners within the credit limit, until maps finish.
  void sender_loop();

  /// Stops the sender (if running) and sends STOP to this rank's service and inbox threads.
  void stop_threads() noexcept;

  shuffle_mode const mode_;
  communicator& comm_;
  spill_store& store_;
  shuffle_options const options_;
  stream_view const stream_;
  memory_resources const mrs_;
  std::size_t const num_partitions_;
  std::uint32_t const tag_base_;
  device_gate gate_;

  mutable mutex mutex_;
  std::condition_variable queue_changed_;
  std::vector<map_view_input> maps_ SPILLWAY_GUARDED_BY(mutex_);  ///< empty: reserved, not added
  std::size_t reserved_maps_ SPILLWAY_GUARDED_BY(mutex_) = 0;     ///< reserved and not yet added
  std::vector<std::vector<std::pair<std::size_t, std::size_t>>> map_sizes_
    SPILLWAY_GUARDED_BY(mutex_);
  std::map<local_key, stored_shard> local_shards_ SPILLWAY_GUARDED_BY(mutex_);
  std::map<inbox_key, spillable_buffer> inbox_ SPILLWAY_GUARDED_BY(mutex_);
  std::deque<local_key> send_queue_ SPILLWAY_GUARDED_BY(mutex_);
  bool maps_finished_ SPILLWAY_GUARDED_BY(mutex_) = false;
  bool stopping_ SPILLWAY_GUARDED_BY(mutex_)      = false;
  std::exception_ptr sender_error_ SPILLWAY_GUARDED_BY(mutex_);
  /// The column types of the map inputs: this rank's until `finish_maps`, any rank's after
  std::optional<std::vector<data_type>> schema_ SPILLWAY_GUARDED_BY(mutex_);
  std::vector<std::size_t> outstanding_;  ///< PUSH: unacknowledged bytes per receiver (sender)

  mutex read_mutex_;  ///< serializes readers (replies are matched by source and tag)
  shard_directory directory_;
  std::atomic<bool> directory_ready_{false};

  std::atomic<std::size_t> map_tasks_{0}, shards_written_{0}, bytes_written_{0}, shards_read_{0},
    rows_read_{0}, bytes_read_{0}, shards_taken_in_place_{0}, messages_sent_{0},
    messages_received_{0}, bytes_sent_{0}, bytes_received_{0}, lost_shards_{0}, recomputed_maps_{0},
    fetch_retries_{0}, backpressure_waits_{0}, peak_unacknowledged_{0}, resumed_maps_{0},
    checkpoint_errors_{0}, peak_fetches_ahead_{0};
  std::optional<map_checkpoint> checkpoint_;  ///< with `checkpoint_directory`
  std::atomic<std::int64_t> map_time_{0}, read_time_{0};

  std::thread service_;
  std::thread inbox_thread_;
  std::thread sender_thread_;
};

}  // namespace spillway::detail
