// Conformance of the communicator interface, written once against for_each_rank_group: the same
// bodies run on in-process groups of every size and on the processes of an mpirun.
#include "testing/rank_groups.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/shuffle/communicator.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <future>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace {

using testing::for_each_rank_group;

using testing::bytes_of;
using testing::text_of;

int next_rank(communicator const& comm) { return (comm.rank() + 1) % comm.size(); }
int previous_rank(communicator const& comm) {
  return (comm.rank() + comm.size() - 1) % comm.size();
}

TEST(Communicator, RingSendReceiveWithSeveralTags) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    std::vector<std::vector<std::byte>> payloads;
    std::vector<std::future<void>> sent;
    for (std::uint32_t tag : {1U, 2U, 3U}) {
      payloads.push_back(
        bytes_of("from " + std::to_string(comm.rank()) + " tag " + std::to_string(tag)));
    }
    for (std::uint32_t tag : {1U, 2U, 3U}) {
      sent.push_back(comm.send(next_rank(comm), tag, payloads[tag - 1]));
    }
    // Received in the opposite order of tags: tags keep messages apart.
    for (std::uint32_t tag : {3U, 2U, 1U}) {
      auto message = comm.receive(previous_rank(comm), tag, host).get();
      EXPECT_EQ(message.source, previous_rank(comm));
      EXPECT_EQ(message.tag, tag);
      EXPECT_EQ(text_of(message.data),
                "from " + std::to_string(previous_rank(comm)) + " tag " + std::to_string(tag));
    }
    for (auto& s : sent) {
      s.get();
    }
  });
}

TEST(Communicator, NonOvertakingOrderFor1000Messages) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    constexpr std::uint32_t count = 1000;
    std::vector<std::uint32_t> values(count);
    std::vector<std::future<void>> sent;
    std::vector<std::future<received_message>> received;
    for (std::uint32_t i = 0; i < count; ++i) {
      values[i] = i;
      sent.push_back(comm.send(next_rank(comm), 9, std::as_bytes(std::span{&values[i], 1})));
      // Half by name, half from any source: both keep the order of one sender's messages.
      received.push_back(comm.receive(i % 2 == 0 ? previous_rank(comm) : any_source, 9, host));
    }
    for (std::uint32_t i = 0; i < count; ++i) {
      auto message = received[i].get();
      ASSERT_EQ(message.data.size(), sizeof(std::uint32_t));
      std::uint32_t value = 0;
      std::memcpy(&value, message.data.data(), sizeof value);
      ASSERT_EQ(value, i) << "message " << i << " overtaken";
    }
    for (auto& s : sent) {
      s.get();
    }
  });
}

TEST(Communicator, AnySourceReceivesFromEveryRank) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    int const me = comm.rank();
    auto sent    = comm.send(0, 5, std::as_bytes(std::span{&me, 1}));
    if (comm.rank() == 0) {
      std::set<int> sources;
      for (int i = 0; i < comm.size(); ++i) {
        auto message = comm.receive(any_source, 5, host).get();
        int value    = -1;
        ASSERT_EQ(message.data.size(), sizeof value);
        std::memcpy(&value, message.data.data(), sizeof value);
        EXPECT_EQ(message.source, value);
        EXPECT_EQ(message.tag, 5U);
        sources.insert(message.source);
      }
      EXPECT_EQ(sources.size(), static_cast<std::size_t>(comm.size()));
    }
    sent.get();
  });
}

TEST(Communicator, SelfSend) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    auto const payload = bytes_of("to myself " + std::to_string(comm.rank()));
    auto received      = comm.receive(comm.rank(), 77, host);
    auto sent          = comm.send(comm.rank(), 77, payload);
    auto message       = received.get();
    sent.get();
    EXPECT_EQ(message.source, comm.rank());
    EXPECT_EQ(text_of(message.data), "to myself " + std::to_string(comm.rank()));
  });
}

TEST(Communicator, ZeroByteMessages) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    statistics_resource_adaptor stats(host);
    auto sent    = comm.send(next_rank(comm), 0, std::span<std::byte const>{});
    auto message = comm.receive(previous_rank(comm), 0, stats).get();
    sent.get();
    EXPECT_EQ(message.source, previous_rank(comm));
    EXPECT_EQ(message.tag, 0U);
    EXPECT_TRUE(message.data.empty());
    EXPECT_EQ(stats.statistics().current_bytes, 0U);
  });
}

