#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/ops/order_check.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/shuffle/distributed_sort.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <functional>
#include <numeric>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

using clock_type = std::chrono::steady_clock;

/** @brief A column of `values` in `resource`, copied from the host. */
template <typename T>
std::unique_ptr<column> column_from_host(data_type type,
                                         std::vector<T> const& values,
                                         stream_view stream,
                                         resource_ref resource) {
  auto result =
    make_fixed_width_column(type, values.size(), mask_state::UNALLOCATED, stream, resource);
  if (!values.empty()) {
    copy_bytes(result->template mutable_data<T>(),
               resource.kind(),
               values.data(),
               memory_kind::HOST,
               values.size() * sizeof(T),
               stream);
  }
  return result;
}

/** @brief `[u64 metadata bytes][metadata][data]` of `input` packed, in host memory. */
std::vector<std::byte> serialize(table_view const& input,
                                 stream_view stream,
                                 memory_resources mrs) {
  auto const packed =
    detail::pack(input, stream, memory_resources{mrs.temporary(), mrs.temporary()});
  std::uint64_t const metadata_bytes = packed.metadata.size();
  std::vector<std::byte> out(sizeof(metadata_bytes) + packed.metadata.size() + packed.data.size());
  std::memcpy(out.data(), &metadata_bytes, sizeof(metadata_bytes));
  std::memcpy(out.data() + sizeof(metadata_bytes), packed.metadata.data(), packed.metadata.size());
  if (!packed.data.empty()) {
    copy_bytes(out.data() + sizeof(metadata_bytes) + packed.metadata.size(),
               memory_kind::HOST,
               packed.data.data(),
               packed.data.kind(),
               packed.data.size(),
               stream);
  }
  return out;
}

/** @brief A serialized table copied into `resource`, and its view. */
struct received_table {
  buffer data;
  table_view view;
};

received_table deserialize(std::vector<std::byte> const& bytes,
                           int source,
                           stream_view stream,
                           resource_ref resource) {
  std::uint64_t metadata_bytes = 0;
  SPILLWAY_EXPECTS(
    bytes.size() >= sizeof(metadata_bytes),
    "distributed sort: the sample of rank " + std::to_string(source) + " is truncated",
    corruption_error);
  std::memcpy(&metadata_bytes, bytes.data(), sizeof(metadata_bytes));
  SPILLWAY_EXPECTS(
    metadata_bytes <= bytes.size() - sizeof(metadata_bytes),
    "distributed sort: the sample of rank " + std::to_string(source) + " has a bad header",
    corruption_error);
  std::span<std::uint8_t const> const metadata{
    reinterpret_cast<std::uint8_t const*>(bytes.data() + sizeof(metadata_bytes)),
    static_cast<std::size_t>(metadata_bytes)};
  auto const* const data = bytes.data() + sizeof(metadata_bytes) + metadata_bytes;
  auto const data_bytes  = bytes.size() - sizeof(metadata_bytes) - metadata_bytes;
  received_table result;
  if (data_bytes > 0) {
    result.data = buffer(data, memory_kind::HOST, data_bytes, stream, resource);
  }
  result.view = unpack(metadata, result.data.data(), result.data.size(), resource.kind());
  return result;
}

/**
 * @brief Checks, on every rank, that the ranks' outputs in rank order are one sorted sequence:
 * the first and last rows of every rank (empty for a rank without output) go to every rank in
 * one allgather, and an `order_checker` follows them in rank order.
 * @throws logic_error naming the two ranks at the first boundary out of order
 */
void check_rank_boundaries(communicator& comm,
                           std::unique_ptr<table> const& first_row,
                           std::unique_ptr<table> const& last_row,
                           distributed_sort_options const& options,
                           stream_view stream,
                           resource_ref host) {
  auto const on_host = memory_resources{host, host};
  std::vector<std::byte> mine;
  if (first_row != nullptr) {
    std::vector<table_view> const both{first_row->view(), last_row->view()};
    mine = serialize(detail::concatenate(both, stream, on_host)->view(), stream, on_host);
  }
  auto const all = comm.allgather(mine);
  std::vector<std::size_t> ranks(all.size());
  std::iota(ranks.begin(), ranks.end(), std::size_t{0});
  if (options.testing_reverse_rank_order) {
    std::reverse(ranks.begin(), ranks.end());
  }
  std::vector<std::size_t> key_indices(options.key_columns.size());
  std::iota(key_indices.begin(), key_indices.end(), std::size_t{0});
  order_checker check(key_indices, options.orders, host);
  std::optional<std::size_t> previous;  // the last rank before `rank` with output
  for (std::size_t const rank : ranks) {
    if (all[rank].empty()) {
      continue;
    }
    auto const received = deserialize(all[rank], static_cast<int>(rank), stream, host);
    if (check.next(received.view, stream)) {
      SPILLWAY_FAIL("distributed sort: internal error: the first row of rank " +
                      std::to_string(rank) + " sorts before the last row of rank " +
                      std::to_string(previous.value_or(rank)) +
                      "; the ranks' outputs are not one sorted sequence",
                    logic_error);
    }
    previous = rank;
  }
}

