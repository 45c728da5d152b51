// Point-to-point throughput of the MPI communicator between two ranks, and many small messages
// from several threads at once. Run under MPI with two ranks:
//   scripts/mpirun.sh -np 2 build/release/bench/spillway_communicator_bench
#include <spillway/core/units.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/shuffle/mpi_communicator.hpp>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <future>
#include <string>
#include <thread>
#include <vector>

namespace {

using clock_type = std::chrono::steady_clock;
using spillway::communicator;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

/** Rank 0 streams `count` messages of `bytes` to rank 1, keeping `window` in flight. */
double stream_messages(communicator& comm, std::size_t bytes, int count, int window) {
  spillway::host_memory_resource host;
  std::vector<std::byte> payload(bytes, std::byte{7});
  comm.barrier();
  auto const start = clock_type::now();
  if (comm.rank() == 0) {
    std::vector<std::future<void>> in_flight;
    for (int i = 0; i < count; ++i) {
      in_flight.push_back(comm.send(1, 1, payload));
      if (static_cast<int>(in_flight.size()) == window) {
        for (auto& f : in_flight) {
          f.get();
        }
        in_flight.clear();
      }
    }
    for (auto& f : in_flight) {
      f.get();
    }
  } else if (comm.rank() == 1) {
    std::vector<std::future<spillway::received_message>> in_flight;
    for (int i = 0; i < count; ++i) {
      in_flight.push_back(comm.receive(0, 1, host));
      if (static_cast<int>(in_flight.size()) == window) {
        for (auto& f : in_flight) {
          static_cast<void>(f.get());
        }
        in_flight.clear();
      }
    }
    for (auto& f : in_flight) {
      static_cast<void>(f.get());
    }
  }
  comm.barrier();
  return seconds_since(start);
}

/** 4 KiB ping-pong: the round trip. */
double ping_pong(communicator& comm, int rounds) {
  spillway::host_memory_resource host;
  std::vector<std::byte> payload(4096, std::byte{1});
  comm.barrier();
  auto const start = clock_type::now();
  for (int i = 0; i < rounds; ++i) {
    if (comm.rank() == 0) {
      comm.send(1, 2, payload).get();
      static_cast<void>(comm.receive(1, 2, host).get());
    } else if (comm.rank() == 1) {
      static_cast<void>(comm.receive(0, 2, host).get());
      comm.send(0, 2, payload).get();
    }
  }
  comm.barrier();
  return seconds_since(start) / rounds;
}

/** `threads` threads per rank each exchange `count` 64-byte messages with the other rank. */
double concurrent_small(communicator& comm, int threads, int count) {
  spillway::host_memory_resource host;
  comm.barrier();
  auto const start = clock_type::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      std::vector<std::byte> payload(64, std::byte{3});
      int const peer = 1 - comm.rank();
      auto const tag = static_cast<std::uint32_t>(10 + t);
      std::vector<std::future<void>> sent;
      std::vector<std::future<spillway::received_message>> received;
      for (int i = 0; i < count; ++i) {
        received.push_back(comm.receive(peer, tag, host));
        sent.push_back(comm.send(peer, tag, payload));
      }
      for (auto& r : received) {
        static_cast<void>(r.get());
      }
      for (auto& s : sent) {
        s.get();
      }
    });
  }
  for (auto& w : workers) {
    w.join();
  }
  comm.barrier();
  return seconds_since(start);
}

}  // namespace

int main(int argc, char** argv) {
  using namespace spillway::literals;
  spillway::mpi_environment environment(&argc, &argv);
  if (environment.world_size() != 2) {
    if (environment.world_rank() == 0) {
      std::fprintf(stderr, "run with two ranks: scripts/mpirun.sh -np 2 %s\n", argv[0]);
    }
    return 2;
  }
  spillway::mpi_communicator comm(environment);
  bool const print = comm.rank() == 0;
  if (print) {
    std::printf("%s\n", comm.describe().c_str());
    std::printf("%-28s %12s %12s %12s\n", "benchmark", "messages", "MiB/s", "messages/s");
  }
  struct size_case {
    char const* name;
    std::size_t bytes;
    int count;
  };
  for (auto const& c : {size_case{"stream/4KiB/window:64", 4_KiB, 20000},
                        size_case{"stream/1MiB/window:8", 1_MiB, 1000},
                        size_case{"stream/16MiB/window:4", 16_MiB, 100}}) {
    stream_messages(comm, c.bytes, c.count / 10, c.bytes > 1_MiB ? 4 : 64);  // warm up
    double const s =
      stream_messages(comm, c.bytes, c.count, c.bytes > 1_MiB ? 4 : (c.bytes > 4_KiB ? 8 : 64));
    if (print) {
      std::printf("%-28s %12d %12.1f %12.0f\n",
                  c.name,
                  c.count,
                  static_cast<double>(c.bytes) * c.count / s / 1_MiB,
                  c.count / s);
    }
  }
  double const rtt = ping_pong(comm, 2000);
  if (print) {
    std::printf("%-28s %12d %12s %12.0f   (round trip %.1f us)\n",
                "ping_pong/4KiB",
                2000,
                "-",
                1.0 / rtt,
                rtt * 1e6);
  }
  for (int threads : {1, 4}) {
    int const count = 20000 / threads;
    double const s  = concurrent_small(comm, threads, count);
    if (print) {
      std::printf("%-28s %12d %12s %12.0f\n",
                  ("concurrent_64B/threads:" + std::to_string(threads)).c_str(),
                  2 * threads * count,
                  "-",
                  2.0 * threads * count / s);
    }
  }
  return 0;
}
