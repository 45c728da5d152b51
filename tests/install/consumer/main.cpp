/**
 * @file main.cpp
 * @brief A program outside spillway's build that uses its installed package: it sorts a few
 * thousand random int64 keys with a string payload by key on an emulated device far smaller than
 * the input, so that the sort spills, and checks the output. Exits non-zero when the output is out
 * of order, loses or changes a row, or nothing spilled.
 *
 * Usage: spillway_consumer SPILL_DIRECTORY
 */
#include <spillway/core/ids.hpp>
#include <spillway/core/units.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/ooc/external_sort.hpp>
#include <spillway/runtime/device_environment.hpp>
#include <spillway/spill/spill_tier.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/table.hpp>

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <iostream>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace spillway;

constexpr std::size_t BATCHES    = 8;
constexpr std::size_t BATCH_ROWS = 500;

/// The payload of the row with `key`: the output is checked to carry each key's own payload.
std::string payload_of(std::int64_t key) { return "row-" + std::to_string(key); }

/// A batch of `keys` (INT64) and their payloads (STRING), in host memory.
std::unique_ptr<table> make_batch(std::vector<std::int64_t> const& keys, resource_ref host) {
  auto key_column = make_fixed_width_column(
    data_type{type_id::INT64}, keys.size(), mask_state::UNALLOCATED, default_stream(), host);
  std::vector<std::string> payloads;
  std::size_t chars = 0;
  for (std::size_t row = 0; row < keys.size(); ++row) {
    key_column->mutable_data<std::int64_t>()[row] = keys[row];
    payloads.push_back(payload_of(keys[row]));
    chars += payloads.back().size();
  }
  auto payload_column =
    make_strings_column(keys.size(), chars, mask_state::UNALLOCATED, default_stream(), host);
  std::int64_t cursor                  = 0;
  payload_column->mutable_offsets()[0] = 0;
  for (std::size_t row = 0; row < keys.size(); ++row) {
    std::memcpy(
      payload_column->mutable_chars() + cursor, payloads[row].data(), payloads[row].size());
    cursor += static_cast<std::int64_t>(payloads[row].size());
    payload_column->mutable_offsets()[row + 1] = cursor;
  }
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(std::move(key_column));
  columns.push_back(std::move(payload_column));
  return std::make_unique<table>(std::move(columns));
}

int run(std::string const& spill_directory) {
  device_environment_options environment_options;
  environment_options.backend       = device_backend::EMULATED;
  environment_options.device_memory = 128_KiB;
  environment_options.host_memory   = 64_KiB;
  environment_options.spill_root    = spill_directory;
  device_environment environment{environment_options};
  device_task sort_task{environment, task_id{1}};
  task_context::thread_binding const binding{sort_task.context()};

  external_sort_options options;
  options.key_columns        = {0};
  options.chunks_per_batch   = 4;
  options.merge_budget_bytes = 32_KiB;
  options.output_batch_bytes = 16_KiB;
  options.coordinator        = &environment.coordinator();
  options.task               = &sort_task.context();
  external_sorter sorter{
    environment.store(), options, environment.stream(), environment.device(), environment.host()};

  std::mt19937_64 engine{20240601};
  std::size_t input_rows = 0;
  for (std::size_t index = 0; index < BATCHES; ++index) {
    std::vector<std::int64_t> keys(BATCH_ROWS);
    for (auto& key : keys) {
      key = static_cast<std::int64_t>(engine());
    }
    auto const host_batch = make_batch(keys, environment.host());
    sorter.push(copy(host_batch->view(), environment.stream(), environment.device()));
    input_rows += keys.size();
  }
  sorter.finish();

  std::size_t output_rows = 0;
  bool first              = true;
  std::int64_t previous   = 0;
  while (auto batch = sorter.next()) {
    auto const on_host = copy(batch->view(), environment.stream(), environment.host());
    batch.reset();
    auto const keys     = on_host->view().column(0);
    auto const payloads = on_host->view().column(1);
    for (std::size_t row = 0; row < on_host->num_rows(); ++row) {
      auto const key = keys.data<std::int64_t>()[row];
      if (!first && key < previous) {
        std::cerr << "out of order at output row " << output_rows + row << ": " << key << " after "
                  << previous << '\n';
        return 1;
      }
      if (payloads.string_at(row) != payload_of(key)) {
        std::cerr << "output row " << output_rows + row << " has key " << key << " but payload "
                  << payloads.string_at(row) << '\n';
        return 1;
      }
      first    = false;
      previous = key;
    }
    output_rows += on_host->num_rows();
  }
  if (output_rows != input_rows) {
    std::cerr << "sorted " << input_rows << " rows but got " << output_rows << " back\n";
    return 1;
  }
  auto const spills        = environment.store().statistics();
  auto const spilled_bytes = spills.between(spill_tier::DEVICE, spill_tier::HOST).raw_bytes +
                             spills.between(spill_tier::DEVICE, spill_tier::DISK).raw_bytes;
  if (spilled_bytes == 0) {
    std::cerr << "nothing spilled: the device budget no longer forces the sort to spill\n";
    return 1;
  }
  std::cout << "sorted " << output_rows << " rows, " << spilled_bytes
            << " bytes spilled from the device, peak device bytes "
            << environment.device_peak_bytes() << '\n';
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: spillway_consumer SPILL_DIRECTORY\n";
    return 2;
  }
  try {
    return run(argv[1]);
  } catch (std::exception const& failure) {
    std::cerr << "spillway_consumer: " << failure.what() << '\n';
    return 1;
  }
}
