/**
 * @file bucket_sort.hpp
 * @brief Internal: the parallel CPU sort of key records larger than a cache: a sample places a
 * digit, the worker pool counts and scatters the records into cache-sized buckets, and each part
 * sorts its buckets and writes their rows in order (`bucket_sort_records`).
 */
#pragma once

#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/radix_sort.hpp"
#include "ops/record_merge.hpp"

#include <spillway/core/stream_view.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace spillway::detail {

/// Records encoded at a time (on the stack) by the counting and scattering passes of
/// `bucket_sort_records`.
inline constexpr std::size_t ENCODE_BLOCK_ROWS = 512;
/// Rows `bucket_sort_records` samples first, to place its digit and to decline inputs it would
/// not sort well without a pass over them.
inline constexpr std::size_t BUCKET_SAMPLE_ROWS = 1024;
/// `bucket_sort_records` declines (for the two sorted halves and their merge) when one bucket
/// would hold more than this fraction of the rows: the threads could not share the work.
inline constexpr std::size_t MAX_BUCKET_SHARE = 4;

/// Buckets of `bucket_sort_records`: 256, doubled (up to MAX_BUCKETS) while the average bucket
/// would hold more than BUCKET_TARGET_BYTES of records, so that a bucket and its scratch stay in
/// a core's L2 cache. 20M 16-byte records: 1024 buckets of 312 KiB took the in-memory sort from
/// 0.40-0.42 s to 0.37-0.38 s; 4096 buckets were slower again (0.39-0.40 s).
inline constexpr std::size_t MIN_BUCKETS         = 256;
inline constexpr std::size_t MAX_BUCKETS         = 1024;
inline constexpr std::size_t BUCKET_TARGET_BYTES = std::size_t{512} << 10;

/**
 * A bucket of `buckets` (a power of two, at most 2^56) for each record: the 64 prefix bits from
 * bit `bit` (0: the first word's highest; the bits before it are the same in every record), less
 * `low`, shifted right by `shift`, and capped at the last bucket. The bucket never falls as the
 * prefix rises, so sorting each bucket sorts the whole; a range taken from a sample spreads the
 * buckets however narrow the keys' range is or wherever it sits (keys on both sides of zero
 * differ in their first bit).
 */
template <std::size_t Words>
class bucket_digit {
 public:
  bucket_digit(std::size_t bit,
               std::size_t buckets,
               std::span<key_record<Words> const> sample) noexcept
    : bit_(bit), last_(buckets - 1) {
    std::uint64_t high = 0;
    low_               = ~std::uint64_t{0};
    for (auto const& item : sample) {
      std::uint64_t const value = window(item);
      low_                      = std::min(low_, value);
      high                      = std::max(high, value);
    }
    // The smallest shift that leaves `buckets` digits from `low_` rounded down to its multiple.
    // (Below 64: the top bits of any two windows differ by less than the number of buckets.)
    shift_ = 0;
    while (((high >> shift_) - (low_ >> shift_)) > last_) {
      ++shift_;
    }
    low_ = low_ >> shift_ << shift_;
  }

  /**
   * @return the first prefix byte in which the records of `bucket` may differ: the windows of
   * the buckets between the first and the last share their bits above `shift` (the first bucket
   * holds every smaller window too, and the last every larger one)
   */
  [[nodiscard]] std::size_t first_byte(std::size_t bucket) const noexcept {
    return bucket > 0 && bucket < last_ ? (bit_ + 64 - shift_) / 8 : bit_ / 8;
  }

  [[nodiscard]] std::size_t operator()(key_record<Words> const& item) const noexcept {
    std::uint64_t const value = window(item);
    if (value < low_) {
      return 0;
    }
    return static_cast<std::size_t>(std::min<std::uint64_t>(last_, (value - low_) >> shift_));
  }

 private:
  [[nodiscard]] std::uint64_t window(key_record<Words> const& item) const noexcept {
    std::size_t const word  = bit_ / 64;
    std::size_t const shift = bit_ % 64;
    std::uint64_t value     = item.key[word] << shift;
    if (shift > 0 && word + 1 < Words) {
      value |= item.key[word + 1] >> (64 - shift);
    }
    return value;
  }

  std::size_t bit_;
  std::uint64_t last_;
  std::uint64_t low_;
  unsigned shift_;
};

/// Which prefix bits of a set of records vary: the AND and the OR of their prefixes.
template <std::size_t Words>
struct prefix_bits {
  std::array<std::uint64_t, Words> all_ones = filled(~std::uint64_t{0});
  std::array<std::uint64_t, Words> any_ones = filled(0);

  void add(key_record<Words> const& record) noexcept {
    for (std::size_t word = 0; word < Words; ++word) {
      all_ones[word] &= record.key[word];
      any_ones[word] |= record.key[word];
    }
  }
  void add(prefix_bits const& other) noexcept {
    for (std::size_t word = 0; word < Words; ++word) {
      all_ones[word] &= other.all_ones[word];
      any_ones[word] |= other.any_ones[word];
    }
  }
  /// @return the first bit that varies, or `bits` when none before it does
  [[nodiscard]] std::size_t first_varying(std::size_t bits) const noexcept {
    for (std::size_t word = 0; word < Words; ++word) {
      if (std::uint64_t const varying = all_ones[word] ^ any_ones[word]; varying != 0) {
        return std::min(bits, word * 64 + static_cast<std::size_t>(__builtin_clzll(varying)));
      }
    }
    return bits;
  }

