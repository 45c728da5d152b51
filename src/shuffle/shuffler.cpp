#include "shuffle/map_checkpoint.hpp"
#include "shuffle/shard_frame.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/shuffle/shuffler.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <xxhash.h>

#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <limits>
#include <map>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>

namespace spillway {
namespace detail {
namespace {

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

/// A reply this short says the producer could not provide the shard (frames are >= 64 bytes).
constexpr std::size_t FAILURE_REPLY_BYTES = 8;

using clock_type = std::chrono::steady_clock;

std::vector<std::uint64_t> words_of(received_message const& message, std::size_t count) {
  SPILLWAY_EXPECTS_EQ(message.data.size(),
                      count * sizeof(std::uint64_t),
                      "shuffle: malformed control message",
                      corruption_error);
  std::vector<std::uint64_t> words(count);
  std::memcpy(words.data(), message.data.data(), message.data.size());
  return words;
}

std::span<std::byte const> bytes_of(std::vector<std::uint64_t> const& words) {
  return std::as_bytes(std::span<std::uint64_t const>(words));
}

/// Receives that found no room, in a row, before a reader gives up on a shard.
constexpr std::size_t MAX_NO_ROOM_RETRIES = 8;

/// Runs of a device step alone (`device_gate::run`) while spilling frees something meanwhile.
constexpr std::size_t MAX_ALONE_RUNS = 8;

/// PULL: the most shard requests a reader sends ahead of the shard it reads (see `read_ahead`).
constexpr std::size_t MAX_FETCHES_AHEAD = 8;

/// The first word of a rank's published schema when it ran no map task.
constexpr std::uint64_t NO_SCHEMA = std::numeric_limits<std::uint64_t>::max();

/// A column type as one word: the type id, and the time unit above it.
std::uint64_t encode_type(data_type type) {
  return static_cast<std::uint64_t>(type.id()) | (static_cast<std::uint64_t>(type.unit()) << 8U);
}

data_type decode_type(std::uint64_t word) {
  auto const id   = word & 0xFFU;
  auto const unit = word >> 8U;
  SPILLWAY_EXPECTS(id < TYPE_ID_COUNT && unit <= static_cast<std::uint64_t>(time_unit::NANOSECOND),
                   "shuffle: malformed schema word " + std::to_string(word),
                   corruption_error);
  return data_type{static_cast<type_id>(id), static_cast<time_unit>(unit)};
}

/// The column types of `view`.
std::vector<data_type> schema_of(table_view const& view) {
  std::vector<data_type> schema;
  for (auto const& column : view) {
    schema.push_back(column.type());
  }
  return schema;
}

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
    auto strings = make_strings_column(0, 0, mask_state::UNALLOCATED, stream, resource);
    std::int64_t const zero[1] = {0};
    copy_bytes(
      strings->mutable_offsets(), resource.kind(), zero, memory_kind::HOST, sizeof(zero), stream);
    columns.push_back(std::move(strings));
  }
  return std::make_unique<table>(std::move(columns));
}

/**
 * @brief The shuffle's device steps on one rank: side by side normally, and alone to recover from
 * out-of-memory.
 *
 * A step (`run`) that fails with `out_of_memory` has rolled back (its allocations were freed by
 * unwinding). It then waits until no other step of the rank runs and no shard of the rank is
 * being handed to another rank (those hold pinned device memory until their receiver takes it,
 * which never waits on this rank's steps), spills every unpinned buffer of the store, and runs
 * again. It is alone among the rank's steps only: receives (the push inbox, replies) are not
 * steps and may fill the device again meanwhile, so it spills and runs again while spilling
 * frees something, up to MAX_ALONE_RUNS times. Steps must not wait on other ranks, nor run other
 * steps, while inside `run`.
 */
class device_gate {
 public:
  explicit device_gate(spill_store& store) : store_(store) {}

  /** @brief Runs `step`; once more alone after an out_of_memory. @return what `step` returns */
  template <typename Step>
  decltype(auto) run(Step&& step) {
    {
      shared_entry const entry(*this);
      try {
        return step();
      } catch (out_of_memory const&) {
        // Rolled back; run again alone below.
      }
    }
    exclusive_entry const entry(*this);
    make_room_alone();
    for (std::size_t alone = 1;; ++alone) {
      retries_.fetch_add(1, std::memory_order_relaxed);
      try {
        return step();
      } catch (out_of_memory const&) {
        if (alone == MAX_ALONE_RUNS || make_room_alone() == 0) {
          throw;
        }
      }
    }
  }