TEST(Communicator, MaxTagIsUsable) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    auto const payload = bytes_of("top tag");
    auto sent          = comm.send(next_rank(comm), max_message_tag, payload);
    auto message       = comm.receive(previous_rank(comm), max_message_tag, host).get();
    sent.get();
    EXPECT_EQ(message.tag, max_message_tag);
    EXPECT_EQ(text_of(message.data), "top tag");
  });
}

TEST(Communicator, LargeMessageOf64MiB) {
  using namespace spillway::literals;
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    statistics_resource_adaptor stats(host);
    std::size_t const bytes = 64_MiB;
    int const last          = comm.size() - 1;
    std::future<void> sent;
    std::vector<std::uint32_t> payload;
    if (comm.rank() == 0) {
      payload.resize(bytes / sizeof(std::uint32_t));
      for (std::size_t i = 0; i < payload.size(); ++i) {
        payload[i] = static_cast<std::uint32_t>(i * 2654435761U);
      }
      sent = comm.send(last, 64, std::as_bytes(std::span{payload}));
    }
    if (comm.rank() == last) {
      auto message = comm.receive(0, 64, stats).get();
      ASSERT_EQ(message.data.size(), bytes);
      EXPECT_EQ(stats.statistics().total_bytes, bytes);
      auto const* words = static_cast<std::uint32_t const*>(message.data.data());
      std::size_t wrong = 0;
      for (std::size_t i = 0; i < bytes / sizeof(std::uint32_t); ++i) {
        wrong += words[i] != static_cast<std::uint32_t>(i * 2654435761U) ? 1 : 0;
      }
      EXPECT_EQ(wrong, 0U);
    }
    if (sent.valid()) {
      sent.get();
    }
  });
}

TEST(Communicator, ReceiveBufferComesFromTheGivenResource) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    statistics_resource_adaptor stats(host);
    std::vector<std::byte> const payload(1000 + static_cast<std::size_t>(comm.rank()),
                                         std::byte{0x5a});
    auto sent = comm.send(next_rank(comm), 3, payload);
    {
      auto message        = comm.receive(previous_rank(comm), 3, stats).get();
      auto const expected = 1000 + static_cast<std::size_t>(previous_rank(comm));
      EXPECT_EQ(message.data.size(), expected);
      EXPECT_EQ(message.data.resource(), &stats);
      EXPECT_EQ(stats.statistics().current_bytes, expected);
      EXPECT_EQ(stats.statistics().total_count, 1U);
    }
    EXPECT_EQ(stats.statistics().current_bytes, 0U);
    sent.get();
  });
}

TEST(Communicator, AllocationFailureLosesOnlyThatMessage) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    limiting_resource_adaptor tiny(host, 100);
    std::vector<std::byte> const big(4096, std::byte{1});
    auto const small = bytes_of("still here");
    auto sent_big    = comm.send(next_rank(comm), 11, big);
    auto sent_small  = comm.send(next_rank(comm), 11, small);
    auto lost        = comm.receive(previous_rank(comm), 11, tiny);
    auto kept        = comm.receive(previous_rank(comm), 11, host);
    EXPECT_THROW(static_cast<void>(lost.get()), std::bad_alloc);
    EXPECT_EQ(text_of(kept.get().data), "still here");
    EXPECT_EQ(tiny.allocated_bytes(), 0U);
    sent_big.get();
    sent_small.get();
  });
}

TEST(Communicator, AllgatherWithDifferentSizes) {
  for_each_rank_group([](communicator& comm) {
    for (int round = 0; round < 3; ++round) {
      // Rank r contributes r * 3 + round bytes of value r (rank 0 in round 0: nothing).
      std::vector<std::byte> const mine(static_cast<std::size_t>(comm.rank() * 3 + round),
                                        static_cast<std::byte>(comm.rank()));
      auto const all = comm.allgather(mine);
      ASSERT_EQ(all.size(), static_cast<std::size_t>(comm.size()));
      for (int r = 0; r < comm.size(); ++r) {
        EXPECT_EQ(all[static_cast<std::size_t>(r)],
                  std::vector<std::byte>(static_cast<std::size_t>(r * 3 + round),
                                         static_cast<std::byte>(r)));
      }
    }
  });
}

