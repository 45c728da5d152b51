#include "spill/spill_store_impl.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <span>
#include <string>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace detail {
namespace {

using clock_type = std::chrono::steady_clock;

/// The smallest host budget: room for the I/O scratch areas and a useful general part.
constexpr std::size_t MIN_HOST_BUDGET = 64_KiB;
/// Staging pieces are multiples of this.
constexpr std::size_t PIECE_ALIGNMENT = 64;
/// The most disk blocks written raw, untried, after one that the codec did not shrink enough:
/// data that does not compress is still tried once every 64 blocks (256 MiB of 4 MiB blocks).

std::span<std::byte const> bytes_of(buffer const& data, std::size_t size) noexcept {
  return {static_cast<std::byte const*>(data.data()), size};
}

std::span<std::byte> bytes_of(buffer& data) noexcept {
  return {static_cast<std::byte*>(data.data()), data.size()};
}

std::byte const* at(void const* data, std::size_t offset) noexcept {
  return static_cast<std::byte const*>(data) + offset;
}

std::byte* at(void* data, std::size_t offset) noexcept {
  return static_cast<std::byte*>(data) + offset;
}

std::chrono::nanoseconds since(clock_type::time_point start) {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(clock_type::now() - start);
}

std::string directory_for(std::string root) {
  static std::atomic<std::size_t> stores_made{0};
  std::size_t const sequence = stores_made.fetch_add(1);
  if (root.empty()) {
    root = default_spill_root();
  }
  std::string path = root + "/spillway-" + std::to_string(::getpid());
  if (sequence > 0) {
    path += "." + std::to_string(sequence);
  }
  return path;
}

std::size_t piece_size_for(spill_store_options const& options) {
  SPILLWAY_EXPECTS(
    options.io_threads > 0, "a spill store needs at least one I/O thread", invalid_argument);
  SPILLWAY_EXPECTS(
    options.staging_size > 0, "spill staging size must be positive", invalid_argument);
  SPILLWAY_EXPECTS(options.host_budget >= MIN_HOST_BUDGET,
                   "spill store host budget " + std::to_string(options.host_budget) +
                     " is below the minimum of " + std::to_string(MIN_HOST_BUDGET) + " bytes",
                   invalid_argument);
  std::size_t const piece =
    std::min(options.staging_size, options.host_budget / (4 * (options.io_threads + 1)));
  return std::max(PIECE_ALIGNMENT, piece / PIECE_ALIGNMENT * PIECE_ALIGNMENT);
}

/// Host bytes needed to hold `raw` bytes encoded piece by piece with `value`.
std::size_t encoded_bound(codec value, std::size_t raw, std::size_t piece) {
  std::size_t const full = raw / piece;
  std::size_t const rest = raw % piece;
  return full * compress_bound(value, piece) + (rest > 0 ? compress_bound(value, rest) : 0);
}

/// Host staging buffers for `raw` bytes moved in pieces of `piece`: two when there is more than
/// one piece, so that one is filled or emptied on the CPU while the other's copy is in flight.
std::size_t staging_windows(std::size_t raw, std::size_t piece) noexcept {
  return raw > piece ? 2 : 1;
}

/// Waits for a stream when it goes, once a copy was queued on it: staging buffers declared
/// before it are no longer copied from or into when they are freed, even when an exception leaves
/// early. Copies that were complete at once (the CPU backend, emulated device memory) leave the
/// stream alone.
class stream_drain {
 public:
  explicit stream_drain(stream_view stream) noexcept : stream_(stream) {}
  ~stream_drain() {
    if (!queued_) {
      return;
    }
    try {
      stream_.synchronize();
    } catch (...) {  // NOLINT(bugprone-empty-catch): a failed stream has nothing left to wait for
    }
  }
  /** @brief Notes whether a copy was queued on the stream; @return `was_queued` */
  bool queued(bool was_queued) noexcept {
    queued_ = queued_ || was_queued;
    return was_queued;
  }
  /** @brief Waits for the stream now when a copy was queued, reporting its failure. */
  void wait() const {
    if (queued_) {
      stream_.synchronize();
    }
  }
  stream_drain(stream_drain const&)            = delete;
  stream_drain& operator=(stream_drain const&) = delete;
  stream_drain(stream_drain&&)                 = delete;
  stream_drain& operator=(stream_drain&&)      = delete;

 private:
  stream_view stream_;
  bool queued_ = false;
};

/**
 * @brief Hands `consume(bytes, size)` the `raw` bytes of device memory at `source` a piece at a
 * time, each in one of the host `windows` (one, or two of `piece` bytes each): while `consume`
 * works on a piece, the copy of the next one into the other window is in flight.
 */
template <typename Consume>
void stream_from_device(void const* source,
                        std::size_t raw,
                        std::size_t piece,
                        std::span<buffer> windows,
                        stream_view stream,
                        Consume&& consume) {
  std::array<stream_fence, 2> fences;
  stream_drain drain(stream);
  auto const issue = [&](std::size_t offset, std::size_t slot) {
    if (drain.queued(copy_bytes_async(windows[slot].data(),
                                      windows[slot].kind(),
                                      at(source, offset),
                                      memory_kind::DEVICE,
                                      std::min(piece, raw - offset),
                                      stream))) {
      fences[slot].record(stream);
    }
  };
  if (raw > 0) {
    issue(0, 0);
  }
  for (std::size_t offset = 0, slot = 0; offset < raw; offset += piece) {
    fences[slot].wait();
    std::size_t const next  = offset + piece;
    std::size_t const other = (slot + 1) % windows.size();
    bool const ahead        = next < raw && other != slot;
    if (ahead) {
      issue(next, other);
    }
    consume(static_cast<std::byte const*>(windows[slot].data()), std::min(piece, raw - offset));
    if (next < raw && !ahead) {
      issue(next, slot);
    }
    slot = other;
  }
}

/// Host bytes of one piece on their way to the device.
struct host_bytes {
  void const* data = nullptr;
  memory_kind kind = memory_kind::HOST;
  std::size_t size = 0;
};

/**
 * @brief Copies `count` pieces into consecutive device memory at `destination`, up to two copies
 * in flight: `produce(index, slot)` returns piece `index`'s host bytes, held in memory of its
 * own for `slot` (0 or 1) until it is asked for that slot again, when the copy from it is
 * complete. Returns when every copy is.
 */
template <typename Produce>
void stream_to_device(void* destination, std::size_t count, stream_view stream, Produce&& produce) {
  std::array<stream_fence, 2> fences;
  stream_drain drain(stream);
  std::size_t offset = 0;
  for (std::size_t index = 0; index < count; ++index) {
    std::size_t const slot = index % 2;
    fences[slot].wait();
    host_bytes const piece = produce(index, slot);
    if (drain.queued(copy_bytes_async(at(destination, offset),
                                      memory_kind::DEVICE,
                                      piece.data,
                                      piece.kind,
                                      piece.size,
                                      stream))) {
      fences[slot].record(stream);
    }
    offset += piece.size;
  }
  drain.wait();
}

/// Releases a general host reservation when it goes (after the buffers declared after it).
class reservation_guard {
 public:
  reservation_guard(std::function<void(std::size_t)> release, std::size_t bytes)
    : release_(std::move(release)), bytes_(bytes) {}
  ~reservation_guard() {
    if (bytes_ > 0) {
      release_(bytes_);
    }
  }
  reservation_guard(reservation_guard const&)            = delete;
  reservation_guard& operator=(reservation_guard const&) = delete;
  reservation_guard(reservation_guard&&)                 = delete;
  reservation_guard& operator=(reservation_guard&&)      = delete;

