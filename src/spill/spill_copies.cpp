/**
 * @file spill_copies.cpp
 * @brief Spill store copies: device memory to and from the host and disk through staging windows.
 */
#include "spill/compact_metadata.hpp"
#include "spill/spill_store_impl.hpp"
#include "spill/spill_store_util.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/spill/spill_store.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace spillway::detail {

namespace {

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

/// The smallest piece a device-to-disk spill stages when the host has no room for full ones.
constexpr std::size_t MIN_FALLBACK_PIECE = 4096;

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
        // Two blocks past the budget (counted) rather than a failed read: the buffer is needed,
        // and nothing on the host could make room for them.
        reserve_host_past_budget(scratch);
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

std::vector<host_piece> spill_store_impl::copy_to_host(spill_entry& entry,
                                                       std::vector<std::uint8_t>& metadata) {
  // The caller reserved what encoded_bound() and the staging below need.
  std::size_t const raw  = entry.raw_size;
  codec const host_codec = options_.host_codec;
  std::vector<host_piece> pieces;
  buffer packed;
  if (entry.device_table != nullptr) {
    auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.host);
    metadata         = compact_metadata(table_bytes.metadata);  // as the store keeps it
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
  std::size_t const raw  = entry.raw_size;
  codec const disk_codec = options_.disk_codec;
  std::size_t piece      = piece_size_;
  auto const scratch_for = [&](std::size_t size) {
    return disk_codec == codec::NONE ? std::size_t{0} : compress_bound(disk_codec, size);
  };
  // The source: the packed table on the host when it fits, else device bytes through a window.
  bool pack_on_host =
    entry.device_table != nullptr && raw + scratch_for(std::min(piece, raw)) <= general_limit_;
  // A table too large for the host is packed on the device first, before any host room is
  // held: that allocation may spill other buffers, which may wait for host room. It is the
  // store's work, not the task's whose allocation may have called this spill: it fails rather
  // than block in the OOM protocol, where the task may wait for a buffer this spill holds.
  // Then, with no device room for it either, it is packed on the host past the budget (counted
  // in host_over_budget_peak) rather than left on a full device.
  bool past_budget = false;
  buffer packed;  // on the device
  if (entry.device_table != nullptr && !pack_on_host) {
    try {
      task_context::detached_scope const detached;
      auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.device);
      metadata         = compact_metadata(table_bytes.metadata);  // as the store keeps it
      packed           = std::move(table_bytes.data);
    } catch (out_of_memory const&) {
      pack_on_host = true;
      past_budget  = true;
    }
  }
  std::size_t windows = pack_on_host ? 0 : staging_windows(raw, piece);
  std::size_t reserve =
    (pack_on_host ? raw : windows * std::min(piece, raw)) + scratch_for(std::min(piece, raw));
  {
    scoped_lock lock(mutex_);
    std::size_t const failures = statistics_.write_errors;
    if (past_budget) {
      reserve_host_past_budget(reserve);
    } else if (!reserve_host(lock, reserve, true)) {
      // Nothing can make room for two windows of a full piece (the host tier may be held by the
      // very entry whose move to the device made this spill): one window of the largest piece
      // the room left holds. Disk blocks are then smaller; reads take blocks of any size. Not
      // when a write failed meanwhile (the disk is full or failing: a smaller write fails too),
      // nor for a table packed on the host.
      std::size_t const room = host_used_ < general_limit_ ? general_limit_ - host_used_ : 0;
      piece                  = std::min(piece, std::bit_floor(std::max<std::size_t>(room, 1)));
      while (piece >= MIN_FALLBACK_PIECE && piece + scratch_for(piece) > room) {
        piece /= 2;
      }
      std::size_t const smaller = std::min(piece, raw) + scratch_for(std::min(piece, raw));
      if (pack_on_host || statistics_.write_errors != failures || piece < MIN_FALLBACK_PIECE ||
          !reserve_host(lock, smaller, false)) {
        throw out_of_memory("no host room within the budget of " +
                              std::to_string(options_.host_budget) + " bytes to stage the spill (" +
                              std::to_string(reserve) + " bytes)",
                            reserve);
      }
      windows = 1;
      reserve = smaller;
      ++statistics_.small_staging_spills;
    }
  }
  reservation_guard guard([this](std::size_t bytes) { release_host_now(bytes); }, reserve);
  std::size_t const first = std::min(piece, raw);
  buffer packed_on_host;
  if (pack_on_host) {
    auto table_bytes = detail::pack(entry.device_table->view(), options_.stream, options_.host);
    metadata         = compact_metadata(table_bytes.metadata);  // as the store keeps it
    packed_on_host   = std::move(table_bytes.data);
  }
  void const* const source_data = pack_on_host               ? packed_on_host.data()
                                  : packed.data() != nullptr ? packed.data()
                                                             : entry.device_data.data();
  std::vector<buffer> staging;
  for (std::size_t slot = 0; slot < windows; ++slot) {
    staging.emplace_back(first, options_.stream, options_.host);
  }
  buffer encoded(scratch_for(first), options_.stream, options_.host);
  std::vector<disk_block> blocks;
  auto const write = [&](std::byte const* source, std::size_t size) {
    auto const [block_codec, payload] = encode_block({source, size}, bytes_of(encoded));
    blocks.push_back(append_block(entry.id, block_codec, size, payload));
  };
  try {
    if (pack_on_host) {
      for (std::size_t offset = 0; offset < raw; offset += piece) {
        write(at(source_data, offset), std::min(piece, raw - offset));
      }
    } else {
      // A block is encoded and written while the next one is copied from the device.
      stream_from_device(source_data, raw, piece, staging, options_.stream, write);
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
      recount_bookkeeping(entry);  // its pack metadata, estimated until now
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
      settle_in_flight(stored);
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

}  // namespace spillway::detail
