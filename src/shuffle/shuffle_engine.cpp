/**
 * @file shuffle_engine.cpp
 * @brief The shuffle's map side: map tasks, lineage, checkpoints, recompute, directory.
 */
#include "shuffle/map_checkpoint.hpp"
#include "shuffle/shard_frame.hpp"
#include "shuffle/shuffle_engine.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/copy.hpp>

#include <xxhash.h>

#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>

namespace spillway {
namespace detail {
namespace {

/// The first word of a rank's published schema when it ran no map task.
constexpr std::uint64_t NO_SCHEMA = std::numeric_limits<std::uint64_t>::max();

/// A column type as one word: the type id, the time unit above it, then a decimal's precision
/// (bits 16-23) and scale (bits 32-63, two's complement).
std::uint64_t encode_type(data_type type) {
  std::uint64_t word =
    static_cast<std::uint64_t>(type.id()) | (static_cast<std::uint64_t>(type.unit()) << 8U);
  if (is_decimal(type.id())) {
    word |= static_cast<std::uint64_t>(type.precision()) << 16U;
    word |= static_cast<std::uint64_t>(static_cast<std::uint32_t>(type.scale())) << 32U;
  }
  return word;
}

data_type decode_type(std::uint64_t word) {
  auto const id        = word & 0xFFU;
  auto const unit      = (word >> 8U) & 0xFFU;
  auto const precision = (word >> 16U) & 0xFFFFU;  // bits 24-31 are zero
  auto const scale     = static_cast<std::int32_t>(static_cast<std::uint32_t>(word >> 32U));
  bool const decimal   = id < TYPE_ID_COUNT && is_decimal(static_cast<type_id>(id));
  SPILLWAY_EXPECTS(
    id < TYPE_ID_COUNT && unit <= static_cast<std::uint64_t>(time_unit::NANOSECOND) &&
      (decimal
         ? precision <= 0xFFU && is_valid_decimal(data_type{
                                   static_cast<type_id>(id), static_cast<int>(precision), scale})
         : (word >> 16U) == 0),
    "shuffle: malformed schema word " + std::to_string(word),
    corruption_error);
  if (decimal) {
    return data_type{static_cast<type_id>(id), static_cast<int>(precision), scale};
  }
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

/// `input` as a map task that lends the rows it returns (kept alive while they are read).
map_view_input lending(map_input input) {
  return [input = std::move(input)](stream_view stream, memory_resources mrs) {
    std::shared_ptr<table const> rows = input(stream, mrs);
    SPILLWAY_EXPECTS(rows != nullptr, "shuffle: a map input returned no table", invalid_argument);
    map_rows lent{rows->view(), nullptr};
    lent.keep_alive = std::move(rows);
    return lent;
  };
}

}  // namespace

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

shuffle_engine::shuffle_engine(shuffle_mode mode,
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

std::size_t shuffle_engine::add_map(map_input input, std::string const& identity) {
  return add_map(lending(std::move(input)), identity);
}

std::size_t shuffle_engine::add_map(map_view_input input, std::string const& identity) {
  return run_map(std::move(input), identity, std::nullopt);
}

std::size_t shuffle_engine::reserve_map() {
  scoped_lock lock(mutex_);
  SPILLWAY_EXPECTS(!maps_finished_, "shuffle: reserve_map after finish_maps", logic_error);
  maps_.emplace_back();
  map_sizes_.emplace_back(num_partitions_, std::pair<std::size_t, std::size_t>{0, 0});
  ++reserved_maps_;
  return maps_.size() - 1;
}

std::size_t shuffle_engine::add_reserved_map(std::size_t reserved,
                                             map_input input,
                                             std::string const& identity) {
  SPILLWAY_EXPECTS(input != nullptr, "shuffle: a map task needs an input", invalid_argument);
  return run_map(lending(std::move(input)), identity, reserved);
}

std::size_t shuffle_engine::run_map(map_view_input input,
                                    std::string const& identity,
                                    std::optional<std::size_t> reserved) {
  auto const start = clock_type::now();
  {
    scoped_lock lock(mutex_);
    SPILLWAY_EXPECTS(!maps_finished_, "shuffle: add_map after finish_maps", logic_error);
    SPILLWAY_EXPECTS(!reserved || (*reserved < maps_.size() && !maps_[*reserved]),
                     "shuffle: map " + std::to_string(reserved.value_or(0)) +
                       " was not reserved, or was added already",
                     logic_error);
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
  bool const resumed   = persisted && gate_.run([&] { return resume_map(identity, made, schema); });
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
    if (reserved) {
      SPILLWAY_EXPECTS(!maps_[*reserved],
                       "shuffle: map " + std::to_string(*reserved) + " was added twice",
                       logic_error);
      map        = *reserved;
      maps_[map] = input;
      --reserved_maps_;
    } else {
      map = maps_.size();
      maps_.push_back(input);
      map_sizes_.emplace_back(num_partitions_, std::pair<std::size_t, std::size_t>{0, 0});
    }
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
      local_shards_.emplace(std::pair{map, partition}, stored_shard{std::move(shard.handle), true});
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

std::size_t shuffle_engine::add_map(table_view const& batch) {
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

std::size_t shuffle_engine::add_lineage_map(table_view const& batch) {
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

void shuffle_engine::finish_maps() {
  {
    scoped_lock lock(mutex_);
    SPILLWAY_EXPECTS(!maps_finished_, "shuffle: finish_maps called twice", logic_error);
    SPILLWAY_EXPECTS(
      reserved_maps_ == 0,
      "shuffle: " + std::to_string(reserved_maps_) + " reserved map task(s) were never added",
      logic_error);
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

shuffle_statistics shuffle_engine::statistics() const {
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
  result.oom_retries_by_task       = gate_.retries_by_task();
  result.peak_unacknowledged_bytes = peak_unacknowledged_.load();
  result.peak_fetches_ahead        = peak_fetches_ahead_.load();
  result.map_time                  = std::chrono::nanoseconds(map_time_.load());
  result.read_time                 = std::chrono::nanoseconds(read_time_.load());
  return result;
}

std::optional<std::vector<data_type>> shuffle_engine::take_schema(
  std::vector<std::byte>& published) {
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

std::uint64_t shuffle_engine::fingerprint() const {
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

template <typename MadeShard>
bool shuffle_engine::resume_map(std::string const& identity,
                                std::vector<MadeShard>& made,
                                std::vector<data_type>& schema) {
  made.clear();
  auto loaded = checkpoint_->load(identity, stream_, mrs_.output());
  if (!loaded) {
    return false;
  }
  for (auto& shard : *loaded) {
    SPILLWAY_EXPECTS(
      shard.partition < num_partitions_,
      "shuffle: checkpoint of " + identity + " names partition " + std::to_string(shard.partition),
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

template <typename MadeShard>
void shuffle_engine::persist_map(std::string const& identity, std::vector<MadeShard> const& made) {
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

std::vector<packed_partition> shuffle_engine::partition_input(map_view_input const& input,
                                                              std::vector<data_type>* schema) {
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

buffer shuffle_engine::recompute(std::size_t map, std::size_t partition) {
  map_view_input input;
  {
    scoped_lock lock(mutex_);
    SPILLWAY_EXPECTS_LT(map, maps_.size(), "shuffle: no such map task", invalid_argument);
    input = maps_[map];
  }
  SPILLWAY_EXPECTS(
    input != nullptr, "shuffle: map task " + std::to_string(map) + " was not added", logic_error);
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

shuffle_engine::serving shuffle_engine::take_for_serving(std::size_t map, std::size_t partition) {
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
    } catch (out_of_memory const&) {
      // The device is held by what this rank's own readers pinned: the shard stays, to be asked
      // for again once they let go.
      shard->first_copy = false;
      scoped_lock lock(mutex_);
      local_shards_.emplace(local_key{map, partition}, std::move(*shard));
      throw;
    }
  }
  result.rebuilt = recompute(map, partition);
  return result;
}

void shuffle_engine::stop_threads() noexcept {
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

}  // namespace detail
}  // namespace spillway
