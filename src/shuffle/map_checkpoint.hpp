/**
 * @file map_checkpoint.hpp
 * @brief Map outputs persisted on disk so that a rerun of a shuffle after a failure (a killed
 * rank, a lost machine) reads them back instead of running those map tasks again. Private to the
 * shuffle layer; enabled by `shuffle_options::checkpoint_directory`.
 *
 * One file per completed map task, named by a hash of the shuffle's fingerprint and the map's
 * identity (a string the caller gives, e.g. input file, size, modification time and batch number).
 * Layout (integers 64-bit, host order): magic, version, fingerprint, identity length, shard
 * count; the identity bytes; the frames one after another; per shard (partition, frame bytes,
 * XXH3 of the frame); an XXH3 of the header, the identity and the shard table.
 *
 * What is guaranteed:
 * - A file is written under a temporary name, flushed to disk (fsync) and renamed, so a file
 *   with the final name is complete: a kill at any point leaves either no file or a whole one.
 * - `load` returns the map's shards only when the file's magic, version, fingerprint, identity
 *   and every checksum match; anything else (absent, truncated, corrupt, another shuffle's file)
 *   is "not checkpointed" and the map task runs again.
 * - Files are not removed by the shuffle: the directory belongs to the caller, who removes it once
 *   the job has succeeded.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/memory_kind.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace spillway::detail {

/** @brief One shard as checkpointed: its partition and its frame (see shard_frame.hpp). */
struct checkpointed_shard {
  std::size_t partition = 0;
  buffer frame;
};

/** @brief A shard to checkpoint: its partition and where its frame's bytes are. */
struct shard_to_checkpoint {
  std::size_t partition = 0;
  void const* frame     = nullptr;
  std::size_t bytes     = 0;
  memory_kind kind      = memory_kind::HOST;
};

/** @brief Receives one frame's bytes (valid during the call). */
using frame_writer = std::function<void(void const* bytes, std::size_t size, memory_kind kind)>;

/**
 * @brief Hands shard `index`'s frame to `write`, e.g. while it is pinned in the spill store.
 */
using frame_source = std::function<void(std::size_t index, frame_writer const& write)>;

/** @brief The checkpoint files of one shuffle in one directory. @note Thread-safe. */
class map_checkpoint {
 public:
  /**
   * @param directory created when missing
   * @param fingerprint tells shuffles with different partitioning apart
   * @param staging where the bounded host staging of reads and writes is allocated
   * @throws io_error when the directory cannot be created
   */
  map_checkpoint(std::string directory, std::uint64_t fingerprint, resource_ref staging);

  /**
   * @brief Writes the shards of the map task `identity` (atomically, as the file comment says).
   * @throws io_error naming the file when it cannot be written (a full disk, say); no file with
   * the final name is left then
   */
  void save(std::string const& identity, std::vector<shard_to_checkpoint> const& shards) const;

  /**
   * @brief `save` of shards given one at a time: `frames(i, write)` for each i in
   * `[0, partitions.size())`, shard i being of partition `partitions[i]`.
   */
  void save(std::string const& identity,
            std::vector<std::size_t> const& partitions,
            frame_source const& frames) const;

  /**
   * @return the shards of `identity`, frames allocated from `resource`, or nothing when the map
   * was not (completely and correctly) checkpointed
   */
  [[nodiscard]] std::optional<std::vector<checkpointed_shard>> load(std::string const& identity,
                                                                    stream_view stream,
                                                                    resource_ref resource) const;

  /** @return the file that holds (or would hold) `identity`'s shards */
  [[nodiscard]] std::string path_of(std::string const& identity) const;

 private:
  std::string directory_;
  std::uint64_t fingerprint_;
  resource_ref staging_;
};

}  // namespace spillway::detail