 private:
  std::function<void(std::size_t)> release_;
  std::size_t bytes_;
};

}  // namespace

spill_store_impl::spill_store_impl(spill_store_options options)
  : options_(std::move(options)),
    files_(options_.files != nullptr ? *options_.files : default_file_system()),
    directory_(directory_for(options_.spill_root)),
    directory_slot_(register_spill_directory(directory_)),
    piece_size_(piece_size_for(options_)),
    io_scratch_(piece_size_ + std::max(compress_bound(options_.host_codec, piece_size_),
                                       compress_bound(options_.disk_codec, piece_size_))),
    codec_advisor_(options_.min_compression_ratio, options_.compress_only_when_faster),
    general_limit_(options_.host_budget - options_.io_threads * io_scratch_),
    high_water_(general_limit_ / 4 * 3),
    low_water_(general_limit_ / 2),
    io_(options_.io_threads) {
  SPILLWAY_EXPECTS(
    options_.file_target_size > 0, "spill file target size must be positive", invalid_argument);
  SPILLWAY_EXPECTS(options_.min_compression_ratio >= 1.0,
                   "spill min_compression_ratio must be at least 1, is " +
                     std::to_string(options_.min_compression_ratio),
                   invalid_argument);
  std::string const root  = directory_.substr(0, directory_.rfind('/'));
  std::size_t const stale = remove_stale_spill_directories(root, files_);
  if (stale > 0) {
    log(log_level::INFO,
        "spill store removed " + std::to_string(stale) +
          " spill directories of dead processes under " + root);
  }
  // Ours may exist only if a dead process had our pid: nothing in it is ours.
  files_.remove_all(directory_);
}

spill_store_impl::~spill_store_impl() {
  io_.drain();
  garbage trash;
  {
    scoped_lock lock(mutex_);
    for (auto& [id, entry] : entries_) {
      trash.push_back(std::move(entry));
    }
    entries_.clear();
    files_state_.clear();
  }
  trash.clear();
  files_.remove_all(directory_);
  unregister_spill_directory(directory_slot_);
}

spill_entry& spill_store_impl::find(std::uint64_t id) {
  auto const it = entries_.find(id);
  SPILLWAY_EXPECTS(it != entries_.end(), "unknown spill buffer " + std::to_string(id), logic_error);
  return *it->second;
}

std::uint64_t spill_store_impl::insert(std::unique_ptr<spill_entry> entry) {
  entry->id       = next_id_++;
  entry->last_use = ++clock_;
  auto const id   = entry->id;
  bytes_on_[index_of(entry->tier)] +=
    entry->tier == spill_tier::DEVICE ? entry->device_bytes : entry->host_bytes;
  by_tier_[index_of(entry->tier)].insert(entry.get());
  entries_.emplace(id, std::move(entry));
  return id;
}

void spill_store_impl::set_tier(spill_entry& entry, spill_tier tier) {
  by_tier_[index_of(entry.tier)].erase(&entry);
  entry.tier = tier;
  by_tier_[index_of(tier)].insert(&entry);
}

void spill_store_impl::touch(spill_entry& entry) {
  auto& tier = by_tier_[index_of(entry.tier)];
  tier.erase(&entry);
  entry.last_use = ++clock_;
  tier.insert(&entry);
}

// ---- host budget ---------------------------------------------------------------------------

bool spill_store_impl::reserve_host(scoped_lock& lock, std::size_t bytes, bool wait) {
  if (bytes > general_limit_) {
    return false;
  }
  std::size_t const failures = statistics_.write_errors;
  while (host_used_ + bytes > general_limit_) {
    std::size_t const short_by = host_used_ + bytes - general_limit_;
    if (host_writing_ < short_by) {
      schedule_evictions(short_by - host_writing_);
    }
    // Room comes only from writes (which never wait for room) and from holders that release
    // without waiting; with neither, waiting could last forever.
    if (!wait || (host_writing_ == 0 && host_in_flight_ == 0) ||
        statistics_.write_errors != failures) {
      return false;
    }
    std::uint64_t const seen = room_epoch_;
    lock.wait(room_, [&]() SPILLWAY_REQUIRES(mutex_) { return room_epoch_ != seen; });
  }
  host_used_ += bytes;
  host_in_flight_ += bytes;
  return true;
}

void spill_store_impl::release_host(std::size_t bytes, bool in_flight) {
  host_used_ -= bytes;
  if (in_flight) {
    host_in_flight_ -= bytes;
  }
  ++room_epoch_;
  room_.notify_all();
}

void spill_store_impl::release_host_now(std::size_t bytes) {
  scoped_lock lock(mutex_);
  release_host(bytes, true);
}

void spill_store_impl::schedule_evictions(std::size_t bytes) {
  for (auto* entry : select_victims(spill_tier::HOST, bytes, std::nullopt)) {
    schedule_write(*entry);
  }
}

void spill_store_impl::keep_headroom() {
  if (host_used_ > high_water_ && host_used_ - host_writing_ > low_water_) {
    schedule_evictions(host_used_ - host_writing_ - low_water_);
  }
}

void spill_store_impl::free_host_pieces(spill_entry& entry) {
  // Freed under the lock, so the bytes are gone before anyone can reserve them again.
  entry.host_pieces.clear();
  bytes_on_[index_of(spill_tier::HOST)] -= entry.host_bytes;
  release_host(entry.host_bytes, false);
  entry.host_bytes = 0;
  entry.host_codec = codec::NONE;
}

void spill_store_impl::emit(event_kind kind,
                            spill_entry const& entry,
                            spill_tier from,
                            spill_tier to,
                            std::chrono::nanoseconds time) const {
  if (options_.events == nullptr) {
    return;
  }
  event happened{};
  happened.time     = clock_type::now();
  happened.kind     = kind;
  happened.task     = entry.owner;
  happened.bytes    = entry.raw_size;
  happened.value    = static_cast<std::int64_t>(index_of(from) * 4 + index_of(to));
  happened.duration = time;
  record_event(options_.events, happened);
}

// ---- registration --------------------------------------------------------------------------

spillable_table spill_store_impl::add_table(std::unique_ptr<table> data,
                                            int priority,
                                            task_id owner) {
  SPILLWAY_EXPECTS(data != nullptr, "make_spillable needs a table", invalid_argument);
  auto entry             = std::make_unique<spill_entry>();
  entry->priority        = priority;
  entry->owner           = owner;
  entry->is_table        = true;
  entry->num_rows        = data->num_rows();
  entry->raw_size        = packed_size(data->view());
  entry->device_bytes    = data->allocated_bytes();
  entry->device_table    = std::move(data);
  std::size_t const rows = entry->num_rows;
  scoped_lock lock(mutex_);
  return spillable_table{this, insert(std::move(entry)), rows};
}

