/**
 * The table of every operator in spillway, run with the default-resource validation switch on
 * and only explicit resources. For each operator it checks, by statistics on each resource, that
 * what the operator returns was allocated from `output` (and nothing else is left there), and
 * that scratch came from `temporary` and was all freed before returning. Each layer adds its
 * operators to `operator_cases()`.
 */
#include "testing/cuda_testing.hpp"
#include "testing/default_resource_guard.hpp"
#include "testing/table_generators.hpp"

#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/ops/bounds.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/partition.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>
#include <spillway/table/size_estimate.hpp>

#include <gtest/gtest.h>

#include <any>
#include <cctype>
#include <functional>
#include <map>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/// What an operator case returns: the objects it produced (kept alive while the statistics are
/// checked) and the bytes those objects hold.
struct operator_result {
  std::shared_ptr<void> outputs;
  std::size_t output_bytes = 0;
};

/// How much scratch an operator is expected to take from `temporary`.
enum class scratch : std::uint8_t {
  NONE,  ///< the operator writes straight into its outputs
  SOME,  ///< the operator needs scratch: at least one allocation from temporary
};

struct operator_case {
  std::string name;
  scratch expected_scratch;
  /// Runs the operator on `input` (allocated elsewhere) with `mrs`.
  std::function<operator_result(table_view const& input, memory_resources mrs)> run;
};

/// Prints the operator's name (the case in test listings and failures).
void PrintTo(operator_case const& c, std::ostream* os) { *os << c.name; }

template <typename T>
operator_result owned(std::unique_ptr<T> object, std::size_t bytes) {
  return operator_result{std::shared_ptr<void>(std::move(object)), bytes};
}

/// Slices of a table between successive `bounds`, each sorted (stably) by `key_columns`.
struct sorted_pieces {
  sorted_pieces(table_view const& input,
                std::vector<std::size_t> const& key_columns,
                std::vector<std::size_t> const& bounds,
                host_memory_resource& memory) {
    for (std::size_t i = 0; i + 1 < bounds.size(); ++i) {
      table_view const part = slice(input, bounds[i], bounds[i + 1]);
      tables.push_back(
        sort(part, part.select(key_columns), {}, sort_stability::STABLE, default_stream(), memory));
      views.push_back(tables.back()->view());
    }
  }
  std::vector<std::unique_ptr<table>> tables;
  std::vector<table_view> views;
};

