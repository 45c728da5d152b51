/**
 * @file shuffler.cpp
 * @brief The public `shuffler`, forwarding to the rank's `shuffle_engine` (shuffle_engine.hpp).
 */
#include "shuffle/shuffle_engine.hpp"

#include <spillway/shuffle/shuffler.hpp>

#include <memory>
#include <string>
#include <utility>

namespace spillway {

shuffler::shuffler(shuffle_mode mode,
                   communicator& comm,
                   spill_store& store,
                   shuffle_options options,
                   stream_view stream,
                   memory_resources mrs)
  : impl_(std::make_unique<detail::shuffle_engine>(
      mode, comm, store, std::move(options), stream, mrs)) {}

shuffler::~shuffler() = default;

std::size_t shuffler::add_map(map_input input) { return impl_->add_map(std::move(input)); }
std::size_t shuffler::add_map(table_view const& batch) { return impl_->add_map(batch); }
std::size_t shuffler::add_map(map_input input, std::string const& identity) {
  return impl_->add_map(std::move(input), identity);
}
std::size_t shuffler::add_map(map_view_input input) { return impl_->add_map(std::move(input)); }
std::size_t shuffler::add_map(map_view_input input, std::string const& identity) {
  return impl_->add_map(std::move(input), identity);
}
std::size_t shuffler::reserve_map() { return impl_->reserve_map(); }
std::size_t shuffler::add_reserved_map(std::size_t reserved,
                                       map_input input,
                                       std::string const& identity) {
  return impl_->add_reserved_map(reserved, std::move(input), identity);
}
void shuffler::finish_maps() { impl_->finish_maps(); }
shard_directory const& shuffler::directory() const { return impl_->directory(); }
std::vector<std::size_t> shuffler::owned_partitions() const { return impl_->owned_partitions(); }
void shuffler::for_each_batch(std::size_t partition,
                              std::function<void(table_view const&)> const& consume) {
  impl_->for_each_batch(partition, consume);
}
void shuffler::take_each_batch(std::size_t partition,
                               std::function<void(std::unique_ptr<table>)> const& consume) {
  impl_->take_each_batch(partition, consume);
}
std::unique_ptr<table> shuffler::read_partition(std::size_t partition) {
  return impl_->read_partition(partition);
}
void shuffler::close() { impl_->close(); }
shuffle_statistics shuffler::statistics() const { return impl_->statistics(); }
std::size_t shuffler::num_partitions() const noexcept { return impl_->num_partitions(); }
shuffle_mode shuffler::mode() const noexcept { return impl_->mode(); }

}  // namespace spillway