  /** @brief Waits until this rank's steps and hand-overs are done, then spills the store. */
  void make_room() {
    exclusive_entry const entry(*this);
    retries_.fetch_add(1, std::memory_order_relaxed);  // (the receive that asked runs again)
    make_room_alone();
  }

  /** @brief Counts a hand-over of pinned device memory to another rank while it lasts. */
  class hand_over {
   public:
    explicit hand_over(device_gate& gate) : gate_(gate) {
      scoped_lock lock(gate_.mutex_);
      ++gate_.hand_overs_;
    }
    ~hand_over() {
      scoped_lock lock(gate_.mutex_);
      --gate_.hand_overs_;
      gate_.changed_.notify_all();
    }
    hand_over(hand_over const&)            = delete;
    hand_over& operator=(hand_over const&) = delete;
    hand_over(hand_over&&)                 = delete;
    hand_over& operator=(hand_over&&)      = delete;

   private:
    device_gate& gate_;
  };

  /** @return the steps run again alone so far, and the receives that made room to run again */
  [[nodiscard]] std::size_t retries() const noexcept {
    return retries_.load(std::memory_order_relaxed);
  }

 private:
  class shared_entry {
   public:
    explicit shared_entry(device_gate& gate) : gate_(gate) {
      scoped_lock lock(gate_.mutex_);
      lock.wait(gate_.changed_, [&]() SPILLWAY_REQUIRES(gate_.mutex_) {
        return !gate_.exclusive_ && gate_.exclusive_waiting_ == 0;
      });
      ++gate_.running_;
    }
    ~shared_entry() {
      scoped_lock lock(gate_.mutex_);
      --gate_.running_;
      gate_.changed_.notify_all();
    }
    shared_entry(shared_entry const&)            = delete;
    shared_entry& operator=(shared_entry const&) = delete;
    shared_entry(shared_entry&&)                 = delete;
    shared_entry& operator=(shared_entry&&)      = delete;

   private:
    device_gate& gate_;
  };

  class exclusive_entry {
   public:
    explicit exclusive_entry(device_gate& gate) : gate_(gate) {
      scoped_lock lock(gate_.mutex_);
      ++gate_.exclusive_waiting_;
      lock.wait(gate_.changed_, [&]() SPILLWAY_REQUIRES(gate_.mutex_) {
        return !gate_.exclusive_ && gate_.running_ == 0 && gate_.hand_overs_ == 0;
      });
      --gate_.exclusive_waiting_;
      gate_.exclusive_ = true;
    }
    ~exclusive_entry() {
      scoped_lock lock(gate_.mutex_);
      gate_.exclusive_ = false;
      gate_.changed_.notify_all();
    }
    exclusive_entry(exclusive_entry const&)            = delete;
    exclusive_entry& operator=(exclusive_entry const&) = delete;
    exclusive_entry(exclusive_entry&&)                 = delete;
    exclusive_entry& operator=(exclusive_entry&&)      = delete;

   private:
    device_gate& gate_;
  };

  /// @return the bytes spilled
  std::size_t make_room_alone() {
    return store_.spill(std::numeric_limits<std::size_t>::max(), spill_tier::DEVICE);
  }

  spill_store& store_;
  mutex mutex_;
  std::condition_variable changed_;
  std::size_t running_ SPILLWAY_GUARDED_BY(mutex_)           = 0;
  std::size_t exclusive_waiting_ SPILLWAY_GUARDED_BY(mutex_) = 0;
  std::size_t hand_overs_ SPILLWAY_GUARDED_BY(mutex_)        = 0;
  bool exclusive_ SPILLWAY_GUARDED_BY(mutex_)                = false;
  std::atomic<std::size_t> retries_{0};
};

}  // namespace