/**
 * @brief The `parts - 1` splitter rows of the weighted sample of every rank (keys, then one
 * FLOAT64 weight column), or null when no rank sampled a row.
 */
std::unique_ptr<table> agree_on_splitters(communicator& comm,
                                          std::unique_ptr<table> local_sample,
                                          std::size_t num_keys,
                                          sort_order const& orders,
                                          std::size_t& sampled_rows,
                                          stream_view stream,
                                          memory_resources mrs,
                                          resource_ref host) {
  auto const on_host = memory_resources{host, host};
  std::vector<std::byte> mine;
  if (local_sample && local_sample->num_rows() > 0) {
    mine = serialize(local_sample->view(), stream, on_host);
  }
  local_sample.reset();
  auto const all = comm.allgather(mine);
  std::vector<received_table> parts;
  std::vector<table_view> views;
  for (std::size_t r = 0; r < all.size(); ++r) {
    if (all[r].empty()) {
      continue;
    }
    parts.push_back(deserialize(all[r], static_cast<int>(r), stream, host));
    views.push_back(parts.back().view);
  }
  if (views.empty()) {
    sampled_rows = 0;
    return nullptr;
  }
  auto samples = detail::concatenate(views, stream, on_host);
  parts.clear();
  sampled_rows = samples->num_rows();

  std::vector<std::size_t> key_indices(num_keys);
  std::iota(key_indices.begin(), key_indices.end(), std::size_t{0});
  auto const keys  = samples->view().select(key_indices);
  auto const order = detail::sorted_order(keys, orders, sort_stability::STABLE, stream, on_host);
  auto sorted =
    detail::gather(samples->view(), order->view(), out_of_bounds_policy::FAIL, stream, on_host);
  samples.reset();

  std::vector<double> weights(sorted->num_rows());
  auto const weight_column = sorted->view().column(num_keys);
  copy_bytes(weights.data(),
             memory_kind::HOST,
             weight_column.data<double>(),
             host.kind(),
             weights.size() * sizeof(double),
             stream);
  double const total = std::accumulate(weights.begin(), weights.end(), 0.0);
  auto const ranges  = static_cast<std::size_t>(comm.size());
  std::vector<std::uint64_t> rows;
  double cumulative = 0.0;
  std::size_t i     = 0;
  for (std::size_t j = 1; j < ranges; ++j) {
    double const target = total * static_cast<double>(j) / static_cast<double>(ranges);
    while (i < weights.size() && cumulative + weights[i] < target) {
      cumulative += weights[i++];
    }
    rows.push_back(std::min<std::uint64_t>(i, weights.size() - 1));
  }
  auto const map = column_from_host(type_id::UINT64, rows, stream, host);
  return detail::gather(sorted->view().select(key_indices),
                        map->view(),
                        out_of_bounds_policy::FAIL,
                        stream,
                        memory_resources{mrs.output(), host});
}

/**
 * @brief Rows of a batch that stays in memory while a step reads them (a retryable input: making
 * it spillable does nothing, splitting slices it).
 */
class view_input {
 public:
  explicit view_input(table_view rows) : rows_(std::move(rows)) {}
  [[nodiscard]] std::size_t rows() const noexcept { return rows_.num_rows(); }
  void make_spillable() noexcept {}
  [[nodiscard]] table_view const& materialize() const noexcept { return rows_; }
  [[nodiscard]] std::pair<view_input, view_input> split_at(std::size_t row) const {
    return {view_input{slice(rows_, 0, row)}, view_input{slice(rows_, row, rows_.num_rows())}};
  }

 private:
  table_view rows_;
};

/**
 * @brief At most `limit` rows of a weighted sample (keys, then weights), chosen uniformly; each
 * kept row's weight grows by rows / limit so the total weight stays an unbiased estimate.
 */
std::unique_ptr<table> bound_sample(std::unique_ptr<table> weighted,
                                    std::size_t num_keys,
                                    std::size_t limit,
                                    std::uint64_t seed,
                                    stream_view stream,
                                    memory_resources on_host) {
  auto const rows = weighted->num_rows();
  if (rows <= limit) {
    return weighted;
  }
  auto kept           = detail::sample(weighted->view(), limit, seed, stream, on_host);
  auto* const weights = kept->get_column(num_keys).mutable_data<double>();
  double const scale  = static_cast<double>(rows) / static_cast<double>(kept->num_rows());
  for (std::size_t i = 0; i < kept->num_rows(); ++i) {
    weights[i] *= scale;
  }
  return kept;
}

