/**
 * @file default_resources_test.cpp
 * @brief The current resources and the validation switch that makes any default use an error.
 */
#include <spillway/core/error.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <functional>
#include <string>

namespace spillway {
namespace {

using ::testing::HasSubstr;

/**
 * @brief Records the current resources and the switch, turns the switch off, and restores all
 * three at the end of the test whatever happens in between.
 */
class default_resource_guard {
 public:
  default_resource_guard()
    : switch_(set_error_on_default_resource(false)),
      device_(get_current_device_resource()),
      host_(get_current_host_resource()) {}
  ~default_resource_guard() {
    set_error_on_default_resource(false);
    set_current_device_resource(device_);
    set_current_host_resource(host_);
    set_error_on_default_resource(switch_);
  }
  default_resource_guard(default_resource_guard const&)            = delete;
  default_resource_guard& operator=(default_resource_guard const&) = delete;
  default_resource_guard(default_resource_guard&&)                 = delete;
  default_resource_guard& operator=(default_resource_guard&&)      = delete;

 private:
  bool switch_;
  resource_ref device_;
  resource_ref host_;
};

memory_resource* address(resource_ref resource) { return &resource.get(); }

/// Runs `use` and returns the message of the `logic_error` it must throw.
std::string logic_error_of(std::function<void()> const& use) {
  try {
    use();
  } catch (logic_error const& error) {
    return error.what();
  }
  ADD_FAILURE() << "no spillway::logic_error was thrown";
  return {};
}

/// "default_resources_test.cpp:<line>": how a message names a call site in this file.
std::string site_in_this_file(int line) {
  return "default_resources_test.cpp:" + std::to_string(line);
}

TEST(DefaultResources, ProcessDefaultsAreCurrentUntilReplaced) {
  default_resource_guard guard;
  EXPECT_EQ(address(get_current_device_resource()), address(process_default_device_resource()));
  EXPECT_EQ(address(get_current_host_resource()), address(process_default_host_resource()));
  EXPECT_EQ(process_default_device_resource().kind(), memory_kind::DEVICE);
  EXPECT_EQ(process_default_host_resource().kind(), memory_kind::HOST);
}

TEST(DefaultResources, SetCurrentDeviceResourceReturnsThePrevious) {
  default_resource_guard guard;
  emulated_device_memory_resource first;
  emulated_device_memory_resource second;
  resource_ref const original = get_current_device_resource();
  EXPECT_EQ(address(set_current_device_resource(first)), address(original));
  EXPECT_EQ(address(get_current_device_resource()), &first);
  EXPECT_EQ(address(set_current_device_resource(second)), &first);
  EXPECT_EQ(address(get_current_device_resource()), &second);
  EXPECT_EQ(address(current_resources().output()), &second);
  EXPECT_EQ(address(current_resources().temporary()), &second);
  EXPECT_EQ(address(set_current_device_resource(original)), &second);
  // The host resource is a separate slot.
  EXPECT_EQ(address(get_current_host_resource()), address(process_default_host_resource()));
}

TEST(DefaultResources, SetCurrentHostResourceReturnsThePrevious) {
  default_resource_guard guard;
  host_memory_resource host;
  resource_ref const original = get_current_host_resource();
  EXPECT_EQ(address(set_current_host_resource(host)), address(original));
  EXPECT_EQ(address(get_current_host_resource()), &host);
  EXPECT_EQ(address(set_current_host_resource(original)), &host);
  EXPECT_EQ(address(get_current_device_resource()), address(process_default_device_resource()));
}

TEST(DefaultResources, SwitchReturnsThePreviousState) {
  default_resource_guard guard;
  EXPECT_FALSE(error_on_default_resource());
  EXPECT_FALSE(set_error_on_default_resource(true));
  EXPECT_TRUE(error_on_default_resource());
  EXPECT_TRUE(set_error_on_default_resource(true));
  EXPECT_TRUE(set_error_on_default_resource(false));
  EXPECT_FALSE(error_on_default_resource());
}

TEST(DefaultResources, SwitchMakesEveryGetterThrowNamingTheCaller) {
  default_resource_guard guard;
  set_error_on_default_resource(true);
  int line = 0;  // set on the line of each call: the message must name exactly that line

  auto const device_message =
    logic_error_of([&] { line = __LINE__, static_cast<void>(get_current_device_resource()); });
  EXPECT_THAT(device_message, HasSubstr("get_current_device_resource()"));
  EXPECT_THAT(device_message, HasSubstr(site_in_this_file(line)));

  auto const host_message =
    logic_error_of([&] { line = __LINE__, static_cast<void>(get_current_host_resource()); });
  EXPECT_THAT(host_message, HasSubstr("get_current_host_resource()"));
  EXPECT_THAT(host_message, HasSubstr(site_in_this_file(line)));

  auto const both_message =
    logic_error_of([&] { line = __LINE__, static_cast<void>(current_resources()); });
  EXPECT_THAT(both_message, HasSubstr("current_resources()"));
  EXPECT_THAT(both_message, HasSubstr(site_in_this_file(line)));
  EXPECT_THAT(both_message, HasSubstr("SPILLWAY_ERROR_ON_DEFAULT_RESOURCE"));

  // Off again: the getters work.
  set_error_on_default_resource(false);
  EXPECT_EQ(address(get_current_device_resource()), address(process_default_device_resource()));
}

TEST(DefaultResources, CapturedProcessDefaultThrowsOnAllocateWhileSwitchIsOn) {
  default_resource_guard guard;
  resource_ref const device = process_default_device_resource();
  resource_ref const host   = process_default_host_resource();
  void* before              = device.allocate(64);  // allowed: the switch is still off

  set_error_on_default_resource(true);
  EXPECT_THAT(logic_error_of([&] { static_cast<void>(device.allocate(128)); }),
              HasSubstr("allocation of 128 bytes from the process default device resource"));
  EXPECT_THAT(logic_error_of([&] { static_cast<void>(host.allocate(32)); }),
              HasSubstr("allocation of 32 bytes from the process default host resource"));
  device.deallocate(before, 64);  // freeing what was taken earlier is still allowed

  // A resource the caller passes explicitly is unaffected by the switch.
  emulated_device_memory_resource explicit_device;
  resource_ref const passed{explicit_device};
  void* pointer = passed.allocate(64);
  passed.deallocate(pointer, 64);

  set_error_on_default_resource(false);
  void* after = device.allocate(64);
  device.deallocate(after, 64);
}

}  // namespace
}  // namespace spillway