/** @brief The state of one rank's shuffle; see shuffler.hpp for the protocol. */
class shuffle_engine {
 public:
  shuffle_engine(shuffle_mode mode,
                 communicator& comm,
                 spill_store& store,
                 shuffle_options options,
                 stream_view stream,
                 memory_resources mrs)
    : mode_(mode),
      comm_(comm),
      store_(store),
      options_(std::move(options)),
      stream_(stream),
      mrs_(mrs),
      num_partitions_(options_.partitions.partitions()),
      tag_base_(options_.shuffle_id * TAGS_PER_SHUFFLE),
      gate_(store) {
    SPILLWAY_EXPECTS(num_partitions_ > 0, "shuffle: at least one partition", invalid_argument);
    SPILLWAY_EXPECTS_LT(options_.shuffle_id,
                        max_message_tag / TAGS_PER_SHUFFLE,
                        "shuffle: shuffle_id out of the tag range",
                        invalid_argument);
    SPILLWAY_EXPECTS(options_.max_fetch_attempts > 0,
                     "shuffle: max_fetch_attempts must be at least 1",
                     invalid_argument);
    if (!options_.checkpoint_directory.empty()) {
      checkpoint_.emplace(options_.checkpoint_directory, fingerprint(), options_.host);
    }
    outstanding_.assign(static_cast<std::size_t>(comm_.size()), 0);
    service_ = std::thread([this] { service_loop(); });
    if (mode_ == shuffle_mode::PUSH) {
      inbox_thread_  = std::thread([this] { inbox_loop(); });
      sender_thread_ = std::thread([this] { sender_loop(); });
    }
  }

  ~shuffle_engine() { stop_threads(); }
  shuffle_engine(shuffle_engine const&)            = delete;
  shuffle_engine& operator=(shuffle_engine const&) = delete;
  shuffle_engine(shuffle_engine&&)                 = delete;
  shuffle_engine& operator=(shuffle_engine&&)      = delete;

  std::size_t add_map(map_input input, std::string const& identity = {}) {
    return add_map(
      map_view_input{[input = std::move(input)](stream_view stream, memory_resources mrs) {
        std::shared_ptr<table const> rows = input(stream, mrs);
        SPILLWAY_EXPECTS(
          rows != nullptr, "shuffle: a map input returned no table", invalid_argument);
        map_rows lent{rows->view(), nullptr};
        lent.keep_alive = std::move(rows);
        return lent;
      }},
      identity);
  }

  std::size_t add_map(map_view_input input, std::string const& identity = {}) {
    auto const start = clock_type::now();
    {
      scoped_lock lock(mutex_);
      SPILLWAY_EXPECTS(!maps_finished_, "shuffle: add_map after finish_maps", logic_error);
    }
    // Every shard goes into the store as soon as it is packed, so that it can spill while the
    // next one is made; a rolled-back attempt drops them all and starts again.
    struct made_shard {
      std::size_t partition = 0;
      std::size_t rows      = 0;
      std::size_t bytes     = 0;
      spillable_buffer handle;
    };
    std::vector<made_shard> made;
    std::vector<data_type> schema;
    bool const persisted = checkpoint_.has_value() && !identity.empty();
    bool const resumed = persisted && gate_.run([&] { return resume_map(identity, made, schema); });
    if (!resumed) {
      gate_.run([&] {
        made.clear();
        auto parts = partition_input(input, &schema);
        for (std::size_t partition = 0; partition < parts.size(); ++partition) {
          std::size_t const rows = parts[partition].num_rows;
          if (rows == 0) {
            continue;
          }
          buffer frame           = finish_shard_frame(std::move(parts[partition]), stream_);
          std::size_t const size = frame.size();
          made.push_back({partition,
                          rows,
                          size,
                          store_.make_spillable(std::move(frame), options_.shard_priority)});
        }
      });
    }
    // Registered once its shards are made: a map task that failed (out of memory, to be split by
    // its caller) leaves no trace.
    std::size_t map = 0;
    {
      scoped_lock lock(mutex_);
      map = maps_.size();
      maps_.push_back(input);
      map_sizes_.emplace_back(num_partitions_, std::pair<std::size_t, std::size_t>{0, 0});
    }
    if (!resumed && persisted) {
      persist_map(identity, made);
    }
    if (resumed) {
      resumed_maps_.fetch_add(1, std::memory_order_relaxed);
    }
    if (!(resumed && made.empty())) {  // a resumed map without rows does not know its columns
      scoped_lock lock(mutex_);
      if (!schema_) {
        schema_ = schema;
      }
      SPILLWAY_EXPECTS(*schema_ == schema,
                       "shuffle: map task " + std::to_string(map) +
                         " has other column types than the first map task of rank " +
                         std::to_string(comm_.rank()),
                       invalid_argument);
    }
    for (auto& shard : made) {
      std::size_t const partition = shard.partition;
      std::size_t const size      = shard.bytes;
      shard_key const key{comm_.rank(), map, partition};
      shards_written_.fetch_add(1, std::memory_order_relaxed);
      bytes_written_.fetch_add(size, std::memory_order_relaxed);
      emit(event_kind::SHARD_STORED, key, size);
      bool const dropped = lose(shard_loss_point::AFTER_MAP, key);
      scoped_lock lock(mutex_);
      map_sizes_[map][partition] = {shard.rows, size};
      if (!dropped) {
        local_shards_.emplace(std::pair{map, partition},
                              stored_shard{std::move(shard.handle), true});
      }
      if (mode_ == shuffle_mode::PUSH && partition_owner(partition, comm_.size()) != comm_.rank()) {
        send_queue_.push_back(std::pair{map, partition});
        queue_changed_.notify_all();
      }
    }
    if (!resumed) {
      map_tasks_.fetch_add(1, std::memory_order_relaxed);
    }
    map_time_.fetch_add((clock_type::now() - start).count(), std::memory_order_relaxed);
    return map;
  }

