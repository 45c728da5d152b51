/**
 * @file pull_shuffler.hpp
 * @brief The pull (scatter) shuffle: map outputs stay with their producer until the partition's
 * owner fetches them.
 *
 * Protocol: the owner of partition p asks each producer for its shard of p, one request at a
 * time (a request message on the shuffle's request tag, the packed shard back on its reply tag;
 * the receive is posted before the request is sent, so a producer's reply never waits on a
 * reader that waits on someone else). The producer's service thread answers and then releases
 * its copy: each shard has exactly one reader. Shards of this rank are taken without messages.
 * @see shuffler.hpp for the life of a shuffle and the memory it uses
 */
#pragma once

#include <spillway/shuffle/shuffler.hpp>

namespace spillway {

/** @brief A shuffle whose shards are fetched by their owner. @see shuffler */
class pull_shuffler : public shuffler {
 public:
  /** @see shuffler::shuffler */
  pull_shuffler(communicator& comm,
                spill_store& store,
                shuffle_options options,
                stream_view stream,
                memory_resources mrs)
    : shuffler(shuffle_mode::PULL, comm, store, std::move(options), stream, mrs) {}
};

}  // namespace spillway
