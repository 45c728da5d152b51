#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

#include <atomic>
#include <cstddef>
#include <cstring>

namespace spillway {
namespace {

std::array<std::array<std::atomic<std::size_t>, 4>, 4> counters{};

/// A copy in host memory (emulated device memory included) of at least twice this many bytes is
/// cut into parts on the worker pool: one core copies a few GB/s, less into fresh pages, and a
/// sort's batches of 32-128 MiB go onto and off the device on one task's thread.
constexpr std::size_t PARALLEL_COPY_MIN_PART_BYTES = std::size_t{1} << 20;
/// Parts begin on cache lines (of the source's alignment).
constexpr std::size_t COPY_PART_ALIGNMENT = 64;

void copy_on_host(void* destination, void const* source, std::size_t bytes) {
  std::size_t const parts = parallel_parts(bytes, PARALLEL_COPY_MIN_PART_BYTES);
  if (parts <= 1) {
    std::memcpy(destination, source, bytes);
    return;
  }
  auto const begin_of = [bytes, parts](std::size_t part) {
    return part == parts ? bytes : part * bytes / parts / COPY_PART_ALIGNMENT * COPY_PART_ALIGNMENT;
  };
  parallel_for(parts, [&](std::size_t part) {
    std::size_t const begin = begin_of(part);
    std::size_t const end   = begin_of(part + 1);
    std::memcpy(static_cast<std::byte*>(destination) + begin,
                static_cast<std::byte const*>(source) + begin,
                end - begin);
  });
}

bool copy_between(void* destination,
                  memory_kind destination_kind,
                  void const* source,
                  memory_kind source_kind,
                  std::size_t bytes,
                  stream_view stream,
                  bool wait) {
  SPILLWAY_EXPECTS(destination_kind != memory_kind::DISK && source_kind != memory_kind::DISK,
                   "copy_bytes: disk is not addressable memory; use the spill store's file I/O",
                   invalid_argument);
  if (bytes == 0) {
    return false;
  }
  // Emulated device memory is host memory: only real device memory needs the CUDA copy.
  bool const device_involved =
    (destination_kind == memory_kind::DEVICE || source_kind == memory_kind::DEVICE) &&
    (wait ? cuda_copy_if_device(destination, source, bytes, stream)
          : cuda_copy_async_if_device(destination, source, bytes, stream));
  if (!device_involved) {
    copy_on_host(destination, source, bytes);
  }
  counters[static_cast<std::size_t>(source_kind)][static_cast<std::size_t>(destination_kind)]
    .fetch_add(bytes, std::memory_order_relaxed);
  return device_involved;
}

}  // namespace

void copy_bytes(void* destination,
                memory_kind destination_kind,
                void const* source,
                memory_kind source_kind,
                std::size_t bytes,
                stream_view stream) {
  (void)copy_between(destination, destination_kind, source, source_kind, bytes, stream, true);
}

bool copy_bytes_async(void* destination,
                      memory_kind destination_kind,
                      void const* source,
                      memory_kind source_kind,
                      std::size_t bytes,
                      stream_view stream) {
  return copy_between(destination, destination_kind, source, source_kind, bytes, stream, false);
}

void fill_bytes(
  void* destination, memory_kind kind, std::uint8_t value, std::size_t bytes, stream_view stream) {
  SPILLWAY_EXPECTS(
    kind != memory_kind::DISK, "fill_bytes: disk is not addressable memory", invalid_argument);
  if (bytes == 0) {
    return;
  }
  if (kind != memory_kind::DEVICE || !cuda_fill_if_device(destination, value, bytes, stream)) {
    std::memset(destination, value, bytes);
  }
}

copy_counters copied_bytes() noexcept {
  copy_counters out;
  for (std::size_t s = 0; s < 4; ++s) {
    for (std::size_t d = 0; d < 4; ++d) {
      out.bytes[s][d] = counters[s][d].load(std::memory_order_relaxed);
    }
  }
  return out;
}

}  // namespace spillway
