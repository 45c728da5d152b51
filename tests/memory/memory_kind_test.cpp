/**
 * @file memory_kind_test.cpp
 * @brief The kinds of memory: their order of preference, names and host accessibility.
 */
#include <spillway/memory/memory_kind.hpp>

#include <gtest/gtest.h>

namespace spillway {
namespace {

TEST(MemoryKind, OrderedFromMostToLeastPreferred) {
  EXPECT_LT(memory_kind::DEVICE, memory_kind::PINNED_HOST);
  EXPECT_LT(memory_kind::PINNED_HOST, memory_kind::HOST);
  EXPECT_LT(memory_kind::HOST, memory_kind::DISK);
}

TEST(MemoryKind, Names) {
  EXPECT_EQ(to_string(memory_kind::DEVICE), "device");
  EXPECT_EQ(to_string(memory_kind::PINNED_HOST), "pinned_host");
  EXPECT_EQ(to_string(memory_kind::HOST), "host");
  EXPECT_EQ(to_string(memory_kind::DISK), "disk");
}

TEST(MemoryKind, HostAccessibility) {
  EXPECT_TRUE(is_host_accessible(memory_kind::HOST, false));
  EXPECT_TRUE(is_host_accessible(memory_kind::PINNED_HOST, false));
  EXPECT_FALSE(is_host_accessible(memory_kind::DEVICE, false));
  EXPECT_TRUE(is_host_accessible(memory_kind::DEVICE, true));  // the emulated device
  EXPECT_FALSE(is_host_accessible(memory_kind::DISK, false));
  EXPECT_FALSE(is_host_accessible(memory_kind::DISK, true));
}

}  // namespace
}  // namespace spillway