 private:
  static std::array<std::uint64_t, Words> filled(std::uint64_t value) noexcept {
    std::array<std::uint64_t, Words> words{};
    words.fill(value);
    return words;
  }
};

/**
 * Encodes rows `[begin, end)` by `encode`, a block at a time, and calls `visit(record)` with
 * each record in row order. The blocks go to `records[begin, end)` when it is given (the rows
 * are then encoded once), else to the stack.
 */
template <std::size_t Words, typename Encode, typename Visit>
void for_each_encoded(std::size_t begin,
                      std::size_t end,
                      Encode const& encode,
                      key_record<Words>* records,
                      Visit&& visit) {
  std::array<key_record<Words>, ENCODE_BLOCK_ROWS> stack;
  for (std::size_t first = begin; first < end; first += ENCODE_BLOCK_ROWS) {
    std::size_t const last   = std::min(end, first + ENCODE_BLOCK_ROWS);
    key_record<Words>* block = records != nullptr ? records + first : stack.data();
    encode(first, last, block);
    for (std::size_t index = 0; index < last - first; ++index) {
      visit(block[index]);
    }
  }
}

/**
 * Sorts `rows` records that `encode(begin, end, records)` writes (prefixes and row ids of rows
 * [begin, end)) into 256-1024 buckets (see `bucket_digit`), each of `threads` parts on the worker
 * pool counting and scattering its share of the rows; each part then sorts the buckets of about
 * its share of the rows, breaks ties and writes the row ids (and first prefix words) in order to
 * `out` (and `prefixes`), so no merge follows. Buckets keep the row order, so the result is
 * stable. A sample first places the buckets and declines prefixes that look all equal, in order
 * already or heavy on one bucket, without a pass over the rows; the counting pass checks the
 * sample's first varying bit (and counts again from an earlier one) and the heaviest bucket.
 *
 * When `encode_twice` (cheap prefixes: fixed-width keys), the counting pass encodes a block at
 * a time on the stack and the scattering pass encodes the rows again straight into their buckets
 * in `records` (as long as `rows`): no unsorted copy is written and read back, and each bucket
 * is sorted in a scratch as large as its part's largest bucket. Otherwise (strings) the rows
 * are encoded once into `records` and scattered into a scratch as long as `rows`.
 * @return false (nothing written) when declined: the caller sorts another way
 */