TEST(Communicator, AlltoallWithDifferentSizes) {
  for_each_rank_group([](communicator& comm) {
    auto const n = static_cast<std::size_t>(comm.size());
    auto const r = static_cast<std::size_t>(comm.rank());
    // Rank s sends (s + d) % 3 bytes of value 16 s + d to rank d: some parts are empty.
    std::vector<std::vector<std::byte>> to_each(n);
    for (std::size_t d = 0; d < n; ++d) {
      to_each[d].assign((r + d) % 3, static_cast<std::byte>(16 * r + d));
    }
    auto const from_each = comm.alltoall(to_each);
    ASSERT_EQ(from_each.size(), n);
    for (std::size_t s = 0; s < n; ++s) {
      EXPECT_EQ(from_each[s],
                std::vector<std::byte>((s + r) % 3, static_cast<std::byte>(16 * s + r)))
        << "from rank " << s;
    }
  });
}

TEST(Communicator, BarrierWaitsForTheLastRank) {
  using clock = std::chrono::steady_clock;
  for_each_rank_group([](communicator& comm) {
    comm.barrier();
    auto const start = clock::now();
    if (comm.rank() == 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    comm.barrier();
    auto const waited = clock::now() - start;
    EXPECT_GE(waited, std::chrono::milliseconds(50)) << "the barrier did not wait for rank 0";
    for (int i = 0; i < 20; ++i) {
      comm.barrier();
    }
  });
}

TEST(Communicator, BadRankOrTagThrowsInvalidArgument) {
  for_each_rank_group([](communicator& comm) {
    host_memory_resource host;
    std::vector<std::byte> const payload(4);
    EXPECT_THROW(static_cast<void>(comm.send(comm.size(), 1, payload)), invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.send(-1, 1, payload)), invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.send(0, max_message_tag + 1, payload)), invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.receive(comm.size(), 1, host)), invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.receive(-2, 1, host)), invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.receive(any_source, max_message_tag + 1, host)),
                 invalid_argument);
    EXPECT_THROW(static_cast<void>(comm.alltoall(
                   std::vector<std::vector<std::byte>>(static_cast<std::size_t>(comm.size()) + 1))),
                 invalid_argument);
    // The group is still usable afterwards.
    comm.barrier();
  });
}

TEST(Communicator, ConcurrentSendReceiveFromManyThreads) {
  for_each_rank_group([](communicator& comm) {
    constexpr int threads         = 4;
    constexpr std::uint32_t count = 200;
    host_memory_resource host;
    std::vector<std::thread> workers;
    std::vector<int> wrong(threads, 0);
    std::vector<std::string> errors(threads);
    for (int t = 0; t < threads; ++t) {
      workers.emplace_back([&, t] {
        try {
          auto const tag = static_cast<std::uint32_t>(100 + t);
          std::vector<std::uint64_t> values(count);
          std::vector<std::future<void>> sent;
          for (std::uint32_t i = 0; i < count; ++i) {
            values[i] = (std::uint64_t{static_cast<std::uint32_t>(t)} << 32U) | i;
            sent.push_back(
              comm.send(next_rank(comm), tag, std::as_bytes(std::span{&values[i], 1})));
          }
          for (std::uint32_t i = 0; i < count; ++i) {
            auto message        = comm.receive(previous_rank(comm), tag, host).get();
            std::uint64_t value = 0;
            std::memcpy(&value, message.data.data(), std::min(message.data.size(), sizeof value));
            wrong[static_cast<std::size_t>(t)] +=
              value != ((std::uint64_t{static_cast<std::uint32_t>(t)} << 32U) | i) ? 1 : 0;
          }
          for (auto& s : sent) {
            s.get();
          }
        } catch (std::exception const& e) {
          errors[static_cast<std::size_t>(t)] = e.what();
        }
      });
    }
    for (auto& w : workers) {
      w.join();
    }
    EXPECT_EQ(errors, std::vector<std::string>(threads));
    EXPECT_EQ(wrong, std::vector<int>(threads, 0));
  });
}

}  // namespace
}  // namespace spillway