spillable_table spill_store_impl::add_table_slice(table_view const& slice,
                                                  int priority,
                                                  task_id owner) {
  auto entry             = std::make_unique<spill_entry>();
  entry->priority        = priority;
  entry->owner           = owner;
  entry->is_table        = true;
  entry->num_rows        = slice.num_rows();
  entry->raw_size        = packed_size(slice);
  std::size_t const raw  = entry->raw_size;
  std::size_t const rows = entry->num_rows;
  bool on_host           = false;
  {
    scoped_lock lock(mutex_);
    on_host = reserve_host(lock, raw, true);
  }
  if (on_host) {
    packed_columns packed;
    try {
      packed = detail::pack(slice, options_.stream, options_.host);
    } catch (...) {
      release_host_now(raw);
      throw;
    }
    entry->metadata   = std::move(packed.metadata);
    entry->tier       = spill_tier::HOST;
    entry->host_bytes = packed.data.size();
    entry->host_pieces.push_back(host_piece{std::move(packed.data), raw});
    scoped_lock lock(mutex_);
    host_in_flight_ -= raw;  // now resident
    auto const id = insert(std::move(entry));
    keep_headroom();
    return spillable_table{this, id, rows};
  }
  // Larger than the host may hold: packed on the device, from where it spills like any other.
  auto packed         = detail::pack(slice, options_.stream, options_.device);
  entry->metadata     = std::move(packed.metadata);
  entry->device_bytes = packed.data.size();
  entry->device_data  = std::move(packed.data);
  scoped_lock lock(mutex_);
  return spillable_table{this, insert(std::move(entry)), rows};
}

spillable_buffer spill_store_impl::add_buffer(buffer data, int priority, task_id owner) {
  auto entry             = std::make_unique<spill_entry>();
  entry->priority        = priority;
  entry->owner           = owner;
  entry->raw_size        = data.size();
  entry->device_bytes    = data.size();
  entry->device_data     = std::move(data);
  std::size_t const size = entry->raw_size;
  scoped_lock lock(mutex_);
  return spillable_buffer{this, insert(std::move(entry)), size};
}

void spill_store_impl::add_transfer(spill_tier from,
                                    spill_tier to,
                                    std::size_t raw,
                                    std::size_t stored,
                                    std::chrono::nanoseconds time) {
  auto& moved = statistics_.transfers[index_of(from)][index_of(to)];
  ++moved.count;
  moved.raw_bytes += raw;
  moved.stored_bytes += stored;
  moved.time += time;
}

void spill_store_impl::record_error(std::string const& message, bool is_write, bool of_disk) {
  ++(is_write ? statistics_.write_errors : statistics_.read_errors);
  statistics_.last_error = message;
  if (of_disk) {
    statistics_.last_disk_error = message;
  }
  log(log_level::WARN, "spill store: " + message);
  ++room_epoch_;
  room_.notify_all();  // waiters for room give up after a failed write
}

// ---- acquire -------------------------------------------------------------------------------

acquired_data spill_store_impl::pin(spill_entry& entry) {
  ++entry.pins;
  touch(entry);
  acquired_data result;
  if (entry.device_table != nullptr) {
    result.view = entry.device_table->view();
  } else if (entry.is_table) {
    result.view = unpack(
      entry.metadata, entry.device_data.data(), entry.device_data.size(), memory_kind::DEVICE);
  } else {
    result.data = entry.device_data.data();
    result.size = entry.device_data.size();
  }
  return result;
}

acquired_data spill_store_impl::acquire(std::uint64_t id) {
  scoped_lock lock(mutex_);
  auto const busy = [&]() SPILLWAY_REQUIRES(mutex_) {
    auto const state = find(id).state;
    return state == entry_state::SPILLING || state == entry_state::UNSPILLING ||
           state == entry_state::WRITING || state == entry_state::STREAMING;
  };
  while (true) {
    auto& entry = find(id);
    switch (entry.state) {
      case entry_state::SPILLING:
      case entry_state::UNSPILLING:
      case entry_state::WRITING:
      case entry_state::STREAMING:
        lock.wait(changed_, [&]() SPILLWAY_REQUIRES(mutex_) { return !busy(); });
        continue;
      case entry_state::READING:
        lock.wait(changed_, [&]() SPILLWAY_REQUIRES(mutex_) {
          return find(id).state != entry_state::READING;
        });
        if (find(id).tier == spill_tier::DISK && find(id).read_error != nullptr) {
          auto error          = find(id).read_error;
          find(id).read_error = nullptr;
          std::rethrow_exception(error);
        }
        continue;
      case entry_state::WRITE_QUEUED:
        ++entry.write_ticket;  // the queued write sees a stale ticket and does nothing
        entry.state = entry_state::STABLE;
        host_writing_ -= entry.host_bytes;
        ++room_epoch_;
        room_.notify_all();
        continue;
      case entry_state::STABLE:
        break;
    }
    switch (entry.tier) {
      case spill_tier::DEVICE:
        return pin(entry);
      case spill_tier::HOST:
        unspill_to_device(entry, lock);
        continue;
      case spill_tier::DISK:
        entry.read_error = nullptr;
        // Through the host when it has room now; else block by block to the device.
        if (reserve_host(lock, entry.raw_size, false)) {
          schedule_read(entry);
        } else {
          stream_disk_to_device(entry, lock);
        }
        continue;
    }
  }
}

void spill_store_impl::unspill_to_device(spill_entry& entry, scoped_lock& lock) {
  entry.state                           = entry_state::UNSPILLING;
  std::vector<host_piece> const* pieces = &entry.host_pieces;  // stable while UNSPILLING
  std::size_t const raw                 = entry.raw_size;
  codec const host_codec                = entry.host_codec;
  lock.unlock();
  auto const start = clock_type::now();
  buffer device;
  try {
    // Allocating may spill other buffers through the device's failure callback: no lock held.
    device = buffer(raw, options_.stream, options_.device);
    std::size_t const windows =
      host_codec == codec::NONE ? 0 : std::min<std::size_t>(2, pieces->size());
    std::size_t const scratch = windows * piece_size_;
    if (scratch > 0) {
      scoped_lock relock(mutex_);
      if (!reserve_host(relock, scratch, true)) {
        throw out_of_memory("spill store: no host room within the budget of " +
                              std::to_string(options_.host_budget) +
                              " bytes to decode spill buffer " + std::to_string(entry.id),
                            scratch);
      }
    }
    reservation_guard guard([this](std::size_t bytes) { release_host_now(bytes); }, scratch);
    std::array<buffer, 2> decoded;
    for (std::size_t slot = 0; slot < windows; ++slot) {
      decoded[slot] = buffer(piece_size_, options_.stream, options_.host);
    }
    // Pieces stored raw are copied from where they are, two at a time.
    stream_to_device(
      device.data(), pieces->size(), options_.stream, [&](std::size_t index, std::size_t slot) {
        auto const& piece = (*pieces)[index];
        if (host_codec == codec::NONE) {
          return host_bytes{piece.data.data(), piece.data.kind(), piece.raw};
        }
        decompress(host_codec,
                   bytes_of(piece.data, piece.data.size()),
                   std::span<std::byte>(static_cast<std::byte*>(decoded[slot].data()), piece.raw));
        return host_bytes{decoded[slot].data(), decoded[slot].kind(), piece.raw};
      });
  } catch (...) {
    lock.lock();
    entry.state = entry_state::STABLE;
    changed_.notify_all();
    throw;
  }
  auto const elapsed = since(start);
  lock.lock();
  free_host_pieces(entry);
  entry.device_data  = std::move(device);
  entry.device_bytes = raw;
  bytes_on_[index_of(spill_tier::DEVICE)] += raw;
  set_tier(entry, spill_tier::DEVICE);
  entry.state = entry_state::STABLE;
  add_transfer(spill_tier::HOST, spill_tier::DEVICE, raw, raw, elapsed);
  emit(event_kind::UNSPILLED, entry, spill_tier::HOST, spill_tier::DEVICE, elapsed);
  changed_.notify_all();
}