  std::size_t add_map(table_view const& batch) {
    try {
      return add_lineage_map(batch);
    } catch (out_of_memory const&) {
      // Alone on the device with everything else spilled, the map still did not fit: its rows
      // are partitioned in two halves, each a map task of its own.
      if (batch.num_rows() < 2) {
        throw;
      }
      std::size_t const half = batch.num_rows() / 2;
      static_cast<void>(add_map(slice(batch, 0, half)));
      return add_map(slice(batch, half, batch.num_rows()));
    }
  }

  /// `add_map(batch)` without the split: the batch's rows as one map task.
  std::size_t add_lineage_map(table_view const& batch) {
    // The lineage is kept packed, as one buffer: it spills without packing on a full device.
    struct lineage {
      mutex guard;
      spillable_buffer frame SPILLWAY_GUARDED_BY(guard);
    };
    auto kept   = std::make_shared<lineage>();
    buffer copy = gate_.run([&] { return make_shard_frame(batch, stream_, mrs_); });
    {
      scoped_lock lock(kept->guard);
      kept->frame = store_.make_spillable(std::move(copy), options_.shard_priority);
    }
    memory_kind const kind = mrs_.output().kind();
    // The map partitions the lineage frame in place, pinned (and locked) while it does.
    struct lent_frame {
      // The lock is taken before the frame is read (the analysis does not follow members).
      explicit lent_frame(std::shared_ptr<lineage> kept_frame)
        SPILLWAY_THREAD_ANNOTATION(no_thread_safety_analysis)
        : owner(std::move(kept_frame)), lock(owner->guard), pinned(owner->frame.acquire()) {}
      std::shared_ptr<lineage> owner;
      scoped_lock lock;
      pinned_buffer pinned;
    };
    return add_map(map_view_input{[kept, kind](stream_view stream, memory_resources) {
      auto lent = std::make_shared<lent_frame>(kept);
      std::vector<std::uint8_t> metadata;
      table_view const rows =
        view_shard_frame(lent->pinned.data(), lent->pinned.size(), kind, stream, metadata);
      return map_rows{rows, std::move(lent)};
    }});
  }

