/**
 * @file push_shuffler.hpp
 * @brief The push shuffle: shards go to their partition's owner as soon as they exist.
 *
 * Protocol, per sender and receiver: a sender thread takes shards in the order map tasks made
 * them and sends each as a header (map, partition, bytes) on the push-header tag and then the
 * packed bytes on the push-data tag. The receiver's inbox thread stores the shard in its spill
 * store and returns a credit (the shard's bytes) on the credit tag. A sender keeps at most
 * `inbox_budget / size()` unacknowledged bytes per receiver (always at least one shard), and
 * waits for credits beyond that: backpressure. `finish_maps` waits until every credit is back,
 * so after it every pushed shard is in its owner's store. A shard that never arrived (dropped,
 * or its receive ran out of memory) or whose copy is corrupt is fetched from its producer as in
 * the pull shuffle, which recomputes it.
 * @see shuffler.hpp for the life of a shuffle and the memory it uses
 */
#pragma once

#include <spillway/shuffle/shuffler.hpp>

namespace spillway {

/** @brief A shuffle whose shards are sent to their owner as they are made. @see shuffler */
class push_shuffler : public shuffler {
 public:
  /** @see shuffler::shuffler */
  push_shuffler(communicator& comm,
                spill_store& store,
                shuffle_options options,
                stream_view stream,
                memory_resources mrs)
    : shuffler(shuffle_mode::PUSH, comm, store, std::move(options), stream, mrs) {}
};

}  // namespace spillway
