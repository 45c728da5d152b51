#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/ops/sample.hpp>
#include <spillway/table/gather.hpp>

#include <algorithm>
#include <random>
#include <string>
#include <unordered_set>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// A UINT64 view of `count` indices in `memory`.
column_view index_view(buffer const& memory, std::size_t count) {
  return column_view{data_type{type_id::UINT64}, count, memory.data(), nullptr, 0};
}

/// Where indices drawn on the host go: `memory` itself, or (when it is CUDA device memory, which
/// the CPU cannot write) a host vector that `publish` then copies into `memory`.
class host_indices {
 public:
  explicit host_indices(buffer& memory, std::size_t count) : memory_(memory), count_(count) {
    if (is_cuda_device_pointer(memory.data())) {
      staged_.resize(count);
    }
  }
  [[nodiscard]] std::uint64_t* data() noexcept {
    return staged_.empty() ? static_cast<std::uint64_t*>(memory_.data()) : staged_.data();
  }
  /// Makes the indices visible in `memory`.
  void publish(stream_view stream) {
    if (!staged_.empty()) {
      copy_bytes(memory_.data(),
                 memory_kind::DEVICE,
                 staged_.data(),
                 memory_kind::HOST,
                 count_ * sizeof(std::uint64_t),
                 stream);
    }
  }

 private:
  buffer& memory_;
  std::size_t count_;
  std::vector<std::uint64_t> staged_;
};

/// Floyd's algorithm draws once per sample but pays a hash set and a sort; selection sampling
/// draws once per row. Floyd's is used when the rows are at least this many times the samples.
constexpr std::size_t FLOYD_MIN_RATIO = 8;

__extension__ using uint128 = unsigned __int128;

/// A uniform integer in [0, bound) from one 64-bit draw (Lemire's multiply-shift): the high 64
/// bits of the 128-bit product draw * bound.
std::uint64_t uniform_below(std::mt19937_64& engine, std::uint64_t bound) noexcept {
  return static_cast<std::uint64_t>((static_cast<uint128>(engine()) * bound) >> 64);
}

}  // namespace

std::unique_ptr<table> sample(table_view const& input,
                              std::size_t num_samples,
                              std::uint64_t seed,
                              stream_view stream,
                              memory_resources mrs) {
  std::size_t const rows    = input.num_rows();
  std::size_t const samples = std::min(num_samples, rows);
  buffer map_memory{samples * sizeof(std::uint64_t), stream, mrs.temporary()};
  host_indices indices{map_memory, samples};
  std::uint64_t* const map = indices.data();
  // Every subset of `samples` rows is equally likely, and the rows keep their input order.
  std::mt19937_64 engine{seed};
  if (samples * FLOYD_MIN_RATIO <= rows) {
    // Floyd's algorithm (Bentley and Floyd, CACM 30(9), 1987): one draw per sample.
    std::unordered_set<std::uint64_t> chosen;
    chosen.reserve(2 * samples);
    std::size_t taken = 0;
    for (std::uint64_t bound = rows - samples; bound < rows; ++bound) {
      std::uint64_t const draw = uniform_below(engine, bound + 1);
      std::uint64_t const row  = chosen.insert(draw).second ? draw : bound;
      if (row == bound) {
        chosen.insert(bound);
      }
      map[taken++] = row;
    }
    std::sort(map, map + samples);
  } else {
    // Selection sampling (Knuth, TAOCP 3.4.2, algorithm S): row `row` is taken with probability
    // needed / remaining; one draw per row up to the last one taken.
    std::size_t taken = 0;
    for (std::size_t row = 0; row < rows && taken < samples; ++row) {
      std::uint64_t const remaining = rows - row;
      if (samples - taken == remaining || uniform_below(engine, remaining) < samples - taken) {
        map[taken++] = row;
      }
    }
  }
  indices.publish(stream);
  return detail::gather(
    input, index_view(map_memory, samples), out_of_bounds_policy::FAIL, stream, mrs);
}

std::unique_ptr<table> quantile_splitters(table_view const& sorted,
                                          std::size_t k,
                                          stream_view stream,
                                          memory_resources mrs) {
  SPILLWAY_EXPECTS(k >= 1, "quantile_splitters: k must be at least 1, is 0", invalid_argument);
  std::size_t const rows      = sorted.num_rows();
  std::size_t const splitters = rows == 0 ? 0 : k - 1;
  buffer map_memory{splitters * sizeof(std::uint64_t), stream, mrs.temporary()};
  host_indices indices{map_memory, splitters};
  std::uint64_t* const map = indices.data();
  for (std::size_t index = 0; index < splitters; ++index) {
    // (index + 1) * rows / k without overflowing: rows = quotient * k + remainder.
    std::size_t const step = index + 1;
    map[index]             = step * (rows / k) + (step * (rows % k)) / k;
  }
  indices.publish(stream);
  return detail::gather(
    sorted, index_view(map_memory, splitters), out_of_bounds_policy::FAIL, stream, mrs);
}

}  // namespace detail

std::unique_ptr<table> sample(table_view const& input,
                              std::size_t num_samples,
                              std::uint64_t seed,
                              stream_view stream,
                              memory_resources mrs) {
  return detail::sample(input, num_samples, seed, stream, mrs);
}

std::unique_ptr<table> quantile_splitters(table_view const& sorted,
                                          std::size_t k,
                                          stream_view stream,
                                          memory_resources mrs) {
  return detail::quantile_splitters(sorted, k, stream, mrs);
}

}  // namespace spillway