  void finish_maps() {
    {
      scoped_lock lock(mutex_);
      SPILLWAY_EXPECTS(!maps_finished_, "shuffle: finish_maps called twice", logic_error);
      maps_finished_ = true;
      queue_changed_.notify_all();
    }
    if (sender_thread_.joinable()) {
      sender_thread_.join();
    }
    std::vector<std::byte> mine;
    {
      scoped_lock lock(mutex_);
      if (sender_error_) {
        std::rethrow_exception(sender_error_);
      }
      // The column types of this rank's maps, then its shard sizes.
      append(mine, schema_ ? schema_->size() : NO_SCHEMA);
      for (data_type const type : schema_.value_or(std::vector<data_type>{})) {
        append(mine, encode_type(type));
      }
      auto const sizes = shard_directory::encode(map_sizes_);
      mine.insert(mine.end(), sizes.begin(), sizes.end());
    }
    auto published = comm_.allgather(mine);
    std::optional<std::vector<data_type>> schema;
    for (std::size_t rank = 0; rank < published.size(); ++rank) {
      auto const theirs = take_schema(published[rank]);
      if (!theirs) {
        continue;
      }
      if (!schema) {
        schema = theirs;
      }
      SPILLWAY_EXPECTS(*schema == *theirs,
                       "shuffle: rank " + std::to_string(rank) +
                         " ran map inputs with other column types than the ranks before it",
                       invalid_argument);
    }
    {
      scoped_lock lock(mutex_);
      schema_ = schema;
    }
    directory_ = shard_directory(published, num_partitions_);
    directory_ready_.store(true, std::memory_order_release);
  }

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
  void read_each_shard(std::size_t partition, Read const& read) {
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

  void for_each_batch(std::size_t partition,
                      std::function<void(table_view const&)> const& consume) {
    read_each_shard(partition, [&](shard_location const&, spillable_buffer&, auto& pinned, auto&) {
      consume(pinned.second);
    });
  }

  void take_each_batch(std::size_t partition,
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

  std::unique_ptr<table> read_partition(std::size_t partition) {
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

  void close() {
    comm_.barrier();
    stop_threads();
  }

  shuffle_statistics statistics() const {
    shuffle_statistics result;
    result.map_tasks                 = map_tasks_.load();
    result.resumed_maps              = resumed_maps_.load();
    result.checkpoint_errors         = checkpoint_errors_.load();
    result.shards_written            = shards_written_.load();
    result.bytes_written             = bytes_written_.load();
    result.shards_read               = shards_read_.load();
    result.rows_read                 = rows_read_.load();
    result.bytes_read                = bytes_read_.load();
    result.shards_taken_in_place     = shards_taken_in_place_.load();
    result.messages_sent             = messages_sent_.load();
    result.messages_received         = messages_received_.load();
    result.bytes_sent                = bytes_sent_.load();
    result.bytes_received            = bytes_received_.load();
    result.lost_shards               = lost_shards_.load();
    result.recomputed_maps           = recomputed_maps_.load();
    result.fetch_retries             = fetch_retries_.load();
    result.backpressure_waits        = backpressure_waits_.load();
    result.oom_retries               = gate_.retries();
    result.peak_unacknowledged_bytes = peak_unacknowledged_.load();
    result.peak_fetches_ahead        = peak_fetches_ahead_.load();
    result.map_time                  = std::chrono::nanoseconds(map_time_.load());
    result.read_time                 = std::chrono::nanoseconds(read_time_.load());
    return result;
  }

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
  };

  static void append(std::vector<std::byte>& out, std::uint64_t word) {
    std::size_t const at = out.size();
    out.resize(at + sizeof(word));
    std::memcpy(out.data() + at, &word, sizeof(word));
  }

  /// Removes the schema a rank published from the front of `published`; empty when it had none.
  static std::optional<std::vector<data_type>> take_schema(std::vector<std::byte>& published) {
    auto const word_at = [&](std::size_t index) {
      SPILLWAY_EXPECTS((index + 1) * sizeof(std::uint64_t) <= published.size(),
                       "shuffle: truncated schema",
                       corruption_error);
      std::uint64_t word = 0;
      std::memcpy(&word, published.data() + index * sizeof(word), sizeof(word));
      return word;
    };
    std::uint64_t const count = word_at(0);
    std::optional<std::vector<data_type>> schema;
    std::size_t words = 1;
    if (count != NO_SCHEMA) {
      SPILLWAY_EXPECTS(count < published.size(), "shuffle: malformed schema", corruption_error);
      schema.emplace();
      for (std::size_t index = 0; index < count; ++index) {
        schema->push_back(decode_type(word_at(1 + index)));
      }
      words += count;
    }
    published.erase(published.begin(),
                    published.begin() + static_cast<std::ptrdiff_t>(words * sizeof(std::uint64_t)));
    return schema;
  }

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
  [[nodiscard]] std::uint64_t fingerprint() const {
    partitioning const& how = options_.partitions;
    std::vector<std::uint64_t> words{
      static_cast<std::uint64_t>(how.method), num_partitions_, how.seed, how.key_columns.size()};
    words.insert(words.end(), how.key_columns.begin(), how.key_columns.end());
    for (auto const& ordering : how.orders) {
      words.push_back(static_cast<std::uint64_t>(ordering.direction) * 2 +
                      static_cast<std::uint64_t>(ordering.nulls));
    }
    if (how.method == partition_method::RANGE && how.splitters.num_rows() > 0) {
      auto const hashes =
        detail::hash_rows(how.splitters, 0, stream_, memory_resources{options_.host});
      std::vector<std::uint64_t> host(hashes->size());
      copy_bytes(host.data(),
                 memory_kind::HOST,
                 hashes->view().data<std::uint64_t>(),
                 options_.host.kind(),
                 host.size() * sizeof(std::uint64_t),
                 stream_);
      words.insert(words.end(), host.begin(), host.end());
    }
    return XXH3_64bits(words.data(), words.size() * sizeof(std::uint64_t));
  }

  /**
   * @brief Reads the shards of map task `identity` from the checkpoint into the store.
   * @return false when it has no (usable) checkpoint
   */
  template <typename MadeShard>
  bool resume_map(std::string const& identity,
                  std::vector<MadeShard>& made,
                  std::vector<data_type>& schema) {
    made.clear();
    auto loaded = checkpoint_->load(identity, stream_, mrs_.output());
    if (!loaded) {
      return false;
    }
    for (auto& shard : *loaded) {
      SPILLWAY_EXPECTS(shard.partition < num_partitions_,
                       "shuffle: checkpoint of " + identity + " names partition " +
                         std::to_string(shard.partition),
                       corruption_error);
      std::vector<std::uint8_t> metadata;
      table_view const rows = view_shard_frame(
        shard.frame.data(), shard.frame.size(), shard.frame.kind(), stream_, metadata);
      schema                 = schema_of(rows);
      std::size_t const size = shard.frame.size();
      made.push_back({shard.partition,
                      rows.num_rows(),
                      size,
                      store_.make_spillable(std::move(shard.frame), options_.shard_priority)});
    }
    return true;
  }

  /** @brief Writes the shards of map task `identity`; a failure is a warning, not an error. */
  template <typename MadeShard>
  void persist_map(std::string const& identity, std::vector<MadeShard> const& made) {
    std::vector<std::size_t> partitions;
    for (auto const& shard : made) {
      partitions.push_back(shard.partition);
    }
    try {
      gate_.run([&] {
        checkpoint_->save(identity, partitions, [&](std::size_t index, auto const& write) {
          auto const pinned = made[index].handle.acquire();
          write(pinned.data(), pinned.size(), mrs_.output().kind());
        });
      });
    } catch (io_error const& error) {
      checkpoint_errors_.fetch_add(1, std::memory_order_relaxed);
      log(log_level::WARN,
          std::string{"shuffle: map task "} + identity +
            " is not checkpointed (a rerun will run it again): " + error.what());
    }
  }

  /// Runs map task `input` and packs each of its partitions, in one pass, into a frame whose
  /// header is still to be written (`finish_shard_frame`).
  std::vector<packed_partition> partition_input(map_view_input const& input,
                                                std::vector<data_type>* schema = nullptr) {
    memory_resources const scratch{mrs_.temporary()};
    map_rows const rows   = input(stream_, scratch);
    table_view const view = rows.rows;
    if (schema != nullptr) {
      *schema = schema_of(view);
    }
    // The frames from the output resource, the partition ids from the temporary one.
    memory_resources const frames{mrs_.output(), mrs_.temporary()};
    std::size_t const data_offset = shard_frame_data_offset(view.num_columns());
    partitioning const& how       = options_.partitions;
    if (how.method == partition_method::HASH) {
      return detail::hash_partition_and_pack(
        view, how.key_columns, how.num_partitions, how.seed, data_offset, stream_, frames);
    }
    return detail::range_partition_and_pack(
      view, how.key_columns, how.splitters, how.orders, data_offset, stream_, frames);
  }

  /// Reruns map task `map` of this rank and returns its shard of `partition`, packed.
  buffer recompute(std::size_t map, std::size_t partition) {
    map_view_input input;
    {
      scoped_lock lock(mutex_);
      SPILLWAY_EXPECTS_LT(map, maps_.size(), "shuffle: no such map task", invalid_argument);
      input = maps_[map];
    }
    buffer frame = gate_.run([&] {
      auto parts = partition_input(input);
      SPILLWAY_EXPECTS_LT(
        partition, parts.size(), "shuffle: no such partition to recompute", logic_error);
      return finish_shard_frame(std::move(parts[partition]), stream_);
    });
    recomputed_maps_.fetch_add(1, std::memory_order_relaxed);
    emit(event_kind::SHARD_RECOMPUTED, shard_key{comm_.rank(), map, partition}, frame.size());
    return frame;
  }

  /// Takes this rank's shard (map, partition) to hand it out; rebuilds it when it is gone.
  serving take_for_serving(std::size_t map, std::size_t partition) {
    std::optional<stored_shard> shard;
    {
      scoped_lock lock(mutex_);
      auto found = local_shards_.find(local_key{map, partition});
      if (found != local_shards_.end()) {
        shard.emplace(std::move(found->second));
        local_shards_.erase(found);
      }
    }
    shard_key const key{comm_.rank(), map, partition};
    if (!shard) {
      lost_shards_.fetch_add(1, std::memory_order_relaxed);  // released after a send, or dropped
    } else if (shard->first_copy && lose(shard_loss_point::BEFORE_SEND, key)) {
      shard.reset();
    }
    serving result;
    if (shard) {
      try {
        gate_.run([&] { result.pinned.emplace(shard->data.acquire()); });
        result.held = std::move(shard->data);
        return result;
      } catch (io_error const&) {  // corrupt or missing spill data: recompute below
        lost_shards_.fetch_add(1, std::memory_order_relaxed);
      }
    }
    result.rebuilt = recompute(map, partition);
    return result;
  }

  std::vector<shard_location> locations_to_read(std::size_t partition) const {
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

  /// The shard at `location`, in this rank's store; `attempt` > 0 skips the push inbox.
  spillable_buffer obtain(shard_location const& location, std::size_t attempt) {
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
      ++attempt;
    }
    SPILLWAY_FAIL("shuffle: shard (rank " + std::to_string(key.rank) + ", map " +
                    std::to_string(key.map) + ", partition " + std::to_string(key.partition) +
                    ") lost " + std::to_string(options_.max_fetch_attempts) + " times",
                  io_error);
  }

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
  class read_ahead {
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

  /// Asks `key.rank` for the shard without waiting. Replies from one rank come in the order of the
  /// requests (one service thread answers them in turn; messages do not overtake), so the
  /// receives posted here match them in order, as long as each is waited on (`collect`) or
  /// drained.
  pending_fetch ask(shard_location const& location) {
    shard_key const& key = location.key;
    pending_fetch asked{location, {FETCH, key.map, key.partition}, {}, {}};
    asked.reply = comm_.receive(key.rank, tag(REPLY_TAG), mrs_.output());
    asked.sent  = comm_.send(key.rank, tag(REQUEST_TAG), bytes_of(asked.request));
    return asked;
  }

  /// Waits for the reply to `asked`, into `fetched` when it arrived whole.
  fetch_outcome collect(pending_fetch& asked,
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
    SPILLWAY_EXPECTS(message.data.size() != FAILURE_REPLY_BYTES,
                     "shuffle: rank " + std::to_string(key.rank) +
                       " could not provide shard (map " + std::to_string(key.map) + ", partition " +
                       std::to_string(key.partition) + ")",
                     io_error);
    SPILLWAY_EXPECTS_EQ(message.data.size(),
                        asked.location.bytes,
                        "shuffle: the reply for shard (rank " + std::to_string(key.rank) +
                          ", map " + std::to_string(key.map) + ", partition " +
                          std::to_string(key.partition) +
                          ") is not of the directory's size: replies matched the wrong requests",
                        logic_error);
    std::size_t const size = message.data.size();
    spillable_buffer handle =
      store_.make_spillable(std::move(message.data), options_.shard_priority);
    emit(event_kind::SHARD_RECEIVED, key, size);
    if (first_copy && lose(shard_loss_point::AFTER_RECEIVE, key)) {
      return fetch_outcome::LOST;
    }
    fetched.emplace(std::move(handle));
    return fetch_outcome::RECEIVED;
  }

  /// Asks `key.rank` for the shard, into `fetched` when it arrives.
  fetch_outcome fetch(shard_location const& location,
                      bool first_copy,
                      std::optional<spillable_buffer>& fetched) {
    pending_fetch asked = ask(location);
    return collect(asked, first_copy, fetched);
  }

  /// Pins `handle` and views its table; a corrupt copy is fetched (or rebuilt) again.
  std::pair<pinned_buffer, table_view> pin(shard_location const& location,
                                           spillable_buffer& handle,
                                           std::vector<std::uint8_t>& metadata,
                                           read_ahead* ahead = nullptr) {
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
  void service_loop() {
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

  /// PUSH: stores arriving shards and returns credits until this rank sends itself STOP.
  void inbox_loop() {
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

  /// PUSH: sends queued shards to their owners within the credit limit, until maps finish.
  void sender_loop() {
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

  /// Stops the sender (if running) and sends STOP to this rank's service and inbox threads.
  void stop_threads() noexcept {
    {
      scoped_lock lock(mutex_);
      stopping_ = true;
      queue_changed_.notify_all();
    }
    if (sender_thread_.joinable()) {
      sender_thread_.join();
    }
    std::vector<std::uint64_t> const stop{STOP, 0, 0, 0};
    auto const stop_thread = [&](std::thread& thread, tag_offset offset, std::size_t words) {
      if (!thread.joinable()) {
        return;
      }
      try {
        comm_.send(comm_.rank(), tag(offset), bytes_of(stop).first(words * sizeof(std::uint64_t)))
          .get();
      } catch (communication_error const&) {
        // The group failed: the thread's own receive fails too, and it returns.
      }
      thread.join();
    };
    stop_thread(service_, REQUEST_TAG, 3);
    stop_thread(inbox_thread_, PUSH_HEADER_TAG, 4);
  }

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
  std::vector<map_view_input> maps_ SPILLWAY_GUARDED_BY(mutex_);
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

}  // namespace detail

shuffler::shuffler(shuffle_mode mode,
                   communicator& comm,
                   spill_store& store,
                   shuffle_options options,
                   stream_view stream,
                   memory_resources mrs)
  : impl_(std::make_unique<detail::shuffle_engine>(
      mode, comm, store, std::move(options), stream, mrs)) {}

shuffler::~shuffler() = default;

std::size_t shuffler::add_map(map_input input) { return impl_->add_map(std::move(input)); }
std::size_t shuffler::add_map(table_view const& batch) { return impl_->add_map(batch); }
std::size_t shuffler::add_map(map_input input, std::string const& identity) {
  return impl_->add_map(std::move(input), identity);
}
std::size_t shuffler::add_map(map_view_input input) { return impl_->add_map(std::move(input)); }
std::size_t shuffler::add_map(map_view_input input, std::string const& identity) {
  return impl_->add_map(std::move(input), identity);
}
void shuffler::finish_maps() { impl_->finish_maps(); }
shard_directory const& shuffler::directory() const { return impl_->directory(); }
std::vector<std::size_t> shuffler::owned_partitions() const { return impl_->owned_partitions(); }
void shuffler::for_each_batch(std::size_t partition,
                              std::function<void(table_view const&)> const& consume) {
  impl_->for_each_batch(partition, consume);
}
void shuffler::take_each_batch(std::size_t partition,
                               std::function<void(std::unique_ptr<table>)> const& consume) {
  impl_->take_each_batch(partition, consume);
}
std::unique_ptr<table> shuffler::read_partition(std::size_t partition) {
  return impl_->read_partition(partition);
}
void shuffler::close() { impl_->close(); }
shuffle_statistics shuffler::statistics() const { return impl_->statistics(); }
std::size_t shuffler::num_partitions() const noexcept { return impl_->num_partitions(); }
shuffle_mode shuffler::mode() const noexcept { return impl_->mode(); }

}  // namespace spillway
