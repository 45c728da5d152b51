/**
 * @file resource_conformance_test.cpp
 * @brief Runs the conformance suite of tests/testing/resource_conformance.hpp for every resource
 * and adaptor of the memory layer.
 */
#include "testing/resource_conformance.hpp"

#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/failure_callback_resource_adaptor.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/logging_resource_adaptor.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/memory/tracking_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <sstream>

namespace spillway::test {
namespace {

struct host_fixture {
  static constexpr char const* name = "host";
  static constexpr memory_kind kind = memory_kind::HOST;
  host_memory_resource resource;
};

struct emulated_device_fixture {
  static constexpr char const* name = "emulated_device";
  static constexpr memory_kind kind = memory_kind::DEVICE;
  emulated_device_memory_resource resource{256_MiB};
};

struct pool_fixture {
  static constexpr char const* name = "pool";
  static constexpr memory_kind kind = memory_kind::HOST;
  host_memory_resource upstream;
  pool_memory_resource resource{upstream};
};

struct limiting_fixture {
  static constexpr char const* name = "limiting";
  static constexpr memory_kind kind = memory_kind::HOST;
  host_memory_resource upstream;
  limiting_resource_adaptor resource{upstream, 256_MiB};
};

/// Over the emulated device, so that forwarding of kind() is checked for a non-host kind too.
struct statistics_fixture {
  static constexpr char const* name = "statistics";
  static constexpr memory_kind kind = memory_kind::DEVICE;
  emulated_device_memory_resource upstream{256_MiB};
  statistics_resource_adaptor resource{upstream};
};

struct tracking_fixture {
  static constexpr char const* name = "tracking";
  static constexpr memory_kind kind = memory_kind::HOST;
  host_memory_resource upstream;
  tracking_resource_adaptor resource{upstream, "conformance"};
};

struct logging_fixture {
  static constexpr char const* name = "logging";
  static constexpr memory_kind kind = memory_kind::HOST;
  std::ostringstream log;
  host_memory_resource upstream;
  logging_resource_adaptor resource{upstream, log};
};

struct failure_callback_fixture {
  static constexpr char const* name = "failure_callback";
  static constexpr memory_kind kind = memory_kind::DEVICE;
  emulated_device_memory_resource upstream{256_MiB};
  failure_callback_resource_adaptor resource{upstream,
                                             [](std::size_t, std::size_t) { return false; }};
};

using resource_fixtures = ::testing::Types<host_fixture,
                                           emulated_device_fixture,
                                           pool_fixture,
                                           limiting_fixture,
                                           statistics_fixture,
                                           tracking_fixture,
                                           logging_fixture,
                                           failure_callback_fixture>;

}  // namespace

INSTANTIATE_TYPED_TEST_SUITE_P(Memory, ResourceConformance, resource_fixtures, fixture_names);

}  // namespace spillway::test
