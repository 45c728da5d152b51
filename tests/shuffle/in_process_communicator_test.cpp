#include "testing/rank_groups.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/shuffle/in_process_communicator.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using testing::bytes_of;
using testing::text_of;

TEST(InProcessCommunicator, RejectsBadGroupSizes) {
  EXPECT_THROW(in_process_group(0), invalid_argument);
  EXPECT_THROW(in_process_group(5000), invalid_argument);
  in_process_group group(3);
  EXPECT_EQ(group.size(), 3);
  EXPECT_EQ(group.rank(2).rank(), 2);
  EXPECT_EQ(group.rank(2).describe(), "in-process rank 2 of 3");
  EXPECT_THROW(static_cast<void>(group.rank(3)), invalid_argument);
}

TEST(InProcessCommunicator, ReceivePostedBeforeSendAndAfter) {
  host_memory_resource host;
  statistics_resource_adaptor stats(host);
  in_process_group group(2);
  auto early   = group.rank(1).receive(0, 7, stats);
  auto const a = bytes_of("first");
  auto const b = bytes_of("second!");
  auto sent_a  = group.rank(0).send(1, 7, a);
  auto sent_b  = group.rank(0).send(1, 7, b);
  EXPECT_EQ(sent_a.wait_for(std::chrono::seconds(0)), std::future_status::ready);
  // The second send has no receive yet: it waits (rendezvous).
  EXPECT_EQ(sent_b.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  auto late = group.rank(1).receive(any_source, 7, stats);
  sent_b.get();
  auto first  = early.get();
  auto second = late.get();
  EXPECT_EQ(text_of(first.data), "first");
  EXPECT_EQ(text_of(second.data), "second!");
  EXPECT_EQ(second.source, 0);
  EXPECT_EQ(second.tag, 7U);
  EXPECT_EQ(stats.statistics().current_bytes, 5U + 7U);
}

TEST(InProcessCommunicator, TagsSeparateMessages) {
  host_memory_resource host;
  in_process_group group(2);
  auto const x = bytes_of("x");
  auto const y = bytes_of("yy");
  auto sx      = group.rank(0).send(1, 1, x);
  auto sy      = group.rank(0).send(1, 2, y);
  EXPECT_EQ(text_of(group.rank(1).receive(0, 2, host).get().data), "yy");
  EXPECT_EQ(text_of(group.rank(1).receive(0, 1, host).get().data), "x");
  sx.get();
  sy.get();
  EXPECT_THROW(static_cast<void>(group.rank(0).send(1, max_message_tag + 1, x)), invalid_argument);
  EXPECT_THROW(static_cast<void>(group.rank(0).send(2, 1, x)), invalid_argument);
  EXPECT_THROW(static_cast<void>(group.rank(0).receive(-2, 1, host)), invalid_argument);
}

TEST(InProcessCommunicator, ConcurrentFailureWakesPendingOperationsAndCollectives) {
  host_memory_resource host;
  in_process_group group(2);
  auto pending = group.rank(0).receive(1, 3, host);
  std::jthread waiter([&] { EXPECT_THROW(group.rank(1).barrier(), communication_error); });
  group.fail("test");
  EXPECT_THROW(pending.get(), communication_error);
  waiter.join();
  auto const x = bytes_of("x");
  EXPECT_THROW(group.rank(0).send(1, 1, x).get(), communication_error);
}

TEST(InProcessCommunicator, ConcurrentRunInProcessRethrowsTheOriginalError) {
  try {
    run_in_process(4, [](communicator& comm) {
      if (comm.rank() == 2) {
        throw std::runtime_error("rank two broke");
      }
      comm.barrier();
    });
    FAIL() << "expected an exception";
  } catch (std::runtime_error const& e) {
    EXPECT_STREQ(e.what(), "rank two broke");
  }
}

TEST(InProcessCommunicator, ConcurrentCollectivesInLoops) {
  run_in_process(5, [](communicator& comm) {
    for (int round = 0; round < 50; ++round) {
      std::vector<std::byte> mine(static_cast<std::size_t>(comm.rank() + round % 3),
                                  std::byte{static_cast<unsigned char>(comm.rank())});
      auto const all = comm.allgather(mine);
      ASSERT_EQ(all.size(), 5U);
      for (int r = 0; r < 5; ++r) {
        ASSERT_EQ(all[static_cast<std::size_t>(r)].size(), static_cast<std::size_t>(r + round % 3));
      }
      std::vector<std::vector<std::byte>> to_each(5);
      for (int d = 0; d < 5; ++d) {
        to_each[static_cast<std::size_t>(d)].assign(
          static_cast<std::size_t>(d), std::byte{static_cast<unsigned char>(comm.rank() * 10 + d)});
      }
      auto const got = comm.alltoall(to_each);
      for (int s = 0; s < 5; ++s) {
        ASSERT_EQ(got[static_cast<std::size_t>(s)].size(), static_cast<std::size_t>(comm.rank()));
        for (auto b : got[static_cast<std::size_t>(s)]) {
          ASSERT_EQ(b, std::byte{static_cast<unsigned char>(s * 10 + comm.rank())});
        }
      }
      comm.barrier();
    }
  });
}

TEST(InProcessCommunicator, ConcurrentAllToAllMessages) {
  constexpr int messages = 200;
  run_in_process(4, [](communicator& comm) {
    host_memory_resource host;
    std::vector<std::vector<std::byte>> payloads;
    for (int d = 0; d < comm.size(); ++d) {
      for (int i = 0; i < messages; ++i) {
        payloads.push_back(bytes_of(std::to_string(comm.rank()) + ":" + std::to_string(i)));
      }
    }
    std::jthread sender([&] {
      std::vector<std::future<void>> sent;
      std::size_t k = 0;
      for (int d = 0; d < comm.size(); ++d) {
        for (int i = 0; i < messages; ++i) {
          sent.push_back(comm.send(d, 11, payloads[k++]));
        }
      }
      for (auto& s : sent) {
        s.get();
      }
    });
    std::vector<int> next(static_cast<std::size_t>(comm.size()), 0);
    for (int k = 0; k < messages * comm.size(); ++k) {
      auto msg          = comm.receive(any_source, 11, host).get();
      auto const text   = text_of(msg.data);
      auto const expect = std::to_string(msg.source) + ":" +
                          std::to_string(next[static_cast<std::size_t>(msg.source)]++);
      ASSERT_EQ(text, expect);  // non-overtaking per source and tag
    }
  });
}

}  // namespace
}  // namespace spillway
