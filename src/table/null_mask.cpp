#include <spillway/table/null_mask.hpp>

#include <bit>
#include <cstring>

namespace spillway {
namespace {

/// Reads up to 64 bits starting at bit `offset`, into the low bits of the result.
std::uint64_t load_bits(bitmask_type const* mask, std::size_t offset, std::size_t count) noexcept {
  std::size_t const first_byte = offset / 8;
  std::size_t const shift      = offset % 8;
  std::size_t const bytes      = (shift + count + 7) / 8;
  std::uint64_t low            = 0;
  std::uint64_t high           = 0;
  std::memcpy(&low, mask + first_byte, bytes < 8 ? bytes : 8);
  if (bytes > 8) {
    high = mask[first_byte + 8];
  }
  std::uint64_t value = shift == 0 ? low : (low >> shift) | (high << (64 - shift));
  if (count < 64) {
    value &= (std::uint64_t{1} << count) - 1;
  }
  return value;
}

}  // namespace

std::size_t count_unset_bits(bitmask_type const* mask,
                             std::size_t begin,
                             std::size_t end) noexcept {
  std::size_t set = 0;
  for (std::size_t position = begin; position < end; position += 64) {
    std::size_t const count = end - position < 64 ? end - position : 64;
    set += static_cast<std::size_t>(std::popcount(load_bits(mask, position, count)));
  }
  return (end - begin) - set;
}

void copy_bits(bitmask_type* destination,
               std::size_t destination_offset,
               bitmask_type const* source,
               std::size_t source_offset,
               std::size_t count) noexcept {
  if (count == 0) {
    return;
  }
  if (destination_offset % 8 == 0 && source_offset % 8 == 0) {
    std::size_t const whole = count / 8;
    std::memcpy(destination + destination_offset / 8, source + source_offset / 8, whole);
    for (std::size_t index = whole * 8; index < count; ++index) {
      set_bit(destination, destination_offset + index, bit_is_set(source, source_offset + index));
    }
    return;
  }
  std::size_t done = 0;
  // Align the destination to a byte first, then write whole bytes.
  while (done < count && (destination_offset + done) % 8 != 0) {
    set_bit(destination, destination_offset + done, bit_is_set(source, source_offset + done));
    ++done;
  }
  while (count - done >= 64) {
    std::uint64_t const bits = load_bits(source, source_offset + done, 64);
    std::memcpy(destination + (destination_offset + done) / 8, &bits, 8);
    done += 64;
  }
  while (count - done >= 8) {
    auto const bits = static_cast<bitmask_type>(load_bits(source, source_offset + done, 8));
    destination[(destination_offset + done) / 8] = bits;
    done += 8;
  }
  for (; done < count; ++done) {
    set_bit(destination, destination_offset + done, bit_is_set(source, source_offset + done));
  }
}

void fill_bits(bitmask_type* mask, std::size_t begin, std::size_t end, bool valid) noexcept {
  std::size_t position = begin;
  for (; position < end && position % 8 != 0; ++position) {
    set_bit(mask, position, valid);
  }
  std::size_t const whole_end = position + (end - position) / 8 * 8;
  if (whole_end > position) {
    std::memset(mask + position / 8, valid ? 0xFF : 0x00, (whole_end - position) / 8);
  }
  for (position = whole_end > position ? whole_end : position; position < end; ++position) {
    set_bit(mask, position, valid);
  }
}

}  // namespace spillway
