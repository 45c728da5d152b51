/**
 * @file memory_resources_test.cpp
 * @brief The {output, temporary} pair: its implicit, explicit and builder forms.
 */
#include <spillway/core/error.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_resources.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace spillway {
namespace {

/// A stand-in for an operator's trailing parameter.
memory_resources passed(memory_resources resources) { return resources; }

/// Resources of one type compare equal by `==`, so roles are checked by identity.
memory_resource* address(resource_ref resource) { return &resource.get(); }

TEST(MemoryResources, ImplicitFromAResource) {
  emulated_device_memory_resource device;
  memory_resources const resources = passed(device);
  EXPECT_EQ(address(resources.output()), &device);
  EXPECT_EQ(address(resources.temporary()), &device);
}

TEST(MemoryResources, ImplicitFromAResourceRef) {
  emulated_device_memory_resource device;
  resource_ref const ref{device};
  memory_resources const resources = passed(ref);
  EXPECT_EQ(address(resources.output()), &device);
  EXPECT_EQ(address(resources.temporary()), &device);
}

TEST(MemoryResources, ExplicitFromTwo) {
  emulated_device_memory_resource output;
  emulated_device_memory_resource scratch;
  memory_resources const resources{output, scratch};
  EXPECT_EQ(address(resources.output()), &output);
  EXPECT_EQ(address(resources.temporary()), &scratch);
}

TEST(MemoryResources, BuilderWithOutputOnlyUsesItForTemporaryToo) {
  emulated_device_memory_resource output;
  auto const resources = memory_resources::builder{}.output(output).build();
  EXPECT_EQ(address(resources.output()), &output);
  EXPECT_EQ(address(resources.temporary()), &output);
}

TEST(MemoryResources, BuilderWithBoth) {
  emulated_device_memory_resource output;
  host_memory_resource scratch;
  auto const resources = memory_resources::builder{}.temporary(scratch).output(output).build();
  EXPECT_EQ(address(resources.output()), &output);
  EXPECT_EQ(address(resources.temporary()), &scratch);
}

TEST(MemoryResources, BuilderWithoutOutputThrowsInvalidArgument) {
  host_memory_resource scratch;
  try {
    static_cast<void>(memory_resources::builder{}.build());
    FAIL() << "built without any resource";
  } catch (invalid_argument const& error) {
    EXPECT_THAT(error.what(), ::testing::HasSubstr("needs an output resource"));
  }
  EXPECT_THROW(static_cast<void>(memory_resources::builder{}.temporary(scratch).build()),
               invalid_argument);
}

TEST(MemoryResources, WithOutputAndWithTemporaryReplaceOneRole) {
  emulated_device_memory_resource first;
  emulated_device_memory_resource second;
  emulated_device_memory_resource third;
  memory_resources const original{first, second};

  auto const new_output = original.with_output(third);
  EXPECT_EQ(address(new_output.output()), &third);
  EXPECT_EQ(address(new_output.temporary()), &second);

  auto const new_temporary = original.with_temporary(third);
  EXPECT_EQ(address(new_temporary.output()), &first);
  EXPECT_EQ(address(new_temporary.temporary()), &third);

  // The original is a value: unchanged.
  EXPECT_EQ(address(original.output()), &first);
  EXPECT_EQ(address(original.temporary()), &second);
}

}  // namespace
}  // namespace spillway