void spill_store_impl::stream_disk_to_device(spill_entry& entry, scoped_lock& lock) {
  entry.state                          = entry_state::STREAMING;
  std::vector<disk_block> const blocks = entry.blocks;
  std::size_t const raw                = entry.raw_size;
  std::uint64_t const id               = entry.id;
  lock.unlock();
  auto const start = clock_type::now();
  buffer device;
  std::size_t stored = 0;
  try {
    device              = buffer(raw, options_.stream, options_.device);
    std::size_t largest = 0;
    bool compressed     = false;
    for (auto const& block : blocks) {
      largest = std::max<std::size_t>(largest, block.location.header.stored_size);
      compressed |= block.location.header.payload_codec != codec::NONE;
      stored += block.location.header.stored_size;
    }
    // Per slot (two when there are two blocks or more): a block as read, and its decoding.
    std::size_t const slots   = std::min<std::size_t>(2, blocks.size());
    std::size_t const scratch = slots * (largest + (compressed ? piece_size_ : 0));
    {
      scoped_lock relock(mutex_);
      if (!reserve_host(relock, scratch, true)) {
        throw out_of_memory("spill store: no host room within the budget of " +
                              std::to_string(options_.host_budget) +
                              " bytes to read spill buffer " + std::to_string(id),
                            scratch);
      }
    }
    reservation_guard guard([this](std::size_t bytes) { release_host_now(bytes); }, scratch);
    std::array<buffer, 2> decoded;
    std::array<buffer, 2> payloads;
    for (std::size_t slot = 0; compressed && slot < slots; ++slot) {
      decoded[slot] = buffer(piece_size_, options_.stream, options_.host);
    }
    // The next block is read and decoded while the last one's copy to the device is in flight.
    stream_to_device(
      device.data(), blocks.size(), options_.stream, [&](std::size_t index, std::size_t slot) {
        auto const& header    = blocks[index].location.header;
        auto const read_start = clock_type::now();
        payloads[slot]        = buffer{};
        payloads[slot]        = read_spill_block(files_, blocks[index].location, id, options_.host);
        codec_advisor_.read(header.stored_size, since(read_start));
        if (header.payload_codec == codec::NONE) {
          return host_bytes{payloads[slot].data(), payloads[slot].kind(), header.raw_size};
        }
        auto const decode_start = clock_type::now();
        decompress(
          header.payload_codec,
          bytes_of(payloads[slot], payloads[slot].size()),
          std::span<std::byte>(static_cast<std::byte*>(decoded[slot].data()), header.raw_size));
        codec_advisor_.decompressed(header.raw_size, since(decode_start));
        payloads[slot] = buffer{};
        return host_bytes{decoded[slot].data(), decoded[slot].kind(), header.raw_size};
      });
  } catch (out_of_memory const&) {
    lock.lock();
    entry.state = entry_state::STABLE;
    changed_.notify_all();
    throw;
  } catch (std::exception const& error) {
    lock.lock();
    entry.state = entry_state::STABLE;
    record_error(error.what(), false, true);
    emit(event_kind::SPILL_READ_FAILED, entry, spill_tier::DISK, spill_tier::DEVICE, since(start));
    changed_.notify_all();
    throw;
  }
  auto const elapsed = since(start);
  std::vector<std::string> dead_files;
  lock.lock();
  drop_blocks(entry.blocks, dead_files);
  entry.device_data  = std::move(device);
  entry.device_bytes = raw;
  bytes_on_[index_of(spill_tier::DEVICE)] += raw;
  set_tier(entry, spill_tier::DEVICE);
  add_transfer(spill_tier::DISK, spill_tier::DEVICE, raw, stored, elapsed);
  emit(event_kind::UNSPILLED, entry, spill_tier::DISK, spill_tier::DEVICE, elapsed);
  if (!dead_files.empty()) {
    // Remove an emptied file before this acquire returns (still STREAMING meanwhile).
    lock.unlock();
    remove_files(dead_files);
    lock.lock();
  }
  entry.state = entry_state::STABLE;
  changed_.notify_all();
}

void spill_store_impl::unpin(std::uint64_t id) noexcept {
  garbage trash;
  std::vector<std::string> dead_files;
  {
    scoped_lock lock(mutex_);
    auto const it = entries_.find(id);
    if (it == entries_.end()) {
      return;
    }
    auto& entry = *it->second;
    --entry.pins;
    touch(entry);
    if (entry.pins == 0 && entry.release_requested) {
      erase(entry, trash, dead_files);
    }
  }
  trash.clear();
  remove_files(dead_files);
}

void spill_store_impl::release(std::uint64_t id) noexcept {
  garbage trash;
  std::vector<std::string> dead_files;
  {
    scoped_lock lock(mutex_);
    auto const it = entries_.find(id);
    if (it == entries_.end()) {
      return;
    }
    auto& entry     = *it->second;
    bool const busy = entry.pins > 0 || entry.state == entry_state::SPILLING ||
                      entry.state == entry_state::UNSPILLING ||
                      entry.state == entry_state::WRITING || entry.state == entry_state::READING ||
                      entry.state == entry_state::STREAMING;
    if (busy) {
      entry.release_requested = true;
    } else {
      erase(entry, trash, dead_files);
    }
  }
  trash.clear();
  remove_files(dead_files);
}

template <typename Taken, typename Take>
Taken spill_store_impl::take_from_device(std::uint64_t id, Take const& take) {
  garbage trash;
  std::vector<std::string> dead_files;
  Taken taken{};
  {
    scoped_lock lock(mutex_);
    auto& entry = find(id);
    if (entry.tier != spill_tier::DEVICE || entry.state != entry_state::STABLE || entry.pins > 0 ||
        !take(entry, taken)) {
      return taken;
    }
    erase(entry, trash, dead_files);  // its device bytes leave the store's count with it
  }
  trash.clear();
  remove_files(dead_files);
  return taken;
}