std::vector<operator_case> operator_cases() {
  std::vector<operator_case> cases;
  cases.push_back(
    {"copy(column)", scratch::NONE, [](table_view const& input, memory_resources mrs) {
       auto result = copy(input.column(0), default_stream(), mrs);
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back({"copy(table)", scratch::NONE, [](table_view const& input, memory_resources mrs) {
                     auto result =
                       copy(slice(input, 3, input.num_rows() - 5), default_stream(), mrs);
                     auto bytes = result->allocated_bytes();
                     return owned(std::move(result), bytes);
                   }});
  cases.push_back({"concatenate", scratch::NONE, [](table_view const& input, memory_resources mrs) {
                     std::vector<table_view> pieces{
                       slice(input, 0, 10), slice(input, 17, input.num_rows()), input};
                     auto result = concatenate(pieces, default_stream(), mrs);
                     auto bytes  = result->allocated_bytes();
                     return owned(std::move(result), bytes);
                   }});
  for (auto policy : {out_of_bounds_policy::FAIL, out_of_bounds_policy::NULLIFY}) {
    cases.push_back({policy == out_of_bounds_policy::FAIL ? "gather(FAIL)" : "gather(NULLIFY)",
                     scratch::NONE,
                     [policy](table_view const& input, memory_resources mrs) {
                       host_memory_resource map_memory;
                       std::vector<std::int64_t> indices;
                       for (std::size_t row = 0; row < input.num_rows(); row += 3) {
                         indices.push_back(static_cast<std::int64_t>(input.num_rows() - 1 - row));
                       }
                       if (policy == out_of_bounds_policy::NULLIFY) {
                         indices.push_back(static_cast<std::int64_t>(input.num_rows()) + 4);
                       }
                       auto map = testing::make_fixed_column(
                         data_type{type_id::INT64}, indices, {}, map_memory);
                       auto result = gather(input, map->view(), policy, default_stream(), mrs);
                       auto bytes  = result->allocated_bytes();
                       return owned(std::move(result), bytes);
                     }});
  }
  cases.push_back({"pack", scratch::NONE, [](table_view const& input, memory_resources mrs) {
                     auto packed = std::make_unique<packed_columns>(
                       pack(slice(input, 1, input.num_rows()), default_stream(), mrs));
                     auto bytes = packed->data.size();
                     return owned(std::move(packed), bytes);
                   }});
  cases.push_back({"unpack, slice, split, estimate_size (views only)",
                   scratch::NONE,
                   [](table_view const& input, memory_resources) {
                     host_memory_resource pack_memory;
                     auto packed           = pack(input, default_stream(), pack_memory);
                     table_view const view = unpack(packed);
                     std::vector<std::size_t> const splits{2, 5};
                     auto const pieces = split(slice(view, 1, view.num_rows()), splits);
                     EXPECT_EQ(pieces.size(), 3U);
                     EXPECT_GT(estimate_size(view), 0U);
                     return operator_result{};
                   }});
  cases.push_back(
    {"sorted_order", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       std::vector<std::size_t> const key_columns{12, 3, 10};  // STRING, INT32, FLOAT64
       auto result = sorted_order(input.select(key_columns),
                                  {{order::DESCENDING, null_order::AFTER}, {}, {}},
                                  sort_stability::STABLE,
                                  default_stream(),
                                  mrs);
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back(
    {"sort", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       std::vector<std::size_t> const key_columns{4, 12};
       auto result = sort(
         input, input.select(key_columns), {}, sort_stability::UNSTABLE, default_stream(), mrs);
       auto bytes = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back({"merge", scratch::SOME, [](table_view const& input, memory_resources mrs) {
                     host_memory_resource piece_memory;
                     std::vector<std::size_t> const key_columns{2, 12};
                     sorted_pieces const pieces(
                       input, key_columns, {0, 100, 100, input.num_rows()}, piece_memory);
                     auto result =
                       spillway::merge(pieces.views, key_columns, {}, default_stream(), mrs);
                     auto bytes = result->allocated_bytes();
                     return owned(std::move(result), bytes);
                   }});
  cases.push_back(
    {"detail::merge_order", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       host_memory_resource piece_memory;
       std::vector<std::size_t> const key_columns{2, 12};
       sorted_pieces const pieces(input, key_columns, {0, 100, input.num_rows()}, piece_memory);
       auto result = detail::merge_order(pieces.views, key_columns, {}, default_stream(), mrs);
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back(
    {"detail::sorted_sources", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       std::vector<std::size_t> const key_columns{4, 1};
       std::vector<table_view> const keys{slice(input, 0, 100).select(key_columns),
                                          slice(input, 100, input.num_rows()).select(key_columns)};
       auto result = detail::sorted_sources(keys, {}, default_stream(), mrs);
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back(
    {"detail::sorted_key_values", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       // An INT64 key and a FLOAT64 value without nulls, as the input's rows, in two tables.
       host_memory_resource pair_memory;
       std::size_t const rows = input.num_rows();
       auto const key =
         testing::random_column(data_type{type_id::INT64}, rows, 7, 0.0, pair_memory);
       auto const value =
         testing::random_column(data_type{type_id::FLOAT64}, rows, 8, 0.0, pair_memory);
       std::vector<table_view> const keys{slice(table_view{key->view()}, 0, 100),
                                          slice(table_view{key->view()}, 100, rows)};
       std::vector<column_view> const values{slice(value->view(), 0, 100),
                                             slice(value->view(), 100, rows)};
       auto [sorted_keys, sorted_values] =
         detail::sorted_key_values(keys, {}, values, default_stream(), mrs);
       std::vector<std::unique_ptr<column>> columns;
       columns.push_back(std::move(sorted_keys));
       columns.push_back(std::move(sorted_values));
       auto result = std::make_unique<table>(std::move(columns));
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  for (bool const lower : {true, false}) {
    cases.push_back(
      {lower ? "lower_bound" : "upper_bound",
       scratch::NONE,
       [lower](table_view const& input, memory_resources mrs) {
         host_memory_resource haystack_memory;
         std::vector<std::size_t> const key_columns{1, 12};
         table_view const keys = input.select(key_columns);
         auto const haystack =
           sort(keys, keys, {}, sort_stability::UNSTABLE, default_stream(), haystack_memory);
         auto result = lower ? lower_bound(haystack->view(), keys, {}, default_stream(), mrs)
                             : upper_bound(haystack->view(), keys, {}, default_stream(), mrs);
         auto bytes  = result->allocated_bytes();
         return owned(std::move(result), bytes);
       }});
  }
  cases.push_back({"sample", scratch::SOME, [](table_view const& input, memory_resources mrs) {
                     auto result = sample(input, 40, 7, default_stream(), mrs);
                     auto bytes  = result->allocated_bytes();
                     return owned(std::move(result), bytes);
                   }});
  cases.push_back(
    {"quantile_splitters", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       auto result = quantile_splitters(input, 8, default_stream(), mrs);
       auto bytes  = result->allocated_bytes();
       return owned(std::move(result), bytes);
     }});
  cases.push_back({"hash_rows", scratch::NONE, [](table_view const& input, memory_resources mrs) {
                     std::vector<std::size_t> const key_columns{2, 10, 12};
                     auto result = hash_rows(input.select(key_columns), 1, default_stream(), mrs);
                     auto bytes  = result->allocated_bytes();
                     return owned(std::move(result), bytes);
                   }});
  cases.push_back(
    {"hash_partition", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       std::vector<std::size_t> const key_columns{4, 12};
       auto result = hash_partition(input, key_columns, 16, 0, default_stream(), mrs);
       auto bytes  = result.rows->allocated_bytes();
       return owned(std::move(result.rows), bytes);
     }});
  cases.push_back(
    {"range_partition", scratch::SOME, [](table_view const& input, memory_resources mrs) {
       host_memory_resource splitter_memory;
       std::vector<std::size_t> const key_columns{3};
       table_view const keys = input.select(key_columns);
       auto const sorted =
         sort(keys, keys, {}, sort_stability::UNSTABLE, default_stream(), splitter_memory);
       auto const splitters =
         quantile_splitters(sorted->view(), 8, default_stream(), splitter_memory);
       auto result =
         range_partition(input, key_columns, splitters->view(), {}, default_stream(), mrs);
       auto bytes = result.rows->allocated_bytes();
       return owned(std::move(result.rows), bytes);
     }});
  // The one-pass partition-and-pack operators: frames from output, partition ids from temporary.
  auto const frames = [](std::vector<packed_partition> parts) {
    std::size_t bytes = 0;
    for (auto const& part : parts) {
      bytes += part.frame.size();
    }
    return owned(std::make_unique<std::vector<packed_partition>>(std::move(parts)), bytes);
  };
  cases.push_back(
    {"hash_partition_and_pack",
     scratch::SOME,
     [frames](table_view const& input, memory_resources mrs) {
       std::vector<std::size_t> const key_columns{4, 12};
       return frames(hash_partition_and_pack(input, key_columns, 16, 0, 64, default_stream(), mrs));
     }});
  cases.push_back({"range_partition_and_pack",
                   scratch::SOME,
                   [frames](table_view const& input, memory_resources mrs) {
                     host_memory_resource splitter_memory;
                     std::vector<std::size_t> const key_columns{3};
                     table_view const keys = input.select(key_columns);
                     auto const sorted     = sort(
                       keys, keys, {}, sort_stability::UNSTABLE, default_stream(), splitter_memory);
                     auto const splitters =
                       quantile_splitters(sorted->view(), 8, default_stream(), splitter_memory);
                     return frames(range_partition_and_pack(
                       input, key_columns, splitters->view(), {}, 0, default_stream(), mrs));
                   }});
  cases.push_back(
    {"pack_partitions", scratch::NONE, [frames](table_view const& input, memory_resources mrs) {
       host_memory_resource map_memory;
       std::vector<std::uint8_t> ids;
       for (std::size_t row = 0; row < input.num_rows(); ++row) {
         ids.push_back(static_cast<std::uint8_t>((row * 7) % 5));
       }
       auto const map = testing::make_fixed_column(data_type{type_id::UINT8}, ids, {}, map_memory);
       return frames(pack_partitions(input, map->view(), 5, 0, default_stream(), mrs));
     }});
  cases.push_back(
    {"detail::pack_at", scratch::NONE, [](table_view const& input, memory_resources mrs) {
       auto packed = std::make_unique<packed_partition>(
         detail::pack_at(slice(input, 1, input.num_rows()), 128, default_stream(), mrs));
       auto const bytes = packed->frame.size();
       return owned(std::move(packed), bytes);
     }});
  return cases;
}

class ResourceValidation : public ::testing::TestWithParam<operator_case> {};

/// Runs `test_case` on `input` with the validation switch on and counted resources over
/// `device`, and checks where its outputs and scratch came from.
void check_case(operator_case const& test_case,
                scratch expected_scratch,
                table_view const& input,
                memory_resource& device) {
  statistics_resource_adaptor output{device};
  statistics_resource_adaptor temporary{device};
  memory_resources const mrs =
    memory_resources::builder{}.output(output).temporary(temporary).build();

  testing::default_resource_guard const guard;
  {
    operator_result result = test_case.run(input, mrs);
    EXPECT_EQ(output.statistics().current_bytes, result.output_bytes)
      << test_case.name << ": bytes outstanding on the output resource are not the output's";
    EXPECT_EQ(temporary.statistics().current_bytes, 0U)
      << test_case.name << ": scratch was not freed before returning";
    if (expected_scratch == scratch::NONE) {
      EXPECT_EQ(temporary.statistics().total_count, 0U)
        << test_case.name << ": allocated scratch but is listed as needing none";
    } else {
      EXPECT_GT(temporary.statistics().total_count, 0U)
        << test_case.name << ": listed as needing scratch but took none from temporary";
    }
  }
  EXPECT_EQ(output.statistics().current_bytes, 0U) << test_case.name;
}

TEST_P(ResourceValidation, OutputsFromOutputScratchFromTemporaryNeverTheDefault) {
  operator_case const& test_case = GetParam();
  host_memory_resource input_memory;
  auto const input = testing::random_table(testing::all_types(), 257, 42, 0.2, input_memory);
  emulated_device_memory_resource device;
  check_case(test_case, test_case.expected_scratch, input->view(), device);
}

/// The operators with CUDA kernels, on a table in device memory, with the scratch the device
/// versions take: a device gather copies and checks its map in scratch, a device hash its key
/// columns' descriptions. (The merge, bounds and range cases build sorted inputs in host memory,
/// so they run on the device in ops_tests.)
TEST(CudaResourceValidation, DeviceOperatorsUseOnlyTheirResources) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  std::map<std::string, scratch> const on_device{{"copy(column)", scratch::NONE},
                                                 {"copy(table)", scratch::NONE},
                                                 {"concatenate", scratch::NONE},
                                                 {"gather(FAIL)", scratch::SOME},
                                                 {"gather(NULLIFY)", scratch::SOME},
                                                 {"pack", scratch::NONE},
                                                 {"sorted_order", scratch::SOME},
                                                 {"sort", scratch::SOME},
                                                 {"sample", scratch::SOME},
                                                 {"quantile_splitters", scratch::SOME},
                                                 {"hash_rows", scratch::SOME},
                                                 {"hash_partition", scratch::SOME}};
  host_memory_resource input_memory;
  auto const host_input = testing::random_table(testing::all_types(), 257, 42, 0.2, input_memory);
  testing::cuda_fixture_parts parts;
  auto const input = testing::to_device(host_input->view(), parts);
  std::size_t ran  = 0;
  for (auto const& test_case : operator_cases()) {
    auto const found = on_device.find(test_case.name);
    if (found != on_device.end()) {
      ++ran;
      check_case(test_case, found->second, input->view(), parts.device);
    }
  }
  EXPECT_EQ(ran, on_device.size()) << "an operator of the device list is missing from the table";
}

TEST(ResourceValidationSwitch, DefaultArgumentsThrowWhileTheSwitchIsOn) {
  host_memory_resource memory;
  auto const input = testing::random_table({data_type{type_id::INT32}}, 10, 1, 0.0, memory);
  testing::default_resource_guard const guard;
  EXPECT_THROW((void)copy(input->view()), logic_error);
  EXPECT_THROW((void)pack(input->view()), logic_error);
}

INSTANTIATE_TEST_SUITE_P(EveryOperator,
                         ResourceValidation,
                         ::testing::ValuesIn(operator_cases()),
                         [](auto const& param_info) {
                           // Each run of other characters becomes one '_', none at the end.
                           std::string name;
                           bool separate = false;
                           for (char c : param_info.param.name) {
                             if (std::isalnum(static_cast<unsigned char>(c)) == 0) {
                               separate = !name.empty();
                               continue;
                             }
                             if (separate) {
                               name += '_';
                               separate = false;
                             }
                             name += c;
                           }
                           return name;
                         });

}  // namespace
}  // namespace spillway