/// Hands each input batch of a pass to the visitor, in order.
using batch_visits = std::function<void(std::function<void(table_view const&)> const&)>;
/// Adds every non-empty input batch to the shuffle as a map task, in order.
using map_adder = std::function<void(shuffler&)>;

distributed_sort_statistics sort_across(communicator& comm,
                                        spill_store& store,
                                        batch_visits const& sample_pass,
                                        map_adder const& shuffle_pass,
                                        batch_sink const& output,
                                        distributed_sort_options const& options,
                                        stream_view stream,
                                        memory_resources mrs,
                                        resource_ref host) {
  SPILLWAY_EXPECTS(
    !options.key_columns.empty(), "distributed sort: no key columns", invalid_argument);
  SPILLWAY_EXPECTS(options.orders.empty() || options.orders.size() == options.key_columns.size(),
                   "distributed sort: " + std::to_string(options.orders.size()) + " orders for " +
                     std::to_string(options.key_columns.size()) + " key columns",
                   invalid_argument);
  SPILLWAY_EXPECTS(options.samples_per_batch > 0 && options.max_samples > 0,
                   "distributed sort: samples_per_batch and max_samples must be at least 1 (the "
                   "splitters come from the samples)",
                   invalid_argument);
  distributed_sort_statistics stats;
  auto const rank = static_cast<std::uint64_t>(comm.rank());

  // 1. Sample pass: weighted key samples of every batch (keys, then the rows each stands for).
  auto start         = clock_type::now();
  auto const tmp     = memory_resources{mrs.temporary(), mrs.temporary()};
  auto const on_host = memory_resources{host, host};
  std::vector<std::unique_ptr<table>> samples;
  sample_pass([&](table_view const& batch) {
    for (auto const column : options.key_columns) {
      SPILLWAY_EXPECTS(column < batch.num_columns(),
                       "distributed sort: key column " + std::to_string(column) +
                         " is out of range for a batch of " + std::to_string(batch.num_columns()) +
                         " columns",
                       invalid_argument);
    }
    ++stats.input_batches;
    auto const rows = batch.num_rows();
    stats.input_rows += rows;
    if (rows == 0) {
      return;
    }
    auto const seed = options.sample_seed ^ (rank << 40U) ^ stats.input_batches;
    // Sampled on the device, kept on the host: each piece's sample rows stand for its rows.
    auto const sample_piece = [&](view_input& piece) {
      auto const wanted = std::max<std::size_t>(
        1, options.samples_per_batch * piece.rows() / std::max<std::size_t>(rows, 1));
      auto keys = detail::sample(piece.materialize(), wanted, seed, stream, tmp);
      std::vector<double> weights(
        keys->num_rows(),
        static_cast<double>(piece.rows()) / static_cast<double>(keys->num_rows()));
      auto columns = detail::copy(keys->view(), stream, on_host)->release();
      columns.push_back(column_from_host(type_id::FLOAT64, weights, stream, host));
      return std::make_unique<table>(std::move(columns));
    };
    view_input keys{batch.select(options.key_columns)};
    if (options.sort.coordinator != nullptr && options.sort.task != nullptr) {
      for (auto& piece :
           with_retry(*options.sort.coordinator, *options.sort.task, keys, sample_piece)) {
        samples.push_back(std::move(piece));
      }
    } else {
      samples.push_back(sample_piece(keys));
    }
  });
  std::unique_ptr<table> local_sample;
  if (!samples.empty()) {
    std::vector<table_view> views;
    views.reserve(samples.size());
    for (auto const& sample : samples) {
      views.push_back(sample->view());
    }
    local_sample = detail::concatenate(views, stream, on_host);
    samples.clear();
    auto const per_rank =
      std::max<std::size_t>(1, options.max_samples / static_cast<std::size_t>(comm.size()));
    local_sample = bound_sample(std::move(local_sample),
                                options.key_columns.size(),
                                per_rank,
                                options.sample_seed ^ rank,
                                stream,
                                on_host);
  }
  auto const agreed = agree_on_splitters(comm,
                                         std::move(local_sample),
                                         options.key_columns.size(),
                                         options.orders,
                                         stats.sampled_rows,
                                         stream,
                                         on_host,
                                         host);
  if (agreed == nullptr) {
    return stats;  // no rank has a row: every rank saw the same empty allgather
  }
  // Onto the device, under the OOM protocol when there is one (a few rows: never split).
  auto const to_device = [&](view_input& rows) {
    return detail::copy(rows.materialize(), stream, memory_resources{mrs.output()});
  };
  auto const splitters =
    options.sort.coordinator != nullptr && options.sort.task != nullptr
      ? with_retry_no_split(
          *options.sort.coordinator, *options.sort.task, view_input{agreed->view()}, to_device)
      : [&] {
          view_input rows{agreed->view()};
          return to_device(rows);
        }();
  stats.sample_time = clock_type::now() - start;

  // 2. Shuffle pass: every batch is a map task of a RANGE shuffle; partition r is rank r's.
  start = clock_type::now();
  shuffle_options shuffle_config(host);
  shuffle_config.partitions.method      = partition_method::RANGE;
  shuffle_config.partitions.key_columns = options.key_columns;
  shuffle_config.partitions.splitters   = splitters->view();
  shuffle_config.partitions.orders      = options.orders;
  shuffle_config.shuffle_id             = options.shuffle_id;
  shuffle_config.inbox_budget           = options.inbox_budget;
  shuffle_config.testing_shard_loss     = options.testing_shard_loss;
  shuffler shuffle(options.mode, comm, store, shuffle_config, stream, mrs);
  shuffle_pass(shuffle);
  shuffle.finish_maps();
  stats.shuffle_time = clock_type::now() - start;

  // 3. Local sort of this rank's range.
  start                    = clock_type::now();
  auto sort_options        = options.sort;
  sort_options.key_columns = options.key_columns;
  sort_options.orders      = options.orders;
  external_sorter sorter(store, sort_options, stream, mrs, host);
  // Each shard as it is stored or was received (no copy when it is on the device).
  shuffle.take_each_batch(static_cast<std::size_t>(comm.rank()),
                          [&](std::unique_ptr<table> shard) { sorter.push(std::move(shard)); });
  shuffle.close();
  stats.shuffle = shuffle.statistics();
  sorter.finish();
  std::unique_ptr<table> first_row;  // this rank's first and last rows' keys, on the host
  std::unique_ptr<table> last_row;
  while (auto batch = sorter.next()) {
    auto const rows = batch->num_rows();
    if (rows > 0 && sort_options.check_output_order) {
      auto const keys = batch->view().select(options.key_columns);
      if (first_row == nullptr) {
        first_row = detail::copy(slice(keys, 0, 1), stream, memory_resources{host});
      }
      last_row = detail::copy(slice(keys, rows - 1, rows), stream, memory_resources{host});
    }
    stats.output_rows += rows;
    ++stats.output_batches;
    output(batch->view());
  }
  if (sort_options.check_output_order) {
    check_rank_boundaries(comm, first_row, last_row, options, stream, host);
  }
  stats.sort      = sorter.statistics();
  stats.sort_time = clock_type::now() - start;
  return stats;
}

}  // namespace

