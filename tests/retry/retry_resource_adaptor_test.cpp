/**
 * @file retry_resource_adaptor_test.cpp
 * @brief The adaptor attributes each allocation to the task bound to the allocating thread (its
 * unspillable bytes), lets the spill store take buffers over, and forwards to its upstream. The
 * failure path it drives is tested in oom_coordinator_test.cpp, injection in
 * oom_injection_test.cpp.
 */
#include "lease/watchdog.hpp"
#include "retry/oom_test_device.hpp"

#include <spillway/lease/lease_arbiter.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/memory_kind.hpp>
#include <spillway/retry/retry_resource_adaptor.hpp>

#include <gtest/gtest.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t CAPACITY = 1 << 20;

TEST(RetryResourceAdaptor, KindIsTheUpstreamKind) {
  test::oom_test_device d{CAPACITY};
  EXPECT_EQ(d.adaptor.kind(), memory_kind::DEVICE);
}

TEST(RetryResourceAdaptor, AttributesAllocationsToTheBoundTask) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{1}};
  task_context b{d.arbiter, task_id{2}};
  test::device_allocation unbound{d.adaptor, 10};
  std::vector<test::device_allocation> held;
  {
    task_context::thread_binding const binding{a};
    held.emplace_back(d.adaptor, 100);
    held.emplace_back(d.adaptor, 50);
    {
      task_context::thread_binding const nested{b};
      held.emplace_back(d.adaptor, 30);
    }
  }
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 150U);
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{2}), 30U);
  EXPECT_EQ(d.device.used_bytes(), 190U);
  held[0].reset();  // freed by an unbound thread: still A's bytes that go
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 50U);
  held.clear();
  unbound.reset();
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 0U);
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{2}), 0U);
  EXPECT_EQ(d.device.used_bytes(), 0U);
}

TEST(RetryResourceAdaptor, ReleaseAndTakeOwnershipMoveBytesOutOfAndIntoATask) {
  test::oom_test_device d{CAPACITY};
  task_context a{d.arbiter, task_id{1}};
  task_context::thread_binding const binding{a};
  test::device_allocation buffer{d.adaptor, 200};
  test::device_allocation other{d.adaptor, 20};
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 220U);
  d.adaptor.release_ownership(buffer.get());
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 20U);
  d.adaptor.release_ownership(buffer.get());  // twice is harmless
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 20U);
  d.adaptor.take_ownership(buffer.get(), task_id{7});  // unspilled and pinned by another task
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{7}), 200U);
  d.adaptor.take_ownership(buffer.get(), task_id{1});  // moves, not copies
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{7}), 0U);
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 220U);
  buffer.reset();
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 20U);
  int unknown = 0;
  d.adaptor.release_ownership(&unknown);  // not ours: ignored
  d.adaptor.take_ownership(&unknown, task_id{1});
  EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{1}), 20U);
}

/**
 * @brief Host memory that hands a freed block straight back to the next allocation of the same
 * size (as pools and malloc do), and calls `on_free` right after it took a block back.
 */
class reusing_resource final : public memory_resource {
 public:
  std::function<void()> on_free;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    if (cached_ != nullptr && cached_bytes_ == bytes) {
      return std::exchange(cached_, nullptr);
    }
    return host_.allocate(bytes, alignment, stream);
  }
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    if (cached_ != nullptr) {
      host_.deallocate(cached_, cached_bytes_, alignment, stream);
    }
    cached_       = pointer;
    cached_bytes_ = bytes;
    if (on_free) {
      std::exchange(on_free, nullptr)();
    }
  }
  [[nodiscard]] memory_kind do_kind() const noexcept override { return memory_kind::DEVICE; }

  host_memory_resource host_;
  void* cached_             = nullptr;
  std::size_t cached_bytes_ = 0;

 public:
  ~reusing_resource() override {
    if (cached_ != nullptr) {
      host_.deallocate(cached_, cached_bytes_);
    }
  }
};

/*
 * An address freed by one task can be handed to another task's allocation before the adaptor has
 * finished recording the free (another thread allocates in between). The new allocation must be
 * attributed to its new owner, and its free must take those bytes off again: otherwise the task
 * looks as if it held unspillable bytes forever, and the protocol never lets it block.
 */
TEST(RetryResourceAdaptor, AddressReusedWhileBeingFreedIsAttributedToItsNewOwner) {
  reusing_resource upstream;
  oom_coordinator coordinator;
  retry_resource_adaptor adaptor{upstream, coordinator};
  lease_arbiter arbiter{CAPACITY};
  task_context a{arbiter, task_id{1}};
  task_context b{arbiter, task_id{2}};
  test::device_allocation a_buffer;
  {
    task_context::thread_binding const binding{a};
    a_buffer = test::device_allocation{adaptor, 96};
  }
  test::device_allocation b_buffer;
  void* const address = a_buffer.get();
  upstream.on_free    = [&] {  // B allocates in the middle of A's free
    task_context::thread_binding const binding{b};
    b_buffer = test::device_allocation{adaptor, 96};
  };
  a_buffer.reset();
  ASSERT_EQ(b_buffer.get(), address) << "the upstream did not reuse the address";
  EXPECT_EQ(adaptor.unspillable_bytes(task_id{1}), 0U);
  EXPECT_EQ(adaptor.unspillable_bytes(task_id{2}), 96U);
  b_buffer.reset();
  EXPECT_EQ(adaptor.unspillable_bytes(task_id{2}), 0U) << "B's free was not attributed to B";
}

TEST(RetryResourceAdaptor, ConcurrentTasksAreAttributedExactly) {
  constexpr std::size_t THREADS = 4;
  test::run_with_watchdog([&] {
    test::oom_test_device d{CAPACITY};
    std::vector<std::thread> threads;
    std::vector<std::size_t> expected(THREADS + 1);
    std::vector<std::vector<test::device_allocation>> kept(THREADS + 1);
    std::vector<std::unique_ptr<task_context>> tasks;
    for (std::size_t t = 1; t <= THREADS; ++t) {
      tasks.push_back(std::make_unique<task_context>(d.arbiter, task_id{t}));
    }
    for (std::size_t t = 1; t <= THREADS; ++t) {
      threads.push_back(test::checked_thread([&, t] {
        std::mt19937_64 random{t};
        task_context::thread_binding const binding{*tasks[t - 1]};
        for (int op = 0; op < 500; ++op) {
          if (kept[t].empty() || random() % 3 != 0) {
            kept[t].emplace_back(d.adaptor, 1 + random() % 64);
          } else {
            kept[t].pop_back();
          }
        }
        for (auto const& allocation : kept[t]) {
          expected[t] += allocation.bytes();
        }
      }));
    }
    for (auto& thread : threads) {
      thread.join();
    }
    std::size_t total = 0;
    for (std::size_t t = 1; t <= THREADS; ++t) {
      EXPECT_EQ(d.adaptor.unspillable_bytes(task_id{t}), expected[t]) << "task " << t;
      total += expected[t];
    }
    EXPECT_EQ(d.device.used_bytes(), total);
    kept.clear();
    EXPECT_EQ(d.device.used_bytes(), 0U);
  });
}

}  // namespace
}  // namespace spillway
