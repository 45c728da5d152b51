#include <spillway/core/error.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>

#include <atomic>
#include <cstring>

namespace spillway {
namespace {

std::array<std::array<std::atomic<std::size_t>, 4>, 4> counters{};

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
    std::memcpy(destination, source, bytes);
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
