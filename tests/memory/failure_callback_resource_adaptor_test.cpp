/**
 * @file failure_callback_resource_adaptor_test.cpp
 * @brief The callback sees each failed attempt, retries while it says so, and rethrows otherwise.
 */
#include "memory/throwing_memory_resource.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <typeinfo>
#include <utility>
#include <vector>

namespace spillway {
namespace {

using attempts = std::vector<std::pair<std::size_t, std::size_t>>;  // (bytes, attempt)

TEST(FailureCallbackResourceAdaptor, RetriesUntilTheCallbackGivesUpThenRethrows) {
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  upstream.fail_next(test::throwing_memory_resource::ALWAYS);
  attempts seen;
  failure_callback_resource_adaptor adaptor{upstream,
                                            [&seen](std::size_t bytes, std::size_t attempt) {
                                              seen.emplace_back(bytes, attempt);
                                              return attempt < 3;
                                            }};
  try {
    void* pointer = adaptor.allocate(1234);
    adaptor.deallocate(pointer, 1234);
    FAIL() << "an always-failing upstream allocated";
  } catch (out_of_memory const& error) {
    // The upstream's own exception, from its last attempt, unchanged and not wrapped.
    EXPECT_EQ(typeid(error), typeid(out_of_memory));
    EXPECT_STREQ(error.what(), test::throwing_memory_resource::message(3, 1234).c_str());
    EXPECT_EQ(error.requested_bytes(), 1234U);
  }
  EXPECT_EQ(seen, (attempts{{1234, 1}, {1234, 2}, {1234, 3}}));
  EXPECT_EQ(upstream.failures(), 3U);
  EXPECT_EQ(adaptor.callback_calls(), 3U);
}

TEST(FailureCallbackResourceAdaptor, AttemptsRestartForEachAllocationAndCallsAccumulate) {
  host_memory_resource host;
  test::throwing_memory_resource upstream{host};
  attempts seen;
  failure_callback_resource_adaptor adaptor{upstream,
                                            [&seen](std::size_t bytes, std::size_t attempt) {
                                              seen.emplace_back(bytes, attempt);
                                              return true;
                                            }};
  upstream.fail_next(2);
  void* first = adaptor.allocate(64);  // fails twice, succeeds on the third attempt
  upstream.fail_next(1);
  void* second = adaptor.allocate(128);
  void* third  = adaptor.allocate(256);  // no failure, no call
  EXPECT_EQ(seen, (attempts{{64, 1}, {64, 2}, {128, 1}}));
  EXPECT_EQ(adaptor.callback_calls(), 3U);
  adaptor.deallocate(first, 64);
  adaptor.deallocate(second, 128);
  adaptor.deallocate(third, 256);
}

TEST(FailureCallbackResourceAdaptor, CallbackThatFreesMemoryMakesTheRetrySucceed) {
  host_memory_resource host;
  limiting_resource_adaptor limited{host, 1000};
  void* spillable = limited.allocate(800);  // what the callback can give back
  failure_callback_resource_adaptor adaptor{limited, [&](std::size_t bytes, std::size_t attempt) {
                                              EXPECT_EQ(bytes, 500U);
                                              EXPECT_EQ(attempt, 1U);
                                              if (spillable == nullptr) {
                                                return false;
                                              }
                                              limited.deallocate(spillable, 800);
                                              spillable = nullptr;
                                              return true;
                                            }};
  void* pointer = adaptor.allocate(500);
  EXPECT_NE(pointer, nullptr);
  EXPECT_EQ(spillable, nullptr);
  EXPECT_EQ(adaptor.callback_calls(), 1U);
  EXPECT_EQ(limited.allocated_bytes(), 500U);
  adaptor.deallocate(pointer, 500);
  EXPECT_EQ(limited.allocated_bytes(), 0U);
}

TEST(FailureCallbackResourceAdaptor, OtherErrorsAreNotRetried) {
  host_memory_resource host;
  failure_callback_resource_adaptor adaptor{host, [](std::size_t, std::size_t) { return true; }};
  EXPECT_THROW(static_cast<void>(adaptor.allocate(64, 3)), invalid_argument);
  EXPECT_EQ(adaptor.callback_calls(), 0U);
}

TEST(FailureCallbackResourceAdaptor, KindAndUpstreamAreForwarded) {
  emulated_device_memory_resource device;
  failure_callback_resource_adaptor adaptor{device, [](std::size_t, std::size_t) { return false; }};
  EXPECT_EQ(adaptor.kind(), memory_kind::DEVICE);
  EXPECT_EQ(&adaptor.upstream().get(), &device);
}

}  // namespace
}  // namespace spillway