std::unique_ptr<table> spill_store_impl::take_resident(std::uint64_t id) {
  return take_from_device<std::unique_ptr<table>>(
    id, [](spill_entry& entry, std::unique_ptr<table>& taken) {
      taken = std::move(entry.device_table);  // null unless registered as a table, as it is
      return taken != nullptr;
    });
}

std::optional<buffer> spill_store_impl::take_resident_buffer(std::uint64_t id) {
  return take_from_device<std::optional<buffer>>(
    id, [](spill_entry& entry, std::optional<buffer>& taken) {
      if (entry.is_table || entry.device_data.size() != entry.raw_size) {
        return false;
      }
      taken = std::move(entry.device_data);
      return true;
    });
}

void spill_store_impl::drop_blocks(std::vector<disk_block>& blocks,
                                   std::vector<std::string>& dead_files) {
  for (auto const& block : blocks) {
    bytes_on_[index_of(spill_tier::DISK)] -= block.location.block_size();
    auto const it = files_state_.find(block.file_id);
    if (it == files_state_.end()) {
      continue;
    }
    auto& file = it->second;
    --file.live;
    if (file.live == 0) {
      // No block is live or being written: the file goes now, and the next write starts another.
      if (current_file_ == block.file_id) {
        current_file_.reset();
      }
      dead_files.push_back(file.path);
      files_state_.erase(it);
    }
  }
  blocks.clear();
}

void spill_store_impl::erase(spill_entry& entry,
                             garbage& trash,
                             std::vector<std::string>& dead_files) {
  bytes_on_[index_of(spill_tier::DEVICE)] -=
    entry.tier == spill_tier::DEVICE ? entry.device_bytes : 0;
  if (entry.state == entry_state::WRITE_QUEUED) {
    ++entry.write_ticket;
    host_writing_ -= entry.host_bytes;
  }
  free_host_pieces(entry);
  drop_blocks(entry.blocks, dead_files);
  by_tier_[index_of(entry.tier)].erase(&entry);
  auto const it = entries_.find(entry.id);
  trash.push_back(std::move(it->second));
  entries_.erase(it);
  changed_.notify_all();
}

void spill_store_impl::finish_transition(spill_entry& entry,
                                         garbage& trash,
                                         std::vector<std::string>& dead_files) {
  changed_.notify_all();
  if (entry.release_requested && entry.pins == 0 && entry.state != entry_state::WRITING &&
      entry.state != entry_state::READING && entry.state != entry_state::SPILLING &&
      entry.state != entry_state::UNSPILLING && entry.state != entry_state::STREAMING) {
    erase(entry, trash, dead_files);
  }
}

void spill_store_impl::remove_files(std::vector<std::string> const& paths) noexcept {
  for (auto const& path : paths) {
    files_.remove_file(path);
  }
}

spill_tier spill_store_impl::tier_of(std::uint64_t id) {
  scoped_lock lock(mutex_);
  return find(id).tier;
}

std::pair<int, task_id> spill_store_impl::priority_and_owner(std::uint64_t id) {
  scoped_lock lock(mutex_);
  auto const& entry = find(id);
  return {entry.priority, entry.owner};
}

std::vector<spill_entry*> spill_store_impl::select_victims(spill_tier tier,
                                                           std::size_t bytes,
                                                           std::optional<task_id> owner) {
  std::vector<spill_entry*> victims;
  std::size_t chosen = 0;
  for (auto* entry : by_tier_[index_of(tier)]) {
    if (chosen >= bytes) {
      break;
    }
    if (entry->state != entry_state::STABLE || entry->pins > 0 || entry->release_requested ||
        (owner && entry->owner != *owner)) {
      continue;
    }
    victims.push_back(entry);
    chosen += tier == spill_tier::DEVICE ? entry->device_bytes : entry->host_bytes;
  }
  return victims;
}

// ---- spilling ------------------------------------------------------------------------------

std::size_t spill_store_impl::spill(std::size_t bytes,
                                    spill_tier from,
                                    std::optional<task_id> owner) {
  SPILLWAY_EXPECTS(from != spill_tier::DISK, "nothing spills from the disk tier", invalid_argument);
  if (from == spill_tier::HOST) {
    scoped_lock lock(mutex_);
    std::size_t scheduled = 0;
    for (auto* entry : select_victims(spill_tier::HOST, bytes, owner)) {
      scheduled += entry->host_bytes;
      schedule_write(*entry);
    }
    return scheduled;
  }
  std::vector<spill_entry*> victims;
  {
    scoped_lock lock(mutex_);
    victims = select_victims(spill_tier::DEVICE, bytes, owner);
    for (auto* entry : victims) {
      entry->state = entry_state::SPILLING;
    }
  }
  std::size_t freed = 0;
  for (auto* entry : victims) {
    freed += spill_device_entry(*entry);
  }
  return freed;
}

std::vector<host_piece> spill_store_impl::copy_to_host(spill_entry& entry,
                                                       std::vector<std::uint8_t>& metadata) {
  // The caller reserved what encoded_bound() and the staging below need.
  std::size_t const raw  = entry.raw_size;
  codec const host_codec = options_.host_codec;
  std::vector<host_piece> pieces;
  buffer packed;
  if (entry.device_table != nullptr) {
    auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.host);
    metadata         = std::move(table_bytes.metadata);
    packed           = std::move(table_bytes.data);
  }
  if (host_codec == codec::NONE) {
    if (packed.data() == nullptr && raw > 0) {
      packed =
        buffer(entry.device_data.data(), memory_kind::DEVICE, raw, options_.stream, options_.host);
    }
    pieces.push_back(host_piece{std::move(packed), raw});
    return pieces;
  }
  std::size_t const first = std::min(piece_size_, raw);
  buffer bound(compress_bound(host_codec, first), options_.stream, options_.host);
  auto const encode = [&](std::byte const* source, std::size_t size) {
    std::size_t const stored = compress(host_codec, {source, size}, bytes_of(bound));
    buffer exact(bound.data(), memory_kind::HOST, stored, options_.stream, options_.host);
    pieces.push_back(host_piece{std::move(exact), size});
  };
  if (packed.data() != nullptr) {
    for (std::size_t offset = 0; offset < raw; offset += piece_size_) {
      encode(at(packed.data(), offset), std::min(piece_size_, raw - offset));
    }
    return pieces;
  }
  // Device bytes through staging windows: a piece is compressed while the next one is copied.
  std::vector<buffer> windows;
  for (std::size_t slot = 0; slot < staging_windows(raw, piece_size_); ++slot) {
    windows.emplace_back(first, options_.stream, options_.host);
  }
  stream_from_device(entry.device_data.data(), raw, piece_size_, windows, options_.stream, encode);
  return pieces;
}

