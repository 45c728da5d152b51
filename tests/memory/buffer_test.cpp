/**
 * @file buffer_test.cpp
 * @brief The owning buffer: where its memory comes from, its kind, and that it frees exactly once.
 */
#include "testing/resource_conformance.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/// Checks the bytes and allocations outstanding through `stats`, and that nothing was freed twice.
void expect_outstanding(statistics_resource_adaptor const& stats,
                        std::size_t bytes,
                        std::size_t count) {
  EXPECT_EQ(stats.statistics().current_bytes, bytes);
  EXPECT_EQ(stats.statistics().current_count, count);
}

TEST(Buffer, DefaultConstructedIsEmpty) {
  buffer const empty;
  EXPECT_TRUE(empty.empty());
  EXPECT_EQ(empty.size(), 0U);
  EXPECT_EQ(empty.data(), nullptr);
  EXPECT_EQ(empty.resource(), nullptr);
  EXPECT_EQ(empty.kind(), memory_kind::HOST);
  EXPECT_TRUE(empty.stream().is_default());
}

TEST(Buffer, AllocatesFromItsResource) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  int queue = 0;
  stream_view const stream{&queue};
  {
    buffer allocated{100, stream, stats};
    EXPECT_EQ(allocated.size(), 100U);
    EXPECT_FALSE(allocated.empty());
    EXPECT_EQ(allocated.kind(), memory_kind::DEVICE);
    EXPECT_EQ(allocated.resource(), &stats);
    EXPECT_EQ(allocated.stream(), stream);
    ASSERT_NE(allocated.data(), nullptr);
    EXPECT_TRUE(test::is_aligned(allocated.data(), DEFAULT_ALIGNMENT));
    test::fill_block(allocated.data(), 100, 0x77);
    EXPECT_TRUE(test::block_holds(allocated.data(), 100, 0x77));
    expect_outstanding(stats, 100, 1);
  }
  expect_outstanding(stats, 0, 0);
  EXPECT_EQ(stats.statistics().total_count, 1U);
}

TEST(Buffer, HostResourceGivesHostKind) {
  host_memory_resource host;
  buffer const allocated{16, default_stream(), host};
  EXPECT_EQ(allocated.kind(), memory_kind::HOST);
}

TEST(Buffer, MoveConstructionFreesExactlyOnce) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  {
    buffer source{256, default_stream(), stats};
    void* const data = source.data();
    buffer target{std::move(source)};
    EXPECT_EQ(target.data(), data);
    EXPECT_EQ(target.size(), 256U);
    EXPECT_EQ(target.resource(), &stats);
    EXPECT_EQ(target.kind(), memory_kind::DEVICE);
    // The moved-from buffer is empty, like a default-constructed one.
    EXPECT_EQ(source.data(), nullptr);  // NOLINT(bugprone-use-after-move)
    EXPECT_TRUE(source.empty());
    EXPECT_EQ(source.resource(), nullptr);
    EXPECT_EQ(source.kind(), memory_kind::HOST);
    expect_outstanding(stats, 256, 1);
  }
  expect_outstanding(stats, 0, 0);
  EXPECT_EQ(stats.statistics().total_count, 1U);
}

TEST(Buffer, MoveAssignmentFreesTheOldMemoryOnce) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  {
    buffer kept{100, default_stream(), stats};
    buffer replaced{200, default_stream(), stats};
    expect_outstanding(stats, 300, 2);
    replaced = std::move(kept);  // the 200 bytes go back now
    expect_outstanding(stats, 100, 1);
    EXPECT_EQ(replaced.size(), 100U);
    EXPECT_TRUE(kept.empty());  // NOLINT(bugprone-use-after-move)
    EXPECT_EQ(kept.kind(), memory_kind::HOST);

    buffer& alias = replaced;
    replaced      = std::move(alias);  // self-assignment keeps the memory
    EXPECT_EQ(replaced.size(), 100U);
    expect_outstanding(stats, 100, 1);
  }
  expect_outstanding(stats, 0, 0);
  EXPECT_EQ(stats.statistics().total_count, 2U);
}

TEST(Buffer, SlicesShareOneAllocationFreedWithTheLastOfThem) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  {
    auto whole       = std::make_shared<buffer const>(256, default_stream(), stats);
    auto* const base = static_cast<std::byte*>(const_cast<void*>(whole->data()));
    test::fill_block(base, 256, 0x5a);
    buffer first{whole, base, 64};
    buffer second{whole, base + 64, 192};
    EXPECT_EQ(first.size(), 64U);
    EXPECT_EQ(second.data(), base + 64);
    EXPECT_EQ(second.kind(), memory_kind::DEVICE);
    EXPECT_EQ(second.resource(), &stats);
    EXPECT_TRUE(test::block_holds(second.data(), 192, 0x5a));
    whole.reset();  // the slices keep it
    expect_outstanding(stats, 256, 1);
    buffer moved{std::move(first)};
    EXPECT_TRUE(first.empty());  // NOLINT(bugprone-use-after-move)
    moved = buffer{};            // one slice gone: the other still holds the allocation
    expect_outstanding(stats, 256, 1);
    EXPECT_TRUE(test::block_holds(second.data(), 192, 0x5a));
  }
  expect_outstanding(stats, 0, 0);
  EXPECT_EQ(stats.statistics().total_count, 1U);
}

TEST(Buffer, ASliceMustLieInsideItsAllocation) {
  host_memory_resource host;
  auto whole       = std::make_shared<buffer const>(128, default_stream(), host);
  auto* const base = static_cast<std::byte*>(const_cast<void*>(whole->data()));
  EXPECT_THROW((buffer{whole, base + 64, 65}), invalid_argument);
  EXPECT_THROW((buffer{whole, base + 129, 0}), invalid_argument);
  EXPECT_THROW((buffer{nullptr, base, 8}), invalid_argument);
  buffer const end{whole, base + 128, 0};  // empty, at the end
  EXPECT_TRUE(end.empty());
}

TEST(Buffer, CopiesFromASource) {
  emulated_device_memory_resource device;
  statistics_resource_adaptor stats{device};
  std::vector<unsigned char> source(1000);
  for (std::size_t index = 0; index < source.size(); ++index) {
    source[index] = static_cast<unsigned char>(index * 7);
  }
  auto const before = copied_bytes().between(memory_kind::HOST, memory_kind::DEVICE);
  {
    buffer const copy{source.data(), memory_kind::HOST, source.size(), default_stream(), stats};
    EXPECT_EQ(copy.size(), source.size());
    EXPECT_EQ(copy.kind(), memory_kind::DEVICE);
    EXPECT_EQ(std::memcmp(copy.data(), source.data(), source.size()), 0);
    EXPECT_EQ(copied_bytes().between(memory_kind::HOST, memory_kind::DEVICE) - before, 1000U);
    expect_outstanding(stats, 1000, 1);
  }
  expect_outstanding(stats, 0, 0);
}

TEST(Buffer, CopyFromDiskThrowsAndFreesTheAllocation) {
  host_memory_resource host;
  statistics_resource_adaptor stats{host};
  std::vector<unsigned char> source(64);
  EXPECT_THROW(buffer(source.data(), memory_kind::DISK, source.size(), default_stream(), stats),
               invalid_argument);
  expect_outstanding(stats, 0, 0);
  EXPECT_EQ(stats.statistics().total_count, 1U);
}

}  // namespace
}  // namespace spillway
