#include "map_checkpoint.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/logging.hpp>
#include <spillway/memory/copy.hpp>

#include <xxhash.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/stat.h>
#include <unistd.h>

namespace spillway::detail {
namespace {

constexpr std::uint64_t MAGIC      = 0x5350'5759'4d41'5031ULL;  // "SPWYMAP1"
constexpr std::uint64_t VERSION    = 1;
constexpr std::size_t HEADER_WORDS = 5;
constexpr std::size_t SHARD_WORDS  = 3;
/// Bytes moved through host staging at a time.
constexpr std::size_t STAGING_BYTES = 1U << 20U;

std::string errno_text() { return std::strerror(errno); }

/** @brief An open file descriptor, closed on every path. */
class file_descriptor {
 public:
  explicit file_descriptor(int fd) noexcept : fd_(fd) {}
  ~file_descriptor() {
    if (fd_ >= 0) {
      ::close(fd_);
    }
  }
  file_descriptor(file_descriptor const&)            = delete;
  file_descriptor& operator=(file_descriptor const&) = delete;
  file_descriptor(file_descriptor&&)                 = delete;
  file_descriptor& operator=(file_descriptor&&)      = delete;
  [[nodiscard]] int get() const noexcept { return fd_; }
  /** @return whether closing succeeded (the descriptor is closed either way) */
  bool close() noexcept {
    int const fd = fd_;
    fd_          = -1;
    return ::close(fd) == 0;
  }