std::vector<disk_block> spill_store_impl::write_device_to_disk(
  spill_entry& entry, std::vector<std::uint8_t>& metadata) {
  ensure_directory();
  std::size_t const raw   = entry.raw_size;
  codec const disk_codec  = options_.disk_codec;
  std::size_t const first = std::min(piece_size_, raw);
  std::size_t const compressed_scratch =
    disk_codec == codec::NONE ? 0 : compress_bound(disk_codec, first);
  // The source: the packed table on the host when it fits, else device bytes through a window.
  bool const pack_on_host =
    entry.device_table != nullptr && raw + compressed_scratch <= general_limit_;
  // A table too large for the host is packed on the device first, before any host room is
  // held: that allocation may spill other buffers, which may wait for host room.
  buffer packed;  // host (pack_on_host) or device
  if (entry.device_table != nullptr && !pack_on_host) {
    auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.device);
    metadata         = std::move(table_bytes.metadata);
    packed           = std::move(table_bytes.data);
  }
  std::size_t const windows = pack_on_host ? 0 : staging_windows(raw, piece_size_);
  std::size_t const reserve = (pack_on_host ? raw : windows * first) + compressed_scratch;
  {
    scoped_lock lock(mutex_);
    if (!reserve_host(lock, reserve, true)) {
      throw out_of_memory("no host room within the budget of " +
                            std::to_string(options_.host_budget) + " bytes to stage the spill (" +
                            std::to_string(reserve) + " bytes)",
                          reserve);
    }
  }
  reservation_guard guard([this](std::size_t bytes) { release_host_now(bytes); }, reserve);
  buffer packed_on_host;
  if (pack_on_host) {
    auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.host);
    metadata         = std::move(table_bytes.metadata);
    packed_on_host   = std::move(table_bytes.data);
  }
  void const* const source_data = pack_on_host               ? packed_on_host.data()
                                  : packed.data() != nullptr ? packed.data()
                                                             : entry.device_data.data();
  std::vector<buffer> staging;
  for (std::size_t slot = 0; slot < windows; ++slot) {
    staging.emplace_back(first, options_.stream, options_.host);
  }
  buffer encoded(compressed_scratch, options_.stream, options_.host);
  std::vector<disk_block> blocks;
  auto const write = [&](std::byte const* source, std::size_t size) {
    auto const [block_codec, payload] = encode_block({source, size}, bytes_of(encoded));
    blocks.push_back(append_block(entry.id, block_codec, size, payload));
  };
  try {
    if (pack_on_host) {
      for (std::size_t offset = 0; offset < raw; offset += piece_size_) {
        write(at(source_data, offset), std::min(piece_size_, raw - offset));
      }
    } else {
      // A block is encoded and written while the next one is copied from the device.
      stream_from_device(source_data, raw, piece_size_, staging, options_.stream, write);
    }
  } catch (...) {
    std::vector<std::string> dead_files;
    {
      scoped_lock lock(mutex_);
      for (auto const& block : blocks) {
        bytes_on_[index_of(spill_tier::DISK)] += block.location.block_size();
      }
      drop_blocks(blocks, dead_files);
    }
    remove_files(dead_files);
    throw;
  }
  return blocks;
}

std::size_t spill_store_impl::spill_device_entry(spill_entry& entry) {
  auto const start       = clock_type::now();
  std::size_t const raw  = entry.raw_size;
  codec const host_codec = options_.host_codec;
  // What a move to the host holds at its peak: the packed table or device copy, staging and the
  // encoded pieces.
  std::size_t to_host_bytes = raw;
  if (host_codec != codec::NONE) {
    std::size_t const first = std::min(piece_size_, raw);
    to_host_bytes =
      (entry.device_table != nullptr ? raw : staging_windows(raw, piece_size_) * first) +
      compress_bound(host_codec, first) + encoded_bound(host_codec, raw, piece_size_);
  }
  bool to_host = false;
  {
    scoped_lock lock(mutex_);
    to_host = reserve_host(lock, to_host_bytes, false);
  }
  std::vector<host_piece> pieces;
  std::vector<disk_block> blocks;
  std::vector<std::uint8_t> metadata;
  std::unique_ptr<table> old_table;
  buffer old_device;
  garbage trash;
  std::vector<std::string> dead_files;
  try {
    // The entry is SPILLING: only this thread touches its device data.
    if (to_host) {
      pieces = copy_to_host(entry, metadata);
    } else {
      blocks = write_device_to_disk(entry, metadata);
    }
  } catch (std::exception const& error) {
    pieces.clear();
    scoped_lock lock(mutex_);
    if (to_host) {
      release_host(to_host_bytes, true);
    }
    entry.state = entry_state::STABLE;
    record_error(
      "cannot spill buffer " + std::to_string(entry.id) + " off the device: " + error.what(),
      true,
      dynamic_cast<io_error const*>(&error) != nullptr);
    emit(event_kind::SPILL_WRITE_FAILED,
         entry,
         spill_tier::DEVICE,
         to_host ? spill_tier::HOST : spill_tier::DISK,
         since(start));
    finish_transition(entry, trash, dead_files);
    return 0;
  }
  auto const elapsed = since(start);
  std::size_t freed  = 0;
  {
    scoped_lock lock(mutex_);
    if (!metadata.empty()) {
      entry.metadata = std::move(metadata);
    }
    old_table  = std::move(entry.device_table);
    old_device = std::move(entry.device_data);
    freed      = entry.device_bytes;
    bytes_on_[index_of(spill_tier::DEVICE)] -= entry.device_bytes;
    entry.device_bytes = 0;
    entry.state        = entry_state::STABLE;
    if (to_host) {
      std::size_t stored = 0;
      for (auto const& piece : pieces) {
        stored += piece.data.size();
      }
      // The staging is gone; the pieces stay reserved as resident host data.
      release_host(to_host_bytes - stored, true);
      host_in_flight_ -= stored;
      entry.host_pieces = std::move(pieces);
      entry.host_bytes  = stored;
      entry.host_codec  = host_codec;
      bytes_on_[index_of(spill_tier::HOST)] += stored;
      set_tier(entry, spill_tier::HOST);
      add_transfer(spill_tier::DEVICE, spill_tier::HOST, raw, stored, elapsed);
      emit(event_kind::SPILLED, entry, spill_tier::DEVICE, spill_tier::HOST, elapsed);
      keep_headroom();
    } else {
      std::size_t stored = 0;
      for (auto const& block : blocks) {
        stored += block.location.header.stored_size;
        bytes_on_[index_of(spill_tier::DISK)] += block.location.block_size();
      }
      entry.blocks = std::move(blocks);
      set_tier(entry, spill_tier::DISK);
      add_transfer(spill_tier::DEVICE, spill_tier::DISK, raw, stored, elapsed);
      emit(event_kind::SPILLED, entry, spill_tier::DEVICE, spill_tier::DISK, elapsed);
    }
    finish_transition(entry, trash, dead_files);
  }
  old_table.reset();  // the device memory goes here, outside the lock
  old_device = buffer{};
  trash.clear();
  remove_files(dead_files);
  return freed;
}

