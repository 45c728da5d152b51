/**
 * @file host_memory_resource_test.cpp
 * @brief Host memory: equality of instances, kind, alignment validation, large alignments.
 */
#include "testing/resource_conformance.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spillway {
namespace {

using ::testing::HasSubstr;

TEST(HostMemoryResource, AllInstancesAreEqual) {
  host_memory_resource first;
  host_memory_resource second;
  EXPECT_TRUE(first.is_equal(second));
  EXPECT_TRUE(second.is_equal(first));
  EXPECT_TRUE(resource_ref{first} == resource_ref{second});

  // Memory from one instance can be freed by the other.
  void* pointer = first.allocate(256);
  second.deallocate(pointer, 256);
}

TEST(HostMemoryResource, NotEqualToAnotherKindOfResource) {
  host_memory_resource host;
  emulated_device_memory_resource device;
  EXPECT_FALSE(host.is_equal(device));
  EXPECT_FALSE(device.is_equal(host));
  EXPECT_FALSE(resource_ref{host} == resource_ref{device});
}

TEST(HostMemoryResource, KindIsHost) {
  host_memory_resource host;
  EXPECT_EQ(host.kind(), memory_kind::HOST);
}

TEST(HostMemoryResource, ZeroBytesReturnsNull) {
  host_memory_resource host;
  void* pointer = host.allocate(0);
  EXPECT_EQ(pointer, nullptr);
  host.deallocate(pointer, 0);
}

TEST(HostMemoryResource, NonPowerOfTwoAlignmentThrowsInvalidArgument) {
  host_memory_resource host;
  for (std::size_t const alignment : {std::size_t{0}, std::size_t{3}, std::size_t{48}}) {
    try {
      void* pointer = host.allocate(64, alignment);
      host.deallocate(pointer, 64, alignment);
      ADD_FAILURE() << "alignment " << alignment << " was accepted";
    } catch (invalid_argument const& error) {
      EXPECT_THAT(error.what(),
                  HasSubstr("alignment must be a power of two: " + std::to_string(alignment)));
    }
  }
}

TEST(HostMemoryResource, AlignmentsBeyondAPage) {
  host_memory_resource host;
  for (std::size_t alignment = 8_KiB; alignment <= 1_MiB; alignment *= 4) {
    void* pointer = host.allocate(100, alignment);
    EXPECT_TRUE(test::is_aligned(pointer, alignment)) << alignment;
    test::fill_block(pointer, 100, 0x5A);
    EXPECT_TRUE(test::block_holds(pointer, 100, 0x5A));
    host.deallocate(pointer, 100, alignment);
  }
}

}  // namespace
}  // namespace spillway
