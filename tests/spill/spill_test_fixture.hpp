/**
 * @file spill_test_fixture.hpp
 * @brief A small emulated device, a host resource and a private spill root per test.
 */
#pragma once

#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/spill/spill_store.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <testing/table_generators.hpp>
#include <unistd.h>
#include <vector>

namespace spillway::testing {

class spill_fixture : public ::testing::Test {
 protected:
  void SetUp() override {
    auto const* info = ::testing::UnitTest::GetInstance()->current_test_info();
    root_            = std::filesystem::path(::testing::TempDir()) /
            (std::string("spill_") + info->test_suite_name() + "_" + info->name() + "_" +
             std::to_string(::getpid()));
    std::filesystem::remove_all(root_);
    std::filesystem::create_directories(root_);
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  spill_store_options options(std::size_t host_budget = 64_MiB) {
    spill_store_options result(device_, host_);
    result.host_budget = host_budget;
    result.spill_root  = root_.string();
    // Codec choices by the ratio alone, not by timings: the cost rule has its own tests.
    result.compress_only_when_faster = false;
    return result;
  }

  /** @return a random table of every type on the device, and a host copy to compare with */
  std::pair<std::unique_ptr<table>, std::unique_ptr<table>> make_table(std::size_t rows,
                                                                       std::uint64_t seed) {
    auto device_table = random_table(all_types(), rows, seed, 0.1, device_);
    auto expected     = copy(device_table->view(), default_stream(), host_);
    return {std::move(device_table), std::move(expected)};
  }

 public:
  /** @return the spill files under the store's directory */
  static std::vector<std::filesystem::path> spill_files(spill_store const& store) {
    std::vector<std::filesystem::path> result;
    std::error_code error;
    for (std::filesystem::directory_iterator it(store.directory(), error), end; !error && it != end;
         it.increment(error)) {
      result.push_back(it->path());
    }
    return result;
  }

 protected:
  emulated_device_memory_resource device_{32_MiB};
  host_memory_resource host_;
  std::filesystem::path root_;
};

}  // namespace spillway::testing