void spill_store_impl::schedule_write(spill_entry& entry) {
  entry.state                = entry_state::WRITE_QUEUED;
  std::uint64_t const ticket = ++entry.write_ticket;
  std::uint64_t const id     = entry.id;
  host_writing_ += entry.host_bytes;
  io_.submit(io_kind::WRITE, [this, id, ticket] { write_entry(id, ticket); });
}

void spill_store_impl::schedule_read(spill_entry& entry) {
  // The caller reserved entry.raw_size of host room for it.
  entry.state            = entry_state::READING;
  std::uint64_t const id = entry.id;
  io_.submit(io_kind::READ, [this, id] { read_entry(id); });
}

void spill_store_impl::ensure_directory() {
  {
    scoped_lock lock(mutex_);
    if (directory_created_) {
      return;
    }
  }
  files_.create_directories(directory_);
  scoped_lock lock(mutex_);
  directory_created_ = true;
}

std::pair<codec, std::span<std::byte const>> spill_store_impl::encode_block(
  std::span<std::byte const> raw, std::span<std::byte> scratch) {
  codec const disk_codec = options_.disk_codec;
  if (disk_codec == codec::NONE || raw.empty() || !codec_advisor_.try_next()) {
    return {codec::NONE, raw};
  }
  auto const start         = clock_type::now();
  std::size_t const stored = compress(disk_codec, raw, scratch);
  if (!codec_advisor_.keep(raw.size(), stored, since(start))) {
    return {codec::NONE, raw};
  }
  return {disk_codec, scratch.first(stored)};
}

disk_block spill_store_impl::append_block(std::uint64_t id,
                                          codec payload_codec,
                                          std::size_t raw,
                                          std::span<std::byte const> payload) {
  spill_block_header header;
  header.payload_codec           = payload_codec;
  header.buffer_id               = id;
  header.raw_size                = raw;
  header.stored_size             = payload.size();
  header.checksum                = checksum64(payload);
  std::uint64_t const block_size = SPILL_BLOCK_HEADER_SIZE + payload.size();
  std::uint64_t const free_bytes = files_.free_space(directory_);
  SPILLWAY_EXPECTS(free_bytes >= block_size,
                   "disk full: " + std::to_string(free_bytes) + " bytes free in '" + directory_ +
                     "', block needs " + std::to_string(block_size),
                   io_error);
  disk_block block;
  std::shared_ptr<writable_file> writer;
  {
    scoped_lock lock(mutex_);
    if (current_file_) {
      auto& current = files_state_.at(*current_file_);
      if (current.reserved > 0 && current.reserved + block_size > options_.file_target_size) {
        current.sealed = true;
        current_file_.reset();
      }
    }
    if (!current_file_) {
      std::uint64_t const next = next_file_id_++;
      spill_file_state state;
      state.path = directory_ + "/spill-" + std::to_string(next) + ".blk";
      // Creating a file is one metadata operation; the data writes happen unlocked.
      state.writer = files_.open_writable(state.path);
      files_state_.emplace(next, std::move(state));
      current_file_ = next;
    }
    auto& file            = files_state_.at(*current_file_);
    block.file_id         = *current_file_;
    block.location.path   = file.path;
    block.location.offset = file.reserved;
    block.location.header = header;
    file.reserved += block_size;
    ++file.live;
    writer = file.writer;
  }
  try {
    auto const start = clock_type::now();
    write_spill_block(*writer, block.location.offset, header, payload);
    codec_advisor_.wrote(payload.size(), since(start));
  } catch (...) {
    std::vector<std::string> dead_files;
    {
      scoped_lock lock(mutex_);
      // The block's bytes may be partly on disk: the file takes no more blocks.
      auto& file  = files_state_.at(block.file_id);
      file.sealed = true;
      --file.live;
      if (current_file_ == block.file_id) {
        current_file_.reset();
      }
      if (file.live == 0) {
        dead_files.push_back(file.path);
        files_state_.erase(block.file_id);
      }
    }
    remove_files(dead_files);
    throw;
  }
  return block;
}

void spill_store_impl::write_entry(std::uint64_t id, std::uint64_t ticket) noexcept {
  std::vector<host_piece> const* pieces = nullptr;
  std::size_t raw                       = 0;
  codec host_codec                      = codec::NONE;
  {
    scoped_lock lock(mutex_);
    auto const it = entries_.find(id);
    if (it == entries_.end()) {
      return;
    }
    auto& entry = *it->second;
    if (entry.state != entry_state::WRITE_QUEUED || entry.write_ticket != ticket) {
      return;
    }
    entry.state = entry_state::WRITING;
    pieces      = &entry.host_pieces;  // stable: nobody else touches a WRITING entry's data
    raw         = entry.raw_size;
    host_codec  = entry.host_codec;
  }
  auto const start       = clock_type::now();
  codec const disk_codec = options_.disk_codec;
  std::vector<disk_block> blocks;
  std::size_t stored = 0;
  std::string failure;
  try {
    ensure_directory();
    // Scratch of this I/O job: within its io_scratch_ share of the budget, never waited for.
    bool const recode = host_codec != disk_codec;
    buffer decoded(
      recode && host_codec != codec::NONE ? piece_size_ : 0, options_.stream, options_.host);
    buffer encoded(
      recode && disk_codec != codec::NONE ? compress_bound(disk_codec, piece_size_) : 0,
      options_.stream,
      options_.host);
    for (auto const& piece : *pieces) {
      if (!recode && host_codec != codec::NONE) {
        // Same codec: the encoded piece is the block.
        blocks.push_back(
          append_block(id, disk_codec, piece.raw, bytes_of(piece.data, piece.data.size())));
        stored += piece.data.size();
        continue;
      }
      std::byte const* whole = static_cast<std::byte const*>(piece.data.data());
      if (host_codec != codec::NONE) {
        decompress(host_codec,
                   bytes_of(piece.data, piece.data.size()),
                   std::span<std::byte>(static_cast<std::byte*>(decoded.data()), piece.raw));
        whole = static_cast<std::byte const*>(decoded.data());
      }
      for (std::size_t offset = 0; offset < piece.raw; offset += piece_size_) {
        std::size_t const size            = std::min(piece_size_, piece.raw - offset);
        auto const [block_codec, payload] = encode_block({whole + offset, size}, bytes_of(encoded));
        blocks.push_back(append_block(id, block_codec, size, payload));
        stored += payload.size();
      }
    }
  } catch (std::exception const& error) {
    failure = error.what();
  }
  auto const elapsed = since(start);
  garbage trash;
  std::vector<std::string> dead_files;
  {
    scoped_lock lock(mutex_);
    auto& entry = find(id);
    entry.state = entry_state::STABLE;
    host_writing_ -= entry.host_bytes;
    if (failure.empty()) {
      free_host_pieces(entry);
      for (auto const& block : blocks) {
        bytes_on_[index_of(spill_tier::DISK)] += block.location.block_size();
      }
      entry.blocks = std::move(blocks);
      set_tier(entry, spill_tier::DISK);
      add_transfer(spill_tier::HOST, spill_tier::DISK, raw, stored, elapsed);
      emit(event_kind::SPILLED, entry, spill_tier::HOST, spill_tier::DISK, elapsed);
    } else {
      for (auto const& block : blocks) {
        bytes_on_[index_of(spill_tier::DISK)] += block.location.block_size();
      }
      drop_blocks(blocks, dead_files);
      record_error("write of spill buffer " + std::to_string(id) + " (" + std::to_string(raw) +
                     " bytes) failed; it stays on the host: " + failure,
                   true,
                   true);
      emit(event_kind::SPILL_WRITE_FAILED, entry, spill_tier::HOST, spill_tier::DISK, elapsed);
    }
    ++room_epoch_;
    room_.notify_all();
    finish_transition(entry, trash, dead_files);
  }
  trash.clear();
  remove_files(dead_files);
}

