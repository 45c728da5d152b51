/**
 * @file limiting_resource_adaptor_test.cpp
 * @brief The limit is exact at its boundary, and the count survives a throwing upstream.
 */
#include "memory/throwing_memory_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace spillway {
namespace {

using ::testing::HasSubstr;

TEST(LimitingResourceAdaptor, ExactlyTheLimitSucceedsThenOneMoreByteFails) {
  host_memory_resource host;
  limiting_resource_adaptor limited{host, 1000};
  void* first  = limited.allocate(400);
  void* second = limited.allocate(600);  // exactly the remaining bytes
  EXPECT_EQ(limited.allocated_bytes(), 1000U);
  try {
    void* pointer = limited.allocate(1);
    limited.deallocate(pointer, 1);
    FAIL() << "one byte past the limit was allocated";
  } catch (out_of_memory const& error) {
    EXPECT_THAT(error.what(), HasSubstr("requested 1 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("available 0 bytes"));
    EXPECT_THAT(error.what(), HasSubstr("limit 1000 bytes"));
    EXPECT_EQ(error.requested_bytes(), 1U);
    EXPECT_EQ(error.available_bytes(), 0U);
    EXPECT_EQ(error.capacity_bytes(), 1000U);
  }
  EXPECT_EQ(limited.allocated_bytes(), 1000U);
  limited.deallocate(first, 400);
  EXPECT_EQ(limited.allocated_bytes(), 600U);
  limited.deallocate(second, 600);
  EXPECT_EQ(limited.allocated_bytes(), 0U);
}

TEST(LimitingResourceAdaptor, LimitPlusOneInOneRequestFailsWithoutAskingUpstream) {
  host_memory_resource host;
  statistics_resource_adaptor upstream{host};
  limiting_resource_adaptor limited{upstream, 1000};
  try {
    void* pointer = limited.allocate(1001);
    limited.deallocate(pointer, 1001);
    FAIL() << "limit + 1 bytes were allocated";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(error.requested_bytes(), 1001U);
    EXPECT_EQ(error.available_bytes(), 1000U);
    EXPECT_EQ(error.capacity_bytes(), 1000U);
  }
  EXPECT_EQ(limited.allocated_bytes(), 0U);
  EXPECT_EQ(upstream.statistics().total_count, 0U);
  // The full limit in one request is fine.
  void* whole = limited.allocate(1000);
  EXPECT_EQ(limited.allocated_bytes(), 1000U);
  limited.deallocate(whole, 1000);
}

TEST(LimitingResourceAdaptor, ThrowingUpstreamLeavesTheCountUnchanged) {
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  limiting_resource_adaptor limited{upstream, 1000};
  void* held = limited.allocate(300);
  upstream.fail_next(1);
  try {
    void* pointer = limited.allocate(500);
    limited.deallocate(pointer, 500);
    FAIL() << "the injected failure did not reach the caller";
  } catch (out_of_memory const& error) {
    EXPECT_STREQ(error.what(), test::throwing_memory_resource::message(1, 500).c_str());
  }
  EXPECT_EQ(limited.allocated_bytes(), 300U);
  // The rolled-back bytes are available again: exactly the rest of the limit fits.
  void* rest = limited.allocate(700);
  EXPECT_EQ(limited.allocated_bytes(), 1000U);
  limited.deallocate(rest, 700);
  limited.deallocate(held, 300);
  EXPECT_EQ(limited.allocated_bytes(), 0U);
}

TEST(LimitingResourceAdaptor, KindAndUpstreamAreForwarded) {
  emulated_device_memory_resource device;
  limiting_resource_adaptor limited{device, 1_MiB};
  EXPECT_EQ(limited.kind(), memory_kind::DEVICE);
  EXPECT_EQ(limited.limit(), 1_MiB);
  EXPECT_EQ(&limited.upstream().get(), &device);
}

TEST(LimitingResourceAdaptor, ConcurrentLimitIsNeverExceeded) {
  constexpr std::size_t THREADS = 8;
  constexpr std::size_t BLOCK   = 64;
  constexpr std::size_t BLOCKS  = 250;  // the limit holds exactly this many blocks
  host_memory_resource host;
  limiting_resource_adaptor limited{host, BLOCK * BLOCKS};
  std::vector<std::vector<void*>> held(THREADS);
  std::vector<std::thread> threads;
  for (std::size_t thread = 0; thread < THREADS; ++thread) {
    threads.emplace_back([&limited, &mine = held[thread]] {
      // Nothing is freed, so once one allocation fails every later one fails too.
      while (true) {
        try {
          mine.push_back(limited.allocate(BLOCK));
        } catch (out_of_memory const&) {
          return;
        }
      }
    });
  }
  for (auto& thread : threads) {
    thread.join();
  }
  std::size_t granted = 0;
  for (auto const& mine : held) {
    granted += mine.size();
  }
  EXPECT_EQ(granted, BLOCKS);
  EXPECT_EQ(limited.allocated_bytes(), BLOCK * BLOCKS);
  for (auto const& mine : held) {
    for (void* pointer : mine) {
      limited.deallocate(pointer, BLOCK);
    }
  }
  EXPECT_EQ(limited.allocated_bytes(), 0U);
}

}  // namespace
}  // namespace spillway
