// The spill store over real device memory: buffers and tables of a CUDA device move to pinned
// host memory, to disk and back, compressed or not, and come back equal. Without a GPU they skip.
#include "spill_test_fixture.hpp"
#include "testing/cuda_testing.hpp"
#include "testing/expect_tables_equal.hpp"

#include <spillway/memory/copy.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/spill/spillable_buffer.hpp>
#include <spillway/spill/spillable_table.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <optional>
#include <vector>

namespace spillway {
namespace {

class CudaSpillTest : public testing::spill_fixture {
 protected:
  void SetUp() override {
    SPILLWAY_REQUIRE_CUDA_DEVICE();
    spill_fixture::SetUp();
    parts_.emplace();
    pinned_.emplace();
    pinned_pool_.emplace(*pinned_, 64_MiB);
  }

  spill_store_options cuda_options(codec host_codec) {
    spill_store_options result(parts_->device, *pinned_pool_);
    result.host_budget               = 48_MiB;
    result.spill_root                = root_.string();
    result.host_codec                = host_codec;
    result.disk_codec                = codec::LZ4;
    result.stream                    = parts_->stream.view();
    result.compress_only_when_faster = false;
    return result;
  }

  std::optional<testing::cuda_fixture_parts> parts_;
  std::optional<pinned_host_memory_resource> pinned_;
  std::optional<pool_memory_resource> pinned_pool_;
};

TEST_F(CudaSpillTest, DeviceBuffersRoundTripThroughPinnedHostAndDisk) {
  for (codec const host_codec : {codec::NONE, codec::LZ4}) {
    SCOPED_TRACE(to_string(host_codec));
    spill_store store(cuda_options(host_codec));
    // Compressible and incompressible halves, larger than one staging piece.
    std::vector<std::uint8_t> bytes(9_MiB + 123);
    std::uint64_t state = 7;
    for (std::size_t index = 0; index < bytes.size(); ++index) {
      state        = state * 6364136223846793005ULL + 1442695040888963407ULL;
      bytes[index] = index < bytes.size() / 2 ? static_cast<std::uint8_t>(index % 7)
                                              : static_cast<std::uint8_t>(state >> 56);
    }
    buffer on_device{
      bytes.data(), memory_kind::HOST, bytes.size(), parts_->stream.view(), parts_->device};
    ASSERT_TRUE(is_cuda_device_pointer(on_device.data()));
    auto handle           = store.make_spillable(std::move(on_device), 0);
    auto const check_back = [&] {
      auto const pinned = handle.acquire();
      ASSERT_TRUE(is_cuda_device_pointer(pinned.data()));
      std::vector<std::uint8_t> back(bytes.size());
      copy_bytes(back.data(),
                 memory_kind::HOST,
                 pinned.data(),
                 memory_kind::DEVICE,
                 back.size(),
                 parts_->stream.view());
      EXPECT_EQ(back, bytes);
    };
    EXPECT_EQ(store.spill(bytes.size(), spill_tier::DEVICE), bytes.size());
    EXPECT_EQ(handle.tier(), spill_tier::HOST);
    check_back();
    EXPECT_EQ(store.spill(bytes.size(), spill_tier::DEVICE), bytes.size());
    (void)store.spill(bytes.size(), spill_tier::HOST);
    store.wait_for_io();
    EXPECT_EQ(handle.tier(), spill_tier::DISK);
    check_back();
  }
}

TEST_F(CudaSpillTest, DeviceTablesRoundTripThroughPinnedHostAndDisk) {
  host_memory_resource host;
  auto const expected = testing::random_table(testing::all_types(), 20000, 31, 0.1, host);
  spill_store store(cuda_options(codec::NONE));
  auto handle           = store.make_spillable(testing::to_device(expected->view(), *parts_), 0);
  auto const check_back = [&] {
    auto const pinned = handle.acquire();
    auto const back   = testing::to_host(pinned.view(), *parts_, host);
    SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), back->view());
  };
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  EXPECT_EQ(handle.tier(), spill_tier::HOST);
  check_back();
  EXPECT_GT(store.spill(1, spill_tier::DEVICE), 0U);
  (void)store.spill(1_GiB, spill_tier::HOST);
  store.wait_for_io();
  EXPECT_EQ(handle.tier(), spill_tier::DISK);
  check_back();
}

}  // namespace
}  // namespace spillway