template <std::size_t Words, typename Encode>
bool bucket_sort_records(std::size_t rows,
                         std::size_t threads,
                         bool encode_twice,
                         bool carried,
                         Encode const& encode,
                         tie_breaker<Words> const& order,
                         key_record<Words>* records,
                         std::uint64_t* out,
                         prefix_words const& prefixes,
                         stream_view stream,
                         resource_ref temporary) {
  using record             = key_record<Words>;
  std::size_t const bits   = order.bytes() * 8;
  std::size_t bucket_count = MIN_BUCKETS;
  while (bucket_count < MAX_BUCKETS && rows * sizeof(record) / bucket_count > BUCKET_TARGET_BYTES) {
    bucket_count *= 2;
  }

  // The sample: which bits vary, whether it ascends, how its digits spread.
  std::vector<record> sample(BUCKET_SAMPLE_ROWS);
  prefix_bits<Words> sampled;
  bool sample_ascends = true;
  for (std::size_t index = 0; index < BUCKET_SAMPLE_ROWS; ++index) {
    std::size_t const row = index * rows / BUCKET_SAMPLE_ROWS;
    encode(row, row + 1, &sample[index]);
    sampled.add(sample[index]);
    sample_ascends =
      sample_ascends && (index == 0 || !prefix_less(sample[index], sample[index - 1]));
  }
  std::size_t bit = sampled.first_varying(bits);
  if (bit == bits || sample_ascends) {
    return false;
  }
  bucket_digit<Words> digit_of{bit, bucket_count, sample};
  std::vector<std::size_t> sample_counts(bucket_count, 0);
  for (auto const& item : sample) {
    ++sample_counts[digit_of(item)];
  }
  if (threads > 1 && *std::max_element(sample_counts.begin(), sample_counts.end()) >
                       BUCKET_SAMPLE_ROWS / MAX_BUCKET_SHARE) {
    return false;
  }

  // Part p counts and scatters rows [bounds[p], bounds[p + 1]).
  std::size_t const parts = threads;
  std::vector<std::size_t> bounds(parts + 1);
  for (std::size_t part = 0; part <= parts; ++part) {
    bounds[part] = part_begin(rows, parts, part);
  }
  // Count the digits at `bit`, and check that no bit before it varies.
  std::vector<std::vector<std::size_t>> counts(parts, std::vector<std::size_t>(bucket_count, 0));
  std::vector<prefix_bits<Words>> seen(parts);
  parallel_for(parts, [&](std::size_t part) {
    for_each_encoded<Words>(bounds[part],
                            bounds[part + 1],
                            encode,
                            encode_twice ? nullptr : records,
                            [&](record const& item) {
                              seen[part].add(item);
                              ++counts[part][digit_of(item)];
                            });
  });
  for (std::size_t part = 1; part < parts; ++part) {
    seen[0].add(seen[part]);
  }
  if (std::size_t const varying = seen[0].first_varying(bits); varying != bit) {
    if (varying == bits) {
      return false;
    }
    // The sample missed a varying bit (its own bits vary among the rows' ones).
    bit      = varying;
    digit_of = bucket_digit<Words>{bit, bucket_count, sample};
    parallel_for(parts, [&](std::size_t part) {
      std::fill(counts[part].begin(), counts[part].end(), 0);
      auto const tally = [&](record const& item) { ++counts[part][digit_of(item)]; };
      if (encode_twice) {
        for_each_encoded<Words>(bounds[part], bounds[part + 1], encode, nullptr, tally);
      } else {
        std::for_each(records + bounds[part], records + bounds[part + 1], tally);
      }
    });
  }
  std::vector<std::size_t> starts(bucket_count + 1, 0);
  std::size_t largest = 0;
  for (std::size_t bucket = 0; bucket < bucket_count; ++bucket) {
    std::size_t size = 0;
    for (std::size_t part = 0; part < parts; ++part) {
      size += counts[part][bucket];
    }
    starts[bucket + 1] = starts[bucket] + size;
    largest            = std::max(largest, size);
  }
  if (threads > 1 && largest > rows / MAX_BUCKET_SHARE) {
    return false;
  }

  // Part p sorts buckets [bucket_bounds[p], bucket_bounds[p + 1]): each cut the one nearest
  // `bounds[p]` rows. Each part's scratch holds its largest bucket (every row when encoded once).
  std::vector<std::size_t> bucket_bounds(parts + 1, bucket_count);
  bucket_bounds[0] = 0;
  for (std::size_t part = 1; part < parts; ++part) {
    std::size_t const target = bounds[part];
    std::size_t cut          = bucket_bounds[part - 1];
    while (cut < bucket_count && starts[cut + 1] <= target) {
      ++cut;
    }
    if (cut < bucket_count && starts[cut] <= target &&
        starts[cut + 1] - target < target - starts[cut]) {
      ++cut;
    }
    bucket_bounds[part] = cut;
  }
  // scratch_first[p]: where part p's scratch starts; the last entry, the whole scratch.
  std::vector<std::size_t> scratch_first(parts + 1, 0);
  for (std::size_t part = 0; part < parts; ++part) {
    std::size_t part_rows = 0;
    if (encode_twice) {
      for (std::size_t bucket = bucket_bounds[part]; bucket < bucket_bounds[part + 1]; ++bucket) {
        part_rows = std::max(part_rows, starts[bucket + 1] - starts[bucket]);
      }
    } else if (part == 0) {
      part_rows = rows;
    }
    scratch_first[part + 1] = scratch_first[part] + part_rows;
  }
  buffer scratch_memory{scratch_first[parts] * sizeof(record), stream, temporary};
  auto* scratch = static_cast<record*>(scratch_memory.data());
  // Where the buckets go, and where each bucket's sort finds its scratch space.
  record* const buckets = encode_twice ? records : scratch;
  auto const scratch_of = [&](std::size_t part, std::size_t begin) {
    return encode_twice ? scratch + scratch_first[part] : records + begin;
  };

  // Scatter: each part's rows of a bucket follow those of the parts before it.
  parallel_for(parts, [&](std::size_t part) {
    std::vector<std::size_t> next(bucket_count);
    for (std::size_t bucket = 0; bucket < bucket_count; ++bucket) {
      next[bucket] = starts[bucket];
      for (std::size_t before = 0; before < part; ++before) {
        next[bucket] += counts[before][bucket];
      }
    }
    auto const place = [&](record const& item) { buckets[next[digit_of(item)]++] = item; };
    if (encode_twice) {
      for_each_encoded<Words>(bounds[part], bounds[part + 1], encode, nullptr, place);
    } else {
      std::for_each(records + bounds[part], records + bounds[part + 1], place);
    }
  });

  parallel_for(parts, [&](std::size_t part) {
    for (std::size_t bucket = bucket_bounds[part]; bucket < bucket_bounds[part + 1]; ++bucket) {
      std::size_t const begin = starts[bucket];
      std::size_t const size  = starts[bucket + 1] - begin;
      record* sorted          = buckets + begin;
      if (size > 1) {
        sorted = msd_radix_sort(buckets + begin,
                                scratch_of(part, begin),
                                size,
                                digit_of.first_byte(bucket),
                                order.bytes(),
                                carried);
        order.resolve(sorted, size);
      }
      for (std::size_t index = 0; index < size; ++index) {
        out[begin + index] = sorted[index].row;
        write_prefix(prefixes, begin + index, sorted[index]);
      }
    }
  });
  return true;
}

}  // namespace spillway::detail
