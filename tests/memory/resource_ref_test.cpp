/**
 * @file resource_ref_test.cpp
 * @brief The non-owning reference and the resource interface it forwards to: every overload
 * passes the size, alignment and stream through unchanged.
 */
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <gtest/gtest.h>

#include <cstddef>

namespace spillway {
namespace {

/// Hands out one static block and remembers the arguments of the last call of each hook.
class recording_resource final : public memory_resource {
 public:
  struct call {
    void* pointer         = nullptr;
    std::size_t bytes     = 0;
    std::size_t alignment = 0;
    stream_view stream    = {};
  };

  call last_allocate;
  call last_deallocate;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    last_allocate = call{storage_, bytes, alignment, stream};
    return storage_;
  }
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    last_deallocate = call{pointer, bytes, alignment, stream};
  }
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::PINNED_HOST; }

  alignas(256) std::byte storage_[256]{};
};

TEST(ResourceRef, ForwardsEveryOverloadUnchanged) {
  recording_resource recorder;
  resource_ref const ref{recorder};
  int queue = 0;
  stream_view const stream{&queue};

  void* pointer = ref.allocate(10);
  EXPECT_EQ(recorder.last_allocate.bytes, 10U);
  EXPECT_EQ(recorder.last_allocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_TRUE(recorder.last_allocate.stream.is_default());

  static_cast<void>(ref.allocate(20, 128, stream));
  EXPECT_EQ(recorder.last_allocate.bytes, 20U);
  EXPECT_EQ(recorder.last_allocate.alignment, 128U);
  EXPECT_EQ(recorder.last_allocate.stream, stream);

  static_cast<void>(ref.allocate(30, stream));
  EXPECT_EQ(recorder.last_allocate.bytes, 30U);
  EXPECT_EQ(recorder.last_allocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_EQ(recorder.last_allocate.stream, stream);

  ref.deallocate(pointer, 10);
  EXPECT_EQ(recorder.last_deallocate.pointer, pointer);
  EXPECT_EQ(recorder.last_deallocate.bytes, 10U);
  EXPECT_EQ(recorder.last_deallocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_TRUE(recorder.last_deallocate.stream.is_default());

  ref.deallocate(pointer, 20, 128, stream);
  EXPECT_EQ(recorder.last_deallocate.bytes, 20U);
  EXPECT_EQ(recorder.last_deallocate.alignment, 128U);
  EXPECT_EQ(recorder.last_deallocate.stream, stream);

  ref.deallocate(pointer, 30, stream);
  EXPECT_EQ(recorder.last_deallocate.bytes, 30U);
  EXPECT_EQ(recorder.last_deallocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_EQ(recorder.last_deallocate.stream, stream);

  EXPECT_EQ(ref.kind(), memory_kind::PINNED_HOST);
  EXPECT_EQ(&ref.get(), &recorder);
}

TEST(ResourceRef, ResourceOverloadsForwardToo) {
  recording_resource recorder;
  memory_resource& resource = recorder;
  int queue                 = 0;
  stream_view const stream{&queue};
  void* pointer = resource.allocate(40, stream);
  EXPECT_EQ(recorder.last_allocate.bytes, 40U);
  EXPECT_EQ(recorder.last_allocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_EQ(recorder.last_allocate.stream, stream);
  resource.deallocate(pointer, 40, stream);
  EXPECT_EQ(recorder.last_deallocate.bytes, 40U);
  EXPECT_EQ(recorder.last_deallocate.alignment, DEFAULT_ALIGNMENT);
  EXPECT_EQ(recorder.last_deallocate.stream, stream);
}

TEST(ResourceRef, EqualityFollowsTheResources) {
  emulated_device_memory_resource first;
  emulated_device_memory_resource second;
  host_memory_resource host_a;
  host_memory_resource host_b;
  resource_ref const a{first};
  resource_ref const copy = a;
  EXPECT_TRUE(a == copy);
  EXPECT_EQ(&copy.get(), &first);
  EXPECT_FALSE(resource_ref{first} == resource_ref{second});  // distinct devices
  EXPECT_TRUE(resource_ref{host_a} == resource_ref{host_b});  // all host resources are equal
}

}  // namespace
}  // namespace spillway
