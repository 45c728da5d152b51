/**
 * @file spill_store.cpp
 * @brief The spill store's entries: registration, pin/acquire/release, removal, and the public
 * `spill_store` (the other parts of `spill_store_impl` are listed in spill_store_impl.hpp).
 */
#include "spill/compact_metadata.hpp"
#include "spill/spill_store_impl.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/spill/spill_directory.hpp>
#include <spillway/spill/spill_store.hpp>

#include <algorithm>
#include <atomic>
#include <string>
#include <unistd.h>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// The smallest host budget: room for the I/O scratch areas and a useful general part.
constexpr std::size_t MIN_HOST_BUDGET = 64_KiB;
/// Staging pieces are multiples of this.
constexpr std::size_t PIECE_ALIGNMENT = 64;
/// The most disk blocks written raw, untried, after one that the codec did not shrink enough:
/// data that does not compress is still tried once every 64 blocks (256 MiB of 4 MiB blocks).

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

}  // namespace

namespace {

/// `options` with its I/O threads chosen when left at 0.
spill_store_options with_io_threads(spill_store_options options) {
  if (options.io_threads == 0) {
    options.io_threads = spill_io_threads(options.host_budget, options.staging_size);
  }
  return options;
}

}  // namespace

spill_store_impl::spill_store_impl(spill_store_options options)
  : options_(with_io_threads(std::move(options))),
    files_(options_.files != nullptr ? *options_.files : default_file_system()),
    directory_(directory_for(options_.spill_root)),
    directory_slot_(register_spill_directory(directory_)),
    piece_size_(piece_size_for(options_)),
    io_scratch_(piece_size_ + std::max(compress_bound(options_.host_codec, piece_size_),
                                       compress_bound(options_.disk_codec, piece_size_))),
    codec_advisor_(options_.min_compression_ratio, options_.compress_only_when_faster),
    general_limit_(options_.host_budget - options_.io_threads * io_scratch_),
    staging_reserve_(2 * (piece_size_ + compress_bound(options_.disk_codec, piece_size_))),
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
  charge_bookkeeping(*entry);
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
      packed          = detail::pack(slice, options_.stream, options_.host);
      entry->metadata = compact_metadata(packed.metadata);
    } catch (...) {
      release_host_now(raw);
      throw;
    }
    entry->tier       = spill_tier::HOST;
    entry->host_bytes = packed.data.size();
    entry->host_pieces.push_back(host_piece{std::move(packed.data), raw});
    scoped_lock lock(mutex_);
    settle_in_flight(raw);  // now resident
    auto const id = insert(std::move(entry));
    keep_headroom();
    return spillable_table{this, id, rows};
  }
  // Larger than the host may hold: packed on the device, from where it spills like any other.
  auto packed         = detail::pack(slice, options_.stream, options_.device);
  entry->metadata     = compact_metadata(packed.metadata);
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

// ---- acquire -------------------------------------------------------------------------------

acquired_data spill_store_impl::pin(spill_entry& entry) {
  acquired_data result;
  if (entry.device_table != nullptr) {
    result.view = entry.device_table->view();
  } else if (entry.is_table) {
    result.view = unpack(expand_metadata(entry.metadata),
                         entry.device_data.data(),
                         entry.device_data.size(),
                         memory_kind::DEVICE);
  } else {
    result.data = entry.device_data.data();
    result.size = entry.device_data.size();
  }
  // Pinned once its view is made: a view that fails to be made (its metadata read back) leaves
  // no pin behind that nothing would release.
  ++entry.pins;
  touch(entry);
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
  release_bookkeeping(entry);
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

bool spill_store::reserve_caller_host(std::size_t bytes) {
  return impl_->reserve_caller_host(bytes);
}

void spill_store::release_caller_host(std::size_t bytes) { impl_->release_caller_host(bytes); }

std::size_t spill_store::bytes_on(spill_tier tier) const { return impl_->bytes_on(tier); }
/// A spill I/O thread's share of the host budget, in staging pieces of full size.
constexpr std::size_t HOST_PIECES_PER_IO_THREAD = 16;

std::size_t spill_io_threads(std::size_t host_budget, std::size_t staging_size) {
  std::size_t const by_memory =
    host_budget / (HOST_PIECES_PER_IO_THREAD * std::max<std::size_t>(staging_size, 1));
  return std::max<std::size_t>(2, std::min(worker_threads(), by_memory));
}

std::size_t spill_store::io_threads() const noexcept { return impl_->io_threads(); }

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