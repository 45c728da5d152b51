#include <spillway/memory/statistics_resource_adaptor.hpp>

namespace spillway {
namespace {

void raise_peak(std::atomic<std::size_t>& peak, std::size_t value) noexcept {
  std::size_t seen = peak.load(std::memory_order_relaxed);
  while (value > seen && !peak.compare_exchange_weak(seen, value, std::memory_order_relaxed)) {
  }
}

}  // namespace

void* statistics_resource_adaptor::do_allocate(std::size_t bytes,
                                               std::size_t alignment,
                                               stream_view stream) {
  void* pointer = upstream_.allocate(bytes, alignment, stream);
  raise_peak(peak_bytes_, current_bytes_.fetch_add(bytes, std::memory_order_relaxed) + bytes);
  raise_peak(peak_count_, current_count_.fetch_add(1, std::memory_order_relaxed) + 1);
  total_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  total_count_.fetch_add(1, std::memory_order_relaxed);
  return pointer;
}

void statistics_resource_adaptor::do_deallocate(void* pointer,
                                                std::size_t bytes,
                                                std::size_t alignment,
                                                stream_view stream) noexcept {
  // Counted down before the upstream frees, as counted up after it allocated: the count never
  // holds bytes the upstream no longer does, so the peak is never above what it held at once.
  current_bytes_.fetch_sub(bytes, std::memory_order_relaxed);
  current_count_.fetch_sub(1, std::memory_order_relaxed);
  upstream_.deallocate(pointer, bytes, alignment, stream);
}

allocation_statistics statistics_resource_adaptor::statistics() const noexcept {
  allocation_statistics out;
  out.current_bytes = current_bytes_.load(std::memory_order_relaxed);
  out.peak_bytes    = peak_bytes_.load(std::memory_order_relaxed);
  out.total_bytes   = total_bytes_.load(std::memory_order_relaxed);
  out.current_count = current_count_.load(std::memory_order_relaxed);
  out.peak_count    = peak_count_.load(std::memory_order_relaxed);
  out.total_count   = total_count_.load(std::memory_order_relaxed);
  return out;
}

void statistics_resource_adaptor::reset_peaks() noexcept {
  peak_bytes_.store(current_bytes_.load(std::memory_order_relaxed), std::memory_order_relaxed);
  peak_count_.store(current_count_.load(std::memory_order_relaxed), std::memory_order_relaxed);
}

}  // namespace spillway
