/**
 * @file cuda_testing.hpp
 * @brief What the CUDA tests of every layer share: the skip without a GPU, and tables moved to
 * and from the device through the library's own copy.
 */
#pragma once

#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/table.hpp>

#include <gtest/gtest.h>

#include <memory>

/// Tests that need a GPU skip with the reason when there is none; the rest runs everywhere.
#define SPILLWAY_REQUIRE_CUDA_DEVICE()                                                  \
  do {                                                                                  \
    if (::spillway::cuda_device_count() == 0) {                                         \
      GTEST_SKIP() << "needs a CUDA device: " << ::spillway::cuda_unavailable_reason(); \
    }                                                                                   \
  } while (0)

namespace spillway::testing {

/** @brief A device stream and resource, and a host resource, for tests that run on the GPU. */
struct cuda_fixture_parts {
  cuda_stream stream;
  cuda_async_memory_resource device;
};

/** @return a copy of `view` in `device` memory */
inline std::unique_ptr<table> to_device(table_view const& view, cuda_fixture_parts& parts) {
  return copy(view, parts.stream.view(), memory_resources{parts.device, parts.device});
}

/** @return a copy of `view` (anywhere) in `host` memory */
inline std::unique_ptr<table> to_host(table_view const& view,
                                      cuda_fixture_parts& parts,
                                      resource_ref host) {
  return copy(view, parts.stream.view(), memory_resources{host, host});
}

}  // namespace spillway::testing
