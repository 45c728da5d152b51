#include <spillway/core/error.hpp>
#include <spillway/shuffle/shard_directory.hpp>

#include <cstring>
#include <string>

namespace spillway {
namespace {

void append_word(std::vector<std::byte>& out, std::uint64_t value) {
  std::size_t const at = out.size();
  out.resize(at + sizeof(value));
  std::memcpy(out.data() + at, &value, sizeof(value));
}

}  // namespace

std::vector<std::byte> shard_directory::encode(
  std::span<std::vector<std::pair<std::size_t, std::size_t>> const> sizes) {
  std::vector<std::byte> out;
  append_word(out, sizes.size());
  for (auto const& map : sizes) {
    append_word(out, map.size());
    for (auto const& [rows, bytes] : map) {
      append_word(out, rows);
      append_word(out, bytes);
    }
  }
  return out;
}

shard_directory::shard_directory(std::vector<std::vector<std::byte>> const& published,
                                 std::size_t num_partitions)
  : num_partitions_(num_partitions) {
  maps_.resize(published.size());
  for (std::size_t rank = 0; rank < published.size(); ++rank) {
    auto const& bytes    = published[rank];
    std::size_t position = 0;
    auto const next_word = [&]() {
      SPILLWAY_EXPECTS(position + sizeof(std::uint64_t) <= bytes.size(),
                       "shard_directory: truncated entry of rank " + std::to_string(rank),
                       corruption_error);
      std::uint64_t value = 0;
      std::memcpy(&value, bytes.data() + position, sizeof(value));
      position += sizeof(value);
      return static_cast<std::size_t>(value);
    };
    std::size_t const num_maps = next_word();
    SPILLWAY_EXPECTS_LE(num_maps,
                        bytes.size() / sizeof(std::uint64_t),
                        "shard_directory: impossible map count from rank " + std::to_string(rank),
                        corruption_error);
    maps_[rank].resize(num_maps);
    for (auto& map : maps_[rank]) {
      SPILLWAY_EXPECTS_EQ(next_word(),
                          num_partitions,
                          "shard_directory: partition count of rank " + std::to_string(rank),
                          corruption_error);
      map.resize(num_partitions);
      for (auto& [rows, size] : map) {
        rows = next_word();
        size = next_word();
      }
    }
    SPILLWAY_EXPECTS_EQ(
      position,
      bytes.size(),
      "shard_directory: trailing bytes in the entry of rank " + std::to_string(rank),
      corruption_error);
  }
}

std::size_t shard_directory::num_maps(int rank) const {
  SPILLWAY_EXPECTS(rank >= 0 && rank < num_ranks(),
                   "shard_directory::num_maps: no rank " + std::to_string(rank),
                   invalid_argument);
  return maps_[static_cast<std::size_t>(rank)].size();
}

std::size_t shard_directory::total_maps() const noexcept {
  std::size_t total = 0;
  for (auto const& rank : maps_) {
    total += rank.size();
  }
  return total;
}

std::vector<shard_location> shard_directory::shards_of(std::size_t partition) const {
  SPILLWAY_EXPECTS_LT(
    partition, num_partitions_, "shard_directory::shards_of: no such partition", invalid_argument);
  std::vector<shard_location> result;
  for (std::size_t rank = 0; rank < maps_.size(); ++rank) {
    for (std::size_t map = 0; map < maps_[rank].size(); ++map) {
      auto const [rows, bytes] = maps_[rank][map][partition];
      if (rows > 0) {
        result.push_back({shard_key{static_cast<int>(rank), map, partition}, rows, bytes});
      }
    }
  }
  return result;
}

std::size_t shard_directory::partition_rows(std::size_t partition) const {
  std::size_t total = 0;
  for (auto const& location : shards_of(partition)) {
    total += location.rows;
  }
  return total;
}

std::size_t shard_directory::partition_bytes(std::size_t partition) const {
  std::size_t total = 0;
  for (auto const& location : shards_of(partition)) {
    total += location.bytes;
  }
  return total;
}

shard_location shard_directory::locate(shard_key const& key) const {
  SPILLWAY_EXPECTS(key.map < num_maps(key.rank) && key.partition < num_partitions_,
                   "shard_directory::locate: no shard (rank " + std::to_string(key.rank) +
                     ", map " + std::to_string(key.map) + ", partition " +
                     std::to_string(key.partition) + ")",
                   invalid_argument);
  auto const [rows, bytes] = maps_[static_cast<std::size_t>(key.rank)][key.map][key.partition];
  return {key, rows, bytes};
}

}  // namespace spillway
