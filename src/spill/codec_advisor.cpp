#include "spill/codec_advisor.hpp"

#include <algorithm>
#include <limits>

namespace spillway::detail {

void codec_advisor::rate::add(std::size_t bytes, std::chrono::nanoseconds time) noexcept {
  if (bytes == 0) {
    return;
  }
  double const sample = static_cast<double>(time.count()) / static_cast<double>(bytes);
  ns_per_byte         = known ? ns_per_byte + NEWEST_WEIGHT * (sample - ns_per_byte) : sample;
  known               = true;
}

codec_advisor::codec_advisor(double min_ratio, bool by_cost) noexcept
  : min_ratio_(std::max(min_ratio, 1.0)), by_cost_(by_cost) {}

bool codec_advisor::try_next() {
  scoped_lock lock(mutex_);
  if (skip_ > 0) {
    --skip_;
    return false;
  }
  return true;
}

bool codec_advisor::keep(std::size_t raw, std::size_t stored, std::chrono::nanoseconds time) {
  scoped_lock lock(mutex_);
  compress_.add(raw, time);
  double const ratio = stored == 0 ? std::numeric_limits<double>::infinity()
                                   : static_cast<double>(raw) / static_cast<double>(stored);
  if (ratio < min_ratio_ || !pays(ratio)) {
    back_off();
    return false;
  }
  backoff_ = 0;
  return true;
}

void codec_advisor::wrote(std::size_t stored, std::chrono::nanoseconds time) {
  scoped_lock lock(mutex_);
  write_.add(stored, time);
}

void codec_advisor::read(std::size_t stored, std::chrono::nanoseconds time) {
  scoped_lock lock(mutex_);
  read_.add(stored, time);
}

void codec_advisor::decompressed(std::size_t raw, std::chrono::nanoseconds time) {
  scoped_lock lock(mutex_);
  decompress_.add(raw, time);
}

bool codec_advisor::pays(double ratio) const {
  if (!by_cost_ || !write_.known) {
    return true;  // nothing to weigh the codec against yet
  }
  // Per raw byte: raw blocks cost a write and a read; compressed ones the codec both ways and
  // the write and read of fewer bytes. Until reads are measured they are taken to cost what
  // writes do, and decompressing what compressing does (LZ4 decompressed the short matches of
  // sequential integers slower than it compressed them).
  double const disk = write_.ns_per_byte + (read_.known ? read_.ns_per_byte : write_.ns_per_byte);
  double const codec_time =
    compress_.ns_per_byte + (decompress_.known ? decompress_.ns_per_byte : compress_.ns_per_byte);
  return codec_time + disk / ratio < disk;
}

void codec_advisor::back_off() {
  backoff_ = std::clamp<std::uint32_t>(2 * backoff_, 1, MAX_SKIP);
  skip_    = backoff_;
}

}  // namespace spillway::detail
