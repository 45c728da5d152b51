// Reading into and writing from CUDA device memory: the formats decode and encode rows with the
// CPU, so a CUDA output is filled by copies of host batches and a CUDA input is copied to host
// memory first. Without a GPU the CUDA tests skip; the checks that host and emulated device
// memory take the CPU path (no probe, no copy) run everywhere.
#include "io/io_detail.hpp"
#include "io_test_support.hpp"
#include "table/cuda/device_table.hpp"
#include "testing/cuda_testing.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <string>

namespace spillway::testing {
namespace {

class CudaIo : public io_test {};

TEST_F(CudaIo, HostAndEmulatedDeviceMemoryAreWrittenByTheCpu) {
  emulated_device_memory_resource emulated{64_MiB};
  statistics_resource_adaptor counted{emulated};
  statistics_resource_adaptor counted_host{host_};
  // Host memory is never probed; device memory only when a GPU could be behind it, and the
  // probe's block is freed at once.
  EXPECT_FALSE(detail::gives_cuda_memory(counted_host, default_stream()));
  EXPECT_EQ(counted_host.statistics().total_count, 0U);
  EXPECT_FALSE(detail::gives_cuda_memory(counted, default_stream()));
  EXPECT_EQ(counted.statistics().total_count, cuda_device_count() > 0 ? 1U : 0U);
  EXPECT_EQ(counted.statistics().current_bytes, 0U);
  auto const input = every_type_table(100, 3, {data_type{type_id::INT64}});
  EXPECT_EQ(detail::host_copy_if_on_device(
              input->view(), default_stream(), memory_resources{host_}, "test"),
            nullptr);
}

TEST_F(CudaIo, CsvReadsIntoAndWritesFromGpuMemory) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_fixture_parts parts;
  auto const stream   = parts.stream.view();
  auto const expected = every_type_table(5000, 7);
  auto const count    = expected->num_columns();
  auto const on_gpu   = to_device(expected->view(), parts);
  memory_resources const gpu_output{parts.device, host_};
  // Written from the GPU's memory (a copy to the host first), then read into it.
  write_csv(on_gpu->view(), names(count), path("t.csv"), {}, stream, gpu_output);
  table_schema schema;
  for (std::size_t index = 0; index < count; ++index) {
    schema.push_back({names(count)[index], expected->view().column(index).type()});
  }
  csv_read_options options;
  options.schema  = schema;
  auto const read = read_csv(path("t.csv"), options, stream, gpu_output);
  EXPECT_TRUE(detail::cuda::on_device(read->view()));
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), to_host(read->view(), parts, host_)->view());
}

TEST_F(CudaIo, ParquetBatchesReadIntoGpuMemoryAndABatchWriterTakesThem) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  if (!arrow_tests_enabled()) {
    GTEST_SKIP() << arrow_skip_reason();
  }
  cuda_fixture_parts parts;
  auto const stream   = parts.stream.view();
  auto const expected = every_type_table(20000, 11, parquet_types());
  auto const count    = expected->num_columns();
  write_parquet(expected->view(), names(count), path("in.parquet"), {}, stream, {host_});
  memory_resources const gpu_output{parts.device, host_};
  parquet_read_options small_batches;
  small_batches.target_batch_bytes = 64_KiB;
  auto reader = open_parquet(path("in.parquet"), small_batches, stream, gpu_output);
  batch_writer_options options;
  options.directory = path("out");
  batch_writer writer{options, names(count), stream, gpu_output};
  bool by_view = true;
  while (auto batch = reader->next()) {
    EXPECT_TRUE(detail::cuda::on_device(batch->view()));
    if (by_view) {  // borrowed rows and handed-over tables, alternately
      writer.write(batch->view());
    } else {
      writer.write(std::move(batch));
    }
    by_view = !by_view;
  }
  auto const files = writer.close();
  ASSERT_EQ(files.size(), 1U);
  auto const back = read_parquet(files.front(), {}, stream, {host_});
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
}

TEST_F(CudaIo, AGpuOutputNeedsAHostTemporaryResource) {
  SPILLWAY_REQUIRE_CUDA_DEVICE();
  cuda_fixture_parts parts;
  auto const expected = every_type_table(100, 5, {data_type{type_id::INT64}});
  write_csv(expected->view(), names(1), path("t.csv"), {}, default_stream(), {host_});
  memory_resources const all_gpu{parts.device, parts.device};
  EXPECT_THROW((void)open_csv(path("t.csv"), {}, parts.stream.view(), all_gpu), invalid_argument);
  auto const on_gpu = to_device(expected->view(), parts);
  EXPECT_THROW(write_csv(on_gpu->view(), names(1), path("u.csv"), {}, parts.stream.view(), all_gpu),
               invalid_argument);
}

}  // namespace
}  // namespace spillway::testing
