/**
 * @file spill_io.cpp
 * @brief Spill store I/O: spill file writes and reads on the I/O threads, their blocks and codecs.
 */
#include "spill/spill_store_impl.hpp"
#include "spill/spill_store_util.hpp"

#include <spillway/core/error.hpp>
#include <spillway/spill/spill_store.hpp>

#include <algorithm>
#include <chrono>
#include <span>
#include <string>
#include <vector>

namespace spillway::detail {

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
      settle_in_flight(raw_size);  // now resident
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

}  // namespace spillway::detail