distributed_sort_statistics distributed_sort(communicator& comm,
                                             spill_store& store,
                                             batch_source const& input,
                                             batch_sink const& output,
                                             distributed_sort_options const& options,
                                             stream_view stream,
                                             memory_resources mrs,
                                             resource_ref host) {
  auto const sample_pass = [&](std::function<void(table_view const&)> const& visit) {
    input([&](std::unique_ptr<table> batch) {
      SPILLWAY_EXPECTS(
        batch != nullptr, "distributed sort: the input gave a null batch", invalid_argument);
      visit(batch->view());
    });
  };
  auto const shuffle_pass = [&](shuffler& shuffle) {
    input([&](std::unique_ptr<table> batch) {
      if (batch->num_rows() > 0) {
        static_cast<void>(shuffle.add_map(batch->view()));  // a copy, kept as the lineage
      }
    });
  };
  return sort_across(comm, store, sample_pass, shuffle_pass, output, options, stream, mrs, host);
}

distributed_sort_statistics distributed_sort(communicator& comm,
                                             spill_store& store,
                                             lent_batches const& input,
                                             batch_sink const& output,
                                             distributed_sort_options const& options,
                                             stream_view stream,
                                             memory_resources mrs,
                                             resource_ref host) {
  SPILLWAY_EXPECTS(input.count == 0 || input.batch != nullptr,
                   "distributed sort: " + std::to_string(input.count) +
                     " lent batches without a function that lends them",
                   invalid_argument);
  std::vector<bool> empty(input.count, false);
  auto const sample_pass = [&](std::function<void(table_view const&)> const& visit) {
    for (std::size_t index = 0; index < input.count; ++index) {
      auto const lent = input.batch(index);
      empty[index]    = lent.rows.num_rows() == 0;
      visit(lent.rows);
    }
  };
  auto const shuffle_pass = [&](shuffler& shuffle) {
    for (std::size_t index = 0; index < input.count; ++index) {
      if (!empty[index]) {
        static_cast<void>(shuffle.add_map(map_view_input{
          [&input, index](stream_view, memory_resources) { return input.batch(index); }}));
      }
    }
  };
  return sort_across(comm, store, sample_pass, shuffle_pass, output, options, stream, mrs, host);
}

}  // namespace spillway