void spill_store_impl::read_entry(std::uint64_t id) noexcept {
  std::vector<disk_block> blocks;
  std::size_t raw_size = 0;
  {
    scoped_lock lock(mutex_);
    auto const it = entries_.find(id);
    if (it == entries_.end() || it->second->state != entry_state::READING) {
      return;
    }
    blocks   = it->second->blocks;
    raw_size = it->second->raw_size;
  }
  auto const start = clock_type::now();
  buffer raw;
  std::size_t stored = 0;
  std::exception_ptr failure;
  try {
    // raw_size was reserved by the scheduler; each payload is I/O scratch.
    raw                = buffer(raw_size, options_.stream, options_.host);
    std::size_t offset = 0;
    for (auto const& block : blocks) {
      auto const& header    = block.location.header;
      auto const read_start = clock_type::now();
      buffer const payload  = read_spill_block(files_, block.location, id, options_.host);
      codec_advisor_.read(header.stored_size, since(read_start));
      std::span<std::byte> destination(at(raw.data(), offset), header.raw_size);
      if (header.payload_codec == codec::NONE) {
        std::copy_n(at(payload.data(), 0), header.raw_size, destination.begin());
      } else {
        auto const decode_start = clock_type::now();
        decompress(header.payload_codec, bytes_of(payload, payload.size()), destination);
        codec_advisor_.decompressed(header.raw_size, since(decode_start));
      }
      offset += header.raw_size;
      stored += header.stored_size;
    }
  } catch (...) {
    failure = std::current_exception();
    raw     = buffer{};
  }
  auto const elapsed = since(start);
  garbage trash;
  std::vector<std::string> dead_files;
  {
    scoped_lock lock(mutex_);
    auto& entry = find(id);
    if (failure == nullptr) {
      drop_blocks(entry.blocks, dead_files);
      host_in_flight_ -= raw_size;  // now resident
      entry.host_bytes = raw_size;
      entry.host_codec = codec::NONE;
      entry.host_pieces.push_back(host_piece{std::move(raw), raw_size});
      bytes_on_[index_of(spill_tier::HOST)] += raw_size;
      set_tier(entry, spill_tier::HOST);
      touch(entry);
      add_transfer(spill_tier::DISK, spill_tier::HOST, raw_size, stored, elapsed);
      emit(event_kind::UNSPILLED, entry, spill_tier::DISK, spill_tier::HOST, elapsed);
      keep_headroom();
    } else {
      release_host(raw_size, true);
      entry.read_error = failure;
      try {
        std::rethrow_exception(failure);
      } catch (std::exception const& error) {
        record_error(error.what(), false, true);
      } catch (...) {
        record_error("read of spill buffer " + std::to_string(id) + " failed", false, true);
      }
      emit(event_kind::SPILL_READ_FAILED, entry, spill_tier::DISK, spill_tier::HOST, elapsed);
    }
    if (!dead_files.empty()) {
      // Remove an emptied file before the waiting acquirer resumes (still READING meanwhile).
      lock.unlock();
      remove_files(dead_files);
      dead_files.clear();
      lock.lock();
    }
    auto& finished = find(id);
    finished.state = entry_state::STABLE;
    finish_transition(finished, trash, dead_files);
  }
  trash.clear();
  remove_files(dead_files);
}

void spill_store_impl::prefetch(std::uint64_t id) {
  scoped_lock lock(mutex_);
  auto& entry = find(id);
  if (entry.tier == spill_tier::DISK && entry.state == entry_state::STABLE &&
      reserve_host(lock, entry.raw_size, false)) {
    entry.read_error = nullptr;
    schedule_read(entry);
  }
}

void spill_store_impl::wait_for_io() { io_.drain(); }

spill_statistics spill_store_impl::statistics() const {
  scoped_lock lock(mutex_);
  auto result     = statistics_;
  result.bytes_on = bytes_on_;
  for (std::size_t tier = 0; tier < NUM_SPILL_TIERS; ++tier) {
    result.buffers_on[tier] = by_tier_[tier].size();
  }
  return result;
}

std::size_t spill_store_impl::bytes_on(spill_tier tier) const {
  scoped_lock lock(mutex_);
  return bytes_on_[index_of(tier)];
}

}  // namespace detail

spill_store::spill_store(spill_store_options options)
  : impl_(std::make_unique<detail::spill_store_impl>(std::move(options))) {}

spill_store::~spill_store() = default;

spillable_table spill_store::make_spillable(std::unique_ptr<table> data,
                                            int priority,
                                            task_id owner) {
  return impl_->add_table(std::move(data), priority, owner);
}

spillable_buffer spill_store::make_spillable(buffer data, int priority, task_id owner) {
  return impl_->add_buffer(std::move(data), priority, owner);
}

std::size_t spill_store::spill(std::size_t bytes, spill_tier from) {
  return impl_->spill(bytes, from, std::nullopt);
}

std::size_t spill_store::spill_task(task_id task, std::size_t bytes) {
  return impl_->spill(bytes, spill_tier::DEVICE, task);
}

void spill_store::prefetch(spillable_table const& handle) {
  SPILLWAY_EXPECTS(handle.valid(), "prefetch of an empty handle", invalid_argument);
  impl_->prefetch(handle.id());
}

void spill_store::prefetch(spillable_buffer const& handle) {
  SPILLWAY_EXPECTS(handle.valid(), "prefetch of an empty handle", invalid_argument);
  impl_->prefetch(handle.id());
}

void spill_store::wait_for_io() { impl_->wait_for_io(); }

spill_statistics spill_store::statistics() const { return impl_->statistics(); }

std::size_t spill_store::bytes_on(spill_tier tier) const { return impl_->bytes_on(tier); }

std::string const& spill_store::directory() const noexcept { return impl_->directory(); }

spill_hook spill_store::make_spill_hook(task_id task) {
  return [impl = impl_.get(), task](std::size_t bytes) {
    return impl->spill(bytes, spill_tier::DEVICE, task);
  };
}

allocation_failure_callback spill_store::make_failure_callback() {
  return [impl = impl_.get()](std::size_t bytes, std::size_t /*attempt*/) {
    return impl->spill(bytes, spill_tier::DEVICE, std::nullopt) > 0;
  };
}

}  // namespace spillway