 private:
  int fd_;
};

void write_all(int fd, void const* data, std::size_t bytes, std::string const& path) {
  auto const* at = static_cast<char const*>(data);
  while (bytes > 0) {
    auto const written = ::write(fd, at, bytes);
    if (written < 0 && errno == EINTR) {
      continue;
    }
    SPILLWAY_EXPECTS(
      written > 0, "checkpoint: cannot write " + path + ": " + errno_text(), io_error);
    at += written;
    bytes -= static_cast<std::size_t>(written);
  }
}

/** @return whether all `bytes` were read (false at end of file or on error) */
bool read_all(int fd, void* data, std::size_t bytes) {
  auto* at = static_cast<char*>(data);
  while (bytes > 0) {
    auto const got = ::read(fd, at, bytes);
    if (got < 0 && errno == EINTR) {
      continue;
    }
    if (got <= 0) {
      return false;
    }
    at += got;
    bytes -= static_cast<std::size_t>(got);
  }
  return true;
}

/** @brief An XXH3 streaming state, freed on every path. */
struct hasher {
  hasher() : state(XXH3_createState()) {
    SPILLWAY_EXPECTS(state != nullptr, "checkpoint: cannot allocate a hash state", out_of_memory);
    XXH3_64bits_reset(state);
  }
  ~hasher() { XXH3_freeState(state); }
  hasher(hasher const&)            = delete;
  hasher& operator=(hasher const&) = delete;
  hasher(hasher&&)                 = delete;
  hasher& operator=(hasher&&)      = delete;
  void update(void const* data, std::size_t bytes) const { XXH3_64bits_update(state, data, bytes); }
  [[nodiscard]] std::uint64_t digest() const { return XXH3_64bits_digest(state); }
  XXH3_state_t* state;
};

}  // namespace

map_checkpoint::map_checkpoint(std::string directory,
                               std::uint64_t fingerprint,
                               resource_ref staging)
  : directory_(std::move(directory)), fingerprint_(fingerprint), staging_(staging) {
  std::error_code error;
  std::filesystem::create_directories(directory_, error);
  SPILLWAY_EXPECTS(
    !error, "checkpoint: cannot create " + directory_ + ": " + error.message(), io_error);
}

std::string map_checkpoint::path_of(std::string const& identity) const {
  std::uint64_t const key = XXH3_64bits_withSeed(identity.data(), identity.size(), fingerprint_);
  char name[40];
  std::snprintf(name, sizeof(name), "map-%016llx.shards", static_cast<unsigned long long>(key));
  return (std::filesystem::path(directory_) / name).string();
}

void map_checkpoint::save(std::string const& identity,
                          std::vector<shard_to_checkpoint> const& shards) const {
  std::vector<std::size_t> partitions;
  partitions.reserve(shards.size());
  for (auto const& shard : shards) {
    partitions.push_back(shard.partition);
  }
  save(identity, partitions, [&shards](std::size_t index, frame_writer const& write) {
    write(shards[index].frame, shards[index].bytes, shards[index].kind);
  });
}

void map_checkpoint::save(std::string const& identity,
                          std::vector<std::size_t> const& partitions,
                          frame_source const& frames) const {
  static std::atomic<std::uint64_t> sequence{0};
  auto const path = path_of(identity);
  auto const temporary =
    path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(sequence.fetch_add(1));
  file_descriptor fd(::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
  SPILLWAY_EXPECTS(
    fd.get() >= 0, "checkpoint: cannot create " + temporary + ": " + errno_text(), io_error);
  try {
    std::array<std::uint64_t, HEADER_WORDS> const header{
      MAGIC, VERSION, fingerprint_, identity.size(), partitions.size()};
    hasher whole;
    whole.update(header.data(), sizeof(header));
    whole.update(identity.data(), identity.size());
    write_all(fd.get(), header.data(), sizeof(header), temporary);
    write_all(fd.get(), identity.data(), identity.size(), temporary);
    buffer staging(STAGING_BYTES, default_stream(), staging_);
    std::vector<std::uint64_t> table;
    table.reserve(partitions.size() * SHARD_WORDS);
    for (std::size_t index = 0; index < partitions.size(); ++index) {
      frames(index, [&](void const* bytes, std::size_t size, memory_kind kind) {
        hasher frame;
        auto const* at = static_cast<std::byte const*>(bytes);
        for (std::size_t done = 0; done < size; done += STAGING_BYTES) {
          auto const piece = std::min(STAGING_BYTES, size - done);
          copy_bytes(staging.data(), staging.kind(), at + done, kind, piece, default_stream());
          frame.update(staging.data(), piece);
          write_all(fd.get(), staging.data(), piece, temporary);
        }
        table.insert(table.end(), {partitions[index], size, frame.digest()});
      });
    }
    whole.update(table.data(), table.size() * sizeof(std::uint64_t));
    std::uint64_t const trailer = whole.digest();
    write_all(fd.get(), table.data(), table.size() * sizeof(std::uint64_t), temporary);
    write_all(fd.get(), &trailer, sizeof(trailer), temporary);
    SPILLWAY_EXPECTS(::fsync(fd.get()) == 0,
                     "checkpoint: cannot flush " + temporary + ": " + errno_text(),
                     io_error);
    SPILLWAY_EXPECTS(
      fd.close(), "checkpoint: cannot close " + temporary + ": " + errno_text(), io_error);
    SPILLWAY_EXPECTS(::rename(temporary.c_str(), path.c_str()) == 0,
                     "checkpoint: cannot rename " + temporary + " to " + path + ": " + errno_text(),
                     io_error);
  } catch (...) {
    ::unlink(temporary.c_str());
    throw;
  }
}

std::optional<std::vector<checkpointed_shard>> map_checkpoint::load(std::string const& identity,
                                                                    stream_view stream,
                                                                    resource_ref resource) const {
  auto const path = path_of(identity);
  file_descriptor fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) {
    return std::nullopt;
  }
  auto const reject = [&path](char const* why) {
    log(log_level::WARN,
        "checkpoint " + path + " is not used: " + why + "; its map task runs again");
    return std::nullopt;
  };
  struct ::stat info {};
  if (::fstat(fd.get(), &info) != 0) {
    return reject("cannot stat it");
  }
  auto const file_bytes = static_cast<std::size_t>(info.st_size);
  std::array<std::uint64_t, HEADER_WORDS> header{};
  if (!read_all(fd.get(), header.data(), sizeof(header))) {
    return reject("truncated header");
  }
  if (header[0] != MAGIC || header[1] != VERSION) {
    return reject("not a checkpoint of this version");
  }
  if (header[2] != fingerprint_) {
    return reject("written by a shuffle with other options");
  }
  if (header[3] != identity.size() || header[4] > file_bytes / (SHARD_WORDS * 8)) {
    return reject("malformed header");
  }
  std::string stored(identity.size(), '\0');
  if (!read_all(fd.get(), stored.data(), stored.size()) || stored != identity) {
    return reject("written for another map task");
  }
  auto const count       = static_cast<std::size_t>(header[4]);
  auto const table_bytes = count * SHARD_WORDS * sizeof(std::uint64_t);
  auto const fixed       = sizeof(header) + identity.size() + table_bytes + sizeof(std::uint64_t);
  if (file_bytes < fixed) {
    return reject("truncated");
  }
  std::vector<std::uint64_t> table(count * SHARD_WORDS);
  std::uint64_t trailer = 0;
  auto const table_at   = static_cast<off_t>(file_bytes - table_bytes - sizeof(trailer));
  if (::lseek(fd.get(), table_at, SEEK_SET) != table_at ||
      !read_all(fd.get(), table.data(), table_bytes) ||
      !read_all(fd.get(), &trailer, sizeof(trailer))) {
    return reject("cannot read its shard table");
  }
  hasher whole;
  whole.update(header.data(), sizeof(header));
  whole.update(identity.data(), identity.size());
  whole.update(table.data(), table_bytes);
  if (whole.digest() != trailer) {
    return reject("its shard table fails its checksum");
  }
  std::size_t frames_bytes = 0;
  for (std::size_t i = 0; i < count; ++i) {
    frames_bytes += static_cast<std::size_t>(table[i * SHARD_WORDS + 1]);
  }
  if (frames_bytes != file_bytes - fixed) {
    return reject("its frames do not fill the file");
  }
  auto const frames_at = static_cast<off_t>(sizeof(header) + identity.size());
  if (::lseek(fd.get(), frames_at, SEEK_SET) != frames_at) {
    return reject("cannot seek to its frames");
  }
  buffer staging(STAGING_BYTES, stream, staging_);
  std::vector<checkpointed_shard> shards;
  shards.reserve(count);
  for (std::size_t i = 0; i < count; ++i) {
    auto const bytes = static_cast<std::size_t>(table[i * SHARD_WORDS + 1]);
    checkpointed_shard shard{static_cast<std::size_t>(table[i * SHARD_WORDS]),
                             buffer(bytes, stream, resource)};
    hasher frame;
    auto* at = static_cast<std::byte*>(shard.frame.data());
    for (std::size_t done = 0; done < bytes; done += STAGING_BYTES) {
      auto const piece = std::min(STAGING_BYTES, bytes - done);
      if (!read_all(fd.get(), staging.data(), piece)) {
        return reject("truncated frame");
      }
      frame.update(staging.data(), piece);
      copy_bytes(at + done, shard.frame.kind(), staging.data(), staging.kind(), piece, stream);
    }
    if (frame.digest() != table[i * SHARD_WORDS + 2]) {
      return reject("a frame fails its checksum");
    }
    shards.push_back(std::move(shard));
  }
  return shards;
}

}  // namespace spillway::detail
