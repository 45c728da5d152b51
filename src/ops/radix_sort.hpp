/**
 * @file radix_sort.hpp
 * @brief Internal: the CPU sort of key records (normalized key prefixes with their row ids) by
 * their prefixes: heavy prefixes split off first, then least-significant-digit passes for
 * cache-sized inputs, most-significant-digit passes above, a comparison sort for small ones.
 */
#pragma once

#include "ops/normalized_key.hpp"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <utility>

namespace spillway::detail {

/// Below this many rows a comparison sort of the records beats the radix passes.
inline constexpr std::size_t RADIX_SORT_MIN_ROWS = 256;
/// Records of at most this many bytes (the input and its scratch stay in a core's L2 cache) are
/// sorted by LSD passes; larger inputs are first cut into buckets by an MSD pass. At 256 KiB, the
/// 625 KiB buckets of 10M keys took a second MSD pass into buckets of ~150 records:
/// spillway_ops_bench sorted_order_int64/random 235-259 ms, against 199 ms at 2 MiB.
inline constexpr std::size_t LSD_RADIX_MAX_BYTES = 2048 * 1024;
/// Nor with more LSD passes than this: a long prefix (strings) takes further MSD passes, which
/// soon leave buckets small enough for a comparison sort. 50M string keys of 10-30 letters spent
/// a sixth of their sort in 20-odd LSD passes per cache-sized bucket.
inline constexpr std::size_t LSD_RADIX_MAX_PASSES = 8;

template <std::size_t Words>
bool prefix_less(key_record<Words> const& lhs, key_record<Words> const& rhs) noexcept {
  for (std::size_t word = 0; word < Words; ++word) {
    if (lhs.key[word] != rhs.key[word]) {
      return lhs.key[word] < rhs.key[word];
    }
  }
  return false;
}

template <std::size_t Words>
bool prefix_equal(key_record<Words> const& lhs, key_record<Words> const& rhs) noexcept {
  for (std::size_t word = 0; word < Words; ++word) {
    if (lhs.key[word] != rhs.key[word]) {
      return false;
    }
  }
  return true;
}

template <std::size_t Words>
unsigned digit(key_record<Words> const& record, std::size_t byte) noexcept {
  return static_cast<unsigned>((record.key[byte / 8] >> (56 - 8 * (byte % 8))) & 0xFFU);
}

/// Where a sort writes the words of its sorted prefixes, word by word (null: that word is not
/// written), beside the sorted rows.
using prefix_words = std::array<std::uint64_t*, 3>;

/// Writes the words of `record`'s prefix that `prefixes` wants at position `at`.
template <std::size_t Words>
void write_prefix(prefix_words const& prefixes,
                  std::size_t at,
                  key_record<Words> const& record) noexcept {
  for (std::size_t word = 0; word < Words; ++word) {
    if (prefixes[word] != nullptr) {
      prefixes[word][at] = record.key[word];
    }
  }
}

/**
 * The count of each digit at prefix byte `byte` of `records`. Four counter arrays take turns,
 * so that a run of one digit (a heavy key) does not chain every increment to the one before.
 */
template <std::size_t Words>
std::array<std::size_t, 256> digit_counts(key_record<Words> const* records,
                                          std::size_t count,
                                          std::size_t byte) noexcept {
  constexpr std::size_t LANES = 4;
  std::array<std::array<std::size_t, 256>, LANES> lanes{};
  std::size_t index = 0;
  for (; index + LANES <= count; index += LANES) {
    for (std::size_t lane = 0; lane < LANES; ++lane) {
      ++lanes[lane][digit(records[index + lane], byte)];
    }
  }
  for (; index < count; ++index) {
    ++lanes[0][digit(records[index], byte)];
  }
  for (std::size_t lane = 1; lane < LANES; ++lane) {
    for (std::size_t bucket = 0; bucket < 256; ++bucket) {
      lanes[0][bucket] += lanes[lane][bucket];
    }
  }
  return lanes[0];
}

/**
 * Sorts `records` by prefix bytes [`first`, `bytes`) (at most LSD_RADIX_MAX_PASSES of them),
 * stably, with an LSD radix sort using `scratch` (as long as `records`). Byte positions where every
 * record has the same digit are skipped, so all-equal and few-distinct inputs cost one counting
 * pass.
 * @return the array holding the sorted records: `records` or `scratch`
 */
template <std::size_t Words>
key_record<Words>* lsd_radix_sort(key_record<Words>* records,
                                  key_record<Words>* scratch,
                                  std::size_t count,
                                  std::size_t first,
                                  std::size_t bytes) {
  // Counters for the passes in use only: small buckets are sorted by the thousand, and
  // clearing counters for every prefix byte cost more than counting a bucket of 2000 records.
  std::size_t const passes = bytes - first;
  std::array<std::array<std::size_t, 256>, LSD_RADIX_MAX_PASSES> counts;
  for (std::size_t pass = 0; pass < passes; ++pass) {
    counts[pass].fill(0);
  }
  for (std::size_t index = 0; index < count; ++index) {
    for (std::size_t pass = 0; pass < passes; ++pass) {
      ++counts[pass][digit(records[index], first + pass)];
    }
  }
  key_record<Words>* source      = records;
  key_record<Words>* destination = scratch;
  for (std::size_t byte = bytes; byte-- > first;) {
    auto& histogram = counts[byte - first];
    if (std::any_of(histogram.begin(), histogram.end(), [count](std::size_t bucket) {
          return bucket == count;
        })) {
      continue;  // one digit everywhere: this pass would not move anything
    }
    std::size_t running = 0;
    for (auto& bucket : histogram) {
      std::size_t const size = bucket;
      bucket                 = running;
      running += size;
    }
    for (std::size_t index = 0; index < count; ++index) {
      destination[histogram[digit(source[index], byte)]++] = source[index];
    }
    std::swap(source, destination);
  }
  return source;
}

/// Probes per range when looking for a heavy prefix, and how many must agree.
inline constexpr std::size_t HEAVY_PROBES       = 16;
inline constexpr std::size_t HEAVY_PROBES_AGREE = 12;

/**
 * @return a record whose prefix most of `HEAVY_PROBES` evenly spaced records share (at least
 * `HEAVY_PROBES_AGREE`), or null
 */
template <std::size_t Words>
key_record<Words> const* heavy_prefix(key_record<Words> const* records,
                                      std::size_t count) noexcept {
  std::array<key_record<Words> const*, HEAVY_PROBES> probes{};
  for (std::size_t probe = 0; probe < HEAVY_PROBES; ++probe) {
    probes[probe] = records + probe * count / HEAVY_PROBES;
  }
  for (std::size_t candidate = 0; candidate <= HEAVY_PROBES - HEAVY_PROBES_AGREE; ++candidate) {
    std::size_t agree = 0;
    for (auto const* probe : probes) {
      agree += prefix_equal(*probe, *probes[candidate]) ? 1U : 0U;
    }
    if (agree >= HEAVY_PROBES_AGREE) {
      return probes[candidate];
    }
  }
  return nullptr;
}

/**
 * Copies `records` to `scratch` stably in three groups: prefixes below `pivot`'s, equal to it,
 * above it.
 * @return the sizes of the first two groups
 */
template <std::size_t Words>
[[gnu::noinline]] std::pair<std::size_t, std::size_t> partition_around(
  key_record<Words> const* records,
  key_record<Words>* scratch,
  std::size_t count,
  key_record<Words> const pivot) noexcept {
  std::size_t less_count  = 0;
  std::size_t equal_count = 0;
  for (std::size_t index = 0; index < count; ++index) {
    less_count += prefix_less(records[index], pivot) ? 1U : 0U;
    equal_count += prefix_equal(records[index], pivot) ? 1U : 0U;
  }
  std::size_t less    = 0;
  std::size_t equal   = less_count;
  std::size_t greater = less_count + equal_count;
  for (std::size_t index = 0; index < count; ++index) {
    auto const& item = records[index];
    std::size_t& slot =
      prefix_less(item, pivot) ? less : (prefix_equal(item, pivot) ? equal : greater);
    scratch[slot++] = item;
  }
  return {less_count, equal_count};
}

/// Below this many records a carried sort (see `msd_radix_sort`) orders them by insertion.
inline constexpr std::size_t INSERTION_SORT_MAX_ROWS = 48;

/**
 * Sorts fewer than RADIX_SORT_MIN_ROWS `records` by prefix bytes [`first`, `bytes`), stably.
 * Records whose `row` is a source row are ordered by (prefix, row); records that `carried` a
 * value in `row` instead keep their order among equal prefixes, by insertion or LSD passes.
 * @return the array holding the sorted records: `records` or `scratch`
 */
template <std::size_t Words>
key_record<Words>* small_sort(key_record<Words>* records,
                              key_record<Words>* scratch,
                              std::size_t count,
                              std::size_t first,
                              std::size_t bytes,
                              bool carried) {
  if (!carried) {
    // Within a bucket the rows still ascend, so (prefix, row) order is the stable order.
    std::sort(records, records + count, [](auto const& lhs, auto const& rhs) {
      return prefix_less(lhs, rhs) || (prefix_equal(lhs, rhs) && lhs.row < rhs.row);
    });
    return records;
  }
  if (count > INSERTION_SORT_MAX_ROWS && bytes - first <= LSD_RADIX_MAX_PASSES) {
    return lsd_radix_sort(records, scratch, count, first, bytes);
  }
  for (std::size_t index = 1; index < count; ++index) {
    key_record<Words> const item = records[index];
    std::size_t slot             = index;
    for (; slot > 0 && prefix_less(item, records[slot - 1]); --slot) {
      records[slot] = records[slot - 1];
    }
    records[slot] = item;
  }
  return records;
}

/**
 * Sorts `records` by prefix bytes [`first`, `bytes`), stably, using `scratch` (as long as
 * `records`). Large inputs take one MSD pass on their first varying byte, which cuts them into
 * 256 buckets that each fit the cache, and each bucket is sorted on the remaining bytes there
 * (recursively while a bucket is still large, with the two arrays' roles swapped), instead of
 * every LSD pass streaming the whole input through memory. A range whose prefixes are all equal
 * (a heavy key's bucket) is left where it is after one comparing pass; a prefix most of a
 * range's records share (at any size) takes one three-way pass around it first.
 * @return the array holding the sorted records: `records` or `scratch`
 */
template <std::size_t Words>
key_record<Words>* msd_radix_sort(key_record<Words>* records,
                                  key_record<Words>* scratch,
                                  std::size_t count,
                                  std::size_t first,
                                  std::size_t bytes,
                                  bool carried) {
  using record = key_record<Words>;
  if (first >= bytes) {
    return records;
  }
  if (count < RADIX_SORT_MIN_ROWS) {
    return small_sort(records, scratch, count, first, bytes, carried);
  }
  // Sorts the range of `scratch` at `begin` from byte `from` with the same range of `records` as
  // its scratch space, and leaves it in `scratch`.
  auto const sort_in_scratch = [&](std::size_t begin, std::size_t size, std::size_t from) {
    if (size > 1) {
      record* const sorted =
        msd_radix_sort(scratch + begin, records + begin, size, from, bytes, carried);
      if (sorted != scratch + begin) {
        std::copy(sorted, sorted + size, scratch + begin);
      }
    }
  };
  // Records of one bucket share the bytes before `first`: equal prefixes are equal on the rest.
  if (std::all_of(records + 1, records + count, [&](record const& other) {
        return prefix_equal(other, records[0]);
      })) {
    return records;
  }
  if (record const* heavy = heavy_prefix(records, count)) {
    // Most rows share one prefix: one stable three-way pass around it (those rows are then in
    // order) instead of a radix pass per byte it spans. Cache-sized inputs too: a sort's chunk
    // of a skewed column took eight LSD passes for the tenth of its rows that were not the key.
    auto const [less_count, equal_count] = partition_around(records, scratch, count, *heavy);
    std::array<std::pair<std::size_t, std::size_t>, 2> const sides{
      {{0, less_count}, {less_count + equal_count, count - less_count - equal_count}}};
    for (auto const& [begin, size] : sides) {
      sort_in_scratch(begin, size, first);
    }
    return scratch;
  }
  if (count * sizeof(record) <= LSD_RADIX_MAX_BYTES && bytes - first <= LSD_RADIX_MAX_PASSES) {
    return lsd_radix_sort(records, scratch, count, first, bytes);
  }
  std::array<std::size_t, 256> const histogram = digit_counts(records, count, first);
  if (std::any_of(histogram.begin(), histogram.end(), [count](std::size_t bucket) {
        return bucket == count;
      })) {
    return msd_radix_sort(records, scratch, count, first + 1, bytes, carried);
  }
  std::array<std::size_t, 257> starts{};
  for (std::size_t bucket = 0; bucket < 256; ++bucket) {
    starts[bucket + 1] = starts[bucket] + histogram[bucket];
  }
  std::array<std::size_t, 256> next{};
  std::copy(starts.begin(), starts.end() - 1, next.begin());
  for (std::size_t index = 0; index < count; ++index) {
    scratch[next[digit(records[index], first)]++] = records[index];
  }
  // Each bucket now sits in `scratch`; it is sorted there on the remaining bytes.
  for (std::size_t bucket = 0; bucket < 256; ++bucket) {
    sort_in_scratch(starts[bucket], starts[bucket + 1] - starts[bucket], first + 1);
  }
  return scratch;
}

/**
 * Sorts `records` by prefix, stably, using `scratch` (as long as `records`).
 * @return the array holding the sorted records: `records` or `scratch`
 */
template <std::size_t Words>
key_record<Words>* radix_sort(key_record<Words>* records,
                              key_record<Words>* scratch,
                              std::size_t count,
                              std::size_t bytes,
                              bool carried) {
  if (count < RADIX_SORT_MIN_ROWS) {
    return small_sort(records, scratch, count, 0, bytes, carried);
  }
  // Already in order (by prefix; rows ascend within equal prefixes as encoded): one pass that
  // stops at the first descent, so unsorted inputs pay almost nothing for it.
  if (std::is_sorted(records, records + count, [](auto const& lhs, auto const& rhs) {
        return prefix_less(lhs, rhs);
      })) {
    return records;
  }
  return msd_radix_sort(records, scratch, count, 0, bytes, carried);
}

}  // namespace spillway::detail
