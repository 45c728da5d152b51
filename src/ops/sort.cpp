#include "ops/cuda/device_ops.hpp"
#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/ops/sort.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <exception>
#include <optional>
#include <span>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// Below this many rows a comparison sort of the records beats the radix passes.
constexpr std::size_t RADIX_SORT_MIN_ROWS = 256;
/// Records of at most this many bytes (the input and its scratch stay in a core's L2 cache) are
/// sorted by LSD passes; larger inputs are first cut into buckets by an MSD pass. At 256 KiB, the
/// 625 KiB buckets of 10M keys took a second MSD pass into buckets of ~150 records:
/// spillway_ops_bench sorted_order_int64/random 235-259 ms, against 199 ms at 2 MiB.
constexpr std::size_t LSD_RADIX_MAX_BYTES = 2048 * 1024;
/// Nor with more LSD passes than this: a long prefix (strings) takes further MSD passes, which
/// soon leave buckets small enough for a comparison sort. 50M string keys of 10-30 letters spent
/// a sixth of their sort in 20-odd LSD passes per cache-sized bucket.
constexpr std::size_t LSD_RADIX_MAX_PASSES = 8;

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
constexpr std::size_t HEAVY_PROBES       = 16;
constexpr std::size_t HEAVY_PROBES_AGREE = 12;

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
constexpr std::size_t INSERTION_SORT_MAX_ROWS = 48;

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
 * (a heavy key's bucket) is left where it is after one comparing pass.
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
  if (count * sizeof(record) <= LSD_RADIX_MAX_BYTES && bytes - first <= LSD_RADIX_MAX_PASSES) {
    return lsd_radix_sort(records, scratch, count, first, bytes);
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
    // order) instead of a radix pass per byte it spans.
    auto const [less_count, equal_count] = partition_around(records, scratch, count, *heavy);
    std::array<std::pair<std::size_t, std::size_t>, 2> const sides{
      {{0, less_count}, {less_count + equal_count, count - less_count - equal_count}}};
    for (auto const& [begin, size] : sides) {
      sort_in_scratch(begin, size, first);
    }
    return scratch;
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

/// Orders records whose prefixes are equal by their full rows.
template <std::size_t Words>
class tie_breaker {
 public:
  tie_breaker(table_view const& keys,
              row_comparator const& comparator,
              normalized_key_layout const& layout,
              sort_stability stability)
    : keys_(keys),
      comparator_(comparator),
      complete_(layout.complete),
      stable_(stability == sort_stability::STABLE),
      bytes_(layout.bytes) {}

  /// @return the prefix bytes in use
  [[nodiscard]] std::size_t bytes() const noexcept { return bytes_; }

  /// Sorts each run of equal prefixes in `records` by the full rows.
  void resolve(key_record<Words>* records, std::size_t count) const {
    if (complete_) {
      return;
    }
    std::size_t begin = 0;
    while (begin < count) {
      std::size_t end = begin + 1;
      while (end < count && prefix_equal(records[begin], records[end])) {
        ++end;
      }
      if (end - begin > 1) {
        std::sort(records + begin, records + end, [this](auto const& lhs, auto const& rhs) {
          int const result = comparator_.compare(keys_, lhs.row, keys_, rhs.row);
          return result != 0 ? result < 0 : (stable_ && lhs.row < rhs.row);
        });
      }
      begin = end;
    }
  }

  /// @return whether `lhs` goes strictly before `rhs` (prefix, then full rows; ties are false)
  [[nodiscard]] bool less(key_record<Words> const& lhs,
                          key_record<Words> const& rhs) const noexcept {
    for (std::size_t word = 0; word < Words; ++word) {
      if (lhs.key[word] != rhs.key[word]) {
        return lhs.key[word] < rhs.key[word];
      }
    }
    return !complete_ && comparator_.compare(keys_, lhs.row, keys_, rhs.row) < 0;
  }

 private:
  table_view const& keys_;
  row_comparator const& comparator_;
  bool complete_;
  bool stable_;
  std::size_t bytes_;
};

/**
 * How many of the first `taken` rows of the merge of the sorted runs `left` and `right` come
 * from `left` (the rest come from `right`), ties going to `left`: a binary search for the point
 * where the merge path crosses diagonal `taken`, so that parts of a merge start anywhere.
 */
template <std::size_t Words>
std::size_t left_rows_before(key_record<Words> const* left,
                             std::size_t left_count,
                             key_record<Words> const* right,
                             std::size_t right_count,
                             tie_breaker<Words> const& order,
                             std::size_t taken) noexcept {
  std::size_t low  = taken > right_count ? taken - right_count : 0;
  std::size_t high = std::min(taken, left_count);
  while (low < high) {
    std::size_t const from_left = low + (high - low) / 2;  // < high <= left_count
    // Too few from the left while left[from_left] leaves before right[taken - from_left - 1].
    if (!order.less(right[taken - from_left - 1], left[from_left])) {
      low = from_left + 1;
    } else {
      high = from_left;
    }
  }
  return low;
}

/**
 * Writes rows [begin, end) of the merge of the sorted runs `left` and `right` to `out` (and
 * their prefix words to `prefixes`), at their places. Ties go to `left`, so parts that cover
 * the rows write each row once, in the order of a merge of them all.
 */
template <std::size_t Words>
void merge_rows(key_record<Words> const* left,
                std::size_t left_count,
                key_record<Words> const* right,
                std::size_t right_count,
                tie_breaker<Words> const& order,
                std::uint64_t* out,
                prefix_words const& prefixes,
                std::size_t begin,
                std::size_t end) noexcept {
  std::size_t l = left_rows_before(left, left_count, right, right_count, order, begin);
  std::size_t r = begin - l;
  for (std::size_t position = begin; position < end; ++position) {
    bool const take_right = l == left_count || (r < right_count && order.less(right[r], left[l]));
    key_record<Words> const& taken = take_right ? right[r++] : left[l++];
    out[position]                  = taken.row;
    write_prefix(prefixes, position, taken);
  }
}

/// Records encoded at a time (on the stack) by the counting and scattering passes of
/// `bucket_sort_records`.
constexpr std::size_t ENCODE_BLOCK_ROWS = 512;
/// Rows `bucket_sort_records` samples first, to place its digit and to decline inputs it would
/// not sort well without a pass over them.
constexpr std::size_t BUCKET_SAMPLE_ROWS = 1024;
/// `bucket_sort_records` declines (for the two sorted halves and their merge) when one bucket
/// would hold more than this fraction of the rows: the threads could not share the work.
constexpr std::size_t MAX_BUCKET_SHARE = 4;

/// Buckets of `bucket_sort_records`: 256, doubled (up to MAX_BUCKETS) while the average bucket
/// would hold more than BUCKET_TARGET_BYTES of records, so that a bucket and its scratch stay in
/// a core's L2 cache. 20M 16-byte records: 1024 buckets of 312 KiB took the in-memory sort from
/// 0.40-0.42 s to 0.37-0.38 s; 4096 buckets were slower again (0.39-0.40 s).
constexpr std::size_t MIN_BUCKETS         = 256;
constexpr std::size_t MAX_BUCKETS         = 1024;
constexpr std::size_t BUCKET_TARGET_BYTES = std::size_t{512} << 10;

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

/**
 * Sorts `rows` records that `encode(begin, end, records)` writes (prefixes and row ids of rows
 * [begin, end)) and writes their row ids in order to `out`, in one part per pool thread (one
 * part below PARALLEL_SORT_MIN_ROWS, and no part below half of it). Inputs larger than a cache's
 * bucket are bucketed by `bucket_sort_records`; the others (and those it declines) are encoded
 * and radix sorted in two halves in two parts, then merged in one part per pool thread.
 */
template <std::size_t Words, typename Encode>
void sort_records(std::size_t rows,
                  Encode const& encode,
                  tie_breaker<Words> const& order,
                  std::uint64_t* out,
                  prefix_words const& prefixes,
                  bool encode_twice,
                  bool carried,
                  stream_view stream,
                  resource_ref temporary) {
  using record = key_record<Words>;
  buffer records_memory{rows * sizeof(record), stream, temporary};
  auto* records             = static_cast<record*>(records_memory.data());
  std::size_t const threads = parallel_parts(rows, PARALLEL_SORT_MIN_ROWS / 2);
  if (rows * sizeof(record) > LSD_RADIX_MAX_BYTES && bucket_sort_records(rows,
                                                                         threads,
                                                                         encode_twice,
                                                                         carried,
                                                                         encode,
                                                                         order,
                                                                         records,
                                                                         out,
                                                                         prefixes,
                                                                         stream,
                                                                         temporary)) {
    return;
  }
  buffer scratch_memory{rows * sizeof(record), stream, temporary};
  auto* scratch = static_cast<record*>(scratch_memory.data());

  auto const sort_range = [&](std::size_t begin, std::size_t end) {
    encode(begin, end, records + begin);
    record* sorted =
      radix_sort(records + begin, scratch + begin, end - begin, order.bytes(), carried);
    order.resolve(sorted, end - begin);
    return sorted;
  };

  if (threads == 1) {
    record const* sorted = sort_range(0, rows);
    for (std::size_t index = 0; index < rows; ++index) {
      out[index] = sorted[index].row;
      write_prefix(prefixes, index, sorted[index]);
    }
    return;
  }
  // Two halves sorted in two parts, then their merge in `threads` parts of the output, each
  // starting where the merge path crosses its first row.
  std::size_t const middle = rows / 2;
  std::array<record*, 2> halves{};
  parallel_for(2, [&](std::size_t half) {
    halves[half] = half == 0 ? sort_range(0, middle) : sort_range(middle, rows);
  });
  parallel_for(threads, [&](std::size_t part) {
    merge_rows<Words>(halves[0],
                      middle,
                      halves[1],
                      rows - middle,
                      order,
                      out,
                      prefixes,
                      part_begin(rows, threads, part),
                      part_begin(rows, threads, part + 1));
  });
}

template <std::size_t Words>
void sort_rows(table_view const& keys,
               normalized_key_layout const& layout,
               row_comparator const& comparator,
               sort_stability stability,
               std::uint64_t* out,
               stream_view stream,
               resource_ref temporary) {
  tie_breaker<Words> const order{keys, comparator, layout, stability};
  // Prefixes of fixed-width keys cost less to encode twice than to write and read back.
  bool const encode_twice =
    std::all_of(layout.segments.begin(), layout.segments.end(), [&](auto const& segment) {
      return is_fixed_width(keys.column(segment.column).type());
    });
  sort_records<Words>(
    keys.num_rows(),
    [&](std::size_t begin, std::size_t end, key_record<Words>* records) {
      encode_normalized_keys<Words>(layout, keys, begin, end, records);
    },
    order,
    out,
    prefix_words{},
    encode_twice,
    false,
    stream,
    temporary);
}

/**
 * The rows of every table of `keys` as source ids (see `sorted_sources`) in key order; ties in
 * input order. The prefix is complete, so the tie breaker never compares rows.
 */
template <std::size_t Words>
void sort_sources(std::span<table_view const> keys,
                  normalized_key_layout const& layout,
                  row_comparator const& comparator,
                  std::uint64_t* out,
                  prefix_words const& prefixes,
                  std::size_t rows,
                  stream_view stream,
                  resource_ref temporary) {
  // starts[i]: the first global row of input i.
  std::vector<std::size_t> starts(keys.size() + 1, 0);
  for (std::size_t input = 0; input < keys.size(); ++input) {
    starts[input + 1] = starts[input] + keys[input].num_rows();
  }
  tie_breaker<Words> const order{keys.front(), comparator, layout, sort_stability::STABLE};
  sort_records<Words>(
    rows,
    [&](std::size_t begin, std::size_t end, key_record<Words>* records) {
      // The inputs that overlap global rows [begin, end), each encoded with its id in the row.
      auto input = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                            starts.begin() - 1);
      for (std::size_t row = begin; row < end; ++input) {
        std::size_t const first = row - starts[input];
        std::size_t const last  = std::min(end, starts[input + 1]) - starts[input];
        key_record<Words>* part = records + (row - begin);
        encode_normalized_keys<Words>(layout, keys[input], first, last, part);
        std::uint64_t const tag = static_cast<std::uint64_t>(input) << SOURCE_ROW_BITS;
        for (std::size_t index = 0; index < last - first; ++index) {
          part[index].row |= tag;
        }
        row += last - first;
      }
    },
    order,
    out,
    prefixes,
    true,  // the keys are fixed-width
    false,
    stream,
    temporary);
}

/// Rows compared per branch-free block by `fixed_in_order`: unsorted inputs stop in the first.
constexpr std::size_t IN_ORDER_BLOCK_ROWS = 1024;

/// Whether `values` never descend (`Descending`: never ascend), in `row_comparator`'s order of
/// values: NaN after every number, NaNs tied.
template <typename T, bool Descending>
bool fixed_in_order(T const* values, std::size_t rows) noexcept {
  auto const before = [](T lhs, T rhs) noexcept {
    if constexpr (std::is_floating_point_v<T>) {
      return !std::isnan(lhs) && (std::isnan(rhs) || lhs < rhs);
    } else {
      return lhs < rhs;
    }
  };
  for (std::size_t begin = 1; begin < rows; begin += IN_ORDER_BLOCK_ROWS) {
    std::size_t const end = std::min(rows, begin + IN_ORDER_BLOCK_ROWS);
    bool descent          = false;
    for (std::size_t row = begin; row < end; ++row) {
      descent |=
        Descending ? before(values[row - 1], values[row]) : before(values[row], values[row - 1]);
    }
    if (descent) {
      return false;
    }
  }
  return true;
}

/// `is_sorted` with resolved orders.
bool keys_in_order(table_view const& keys, sort_order const& orders) {
  std::size_t const rows = keys.num_rows();
  if (rows <= 1 || keys.num_columns() == 0) {
    return true;
  }
  column_view const& first = keys.column(0);
  if (keys.num_columns() == 1 && is_fixed_width(first.type()) && !first.has_nulls()) {
    bool const descending = orders.front().direction == order::DESCENDING;
    return visit_fixed_width(first.type(), [&]<typename T>() {
      T const* values = first.data<T>();
      return descending ? fixed_in_order<T, true>(values, rows)
                        : fixed_in_order<T, false>(values, rows);
    });
  }
  row_comparator const comparator{keys, orders};
  for (std::size_t row = 1; row < rows; ++row) {
    if (comparator.compare(keys, row, keys, row - 1) < 0) {
      return false;
    }
  }
  return true;
}

}  // namespace

std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     sort_stability stability,
                                     stream_view stream,
                                     memory_resources mrs,
                                     bool check_order) {
  sort_order const resolved = resolve_orders(orders, keys.num_columns());
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(keys)) {
    return cuda::sorted_order(keys, resolved, stream, mrs);
  }
#endif
  std::size_t const rows = keys.num_rows();
  auto result =
    make_fixed_width_column(type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto* out                    = result->mutable_data<std::uint64_t>();
  normalized_key_layout layout = plan_normalized_keys(keys, resolved);
  narrow_string_prefix(layout, std::span<table_view const>{&keys, 1});
  if (rows <= 1 || layout.words() == 0 || (check_order && keys_in_order(keys, resolved))) {
    // No rows to move, no key columns, or rows already in order: the input order is sorted.
    for (std::size_t row = 0; row < rows; ++row) {
      out[row] = row;
    }
    return result;
  }
  row_comparator const comparator{keys, resolved};
  with_prefix_words(layout.words(), [&]<std::size_t Words>() {
    sort_rows<Words>(keys, layout, comparator, stability, out, stream, mrs.temporary());
  });
  return result;
}

std::unique_ptr<column> sorted_sources(std::span<table_view const> keys,
                                       sort_order const& orders,
                                       stream_view stream,
                                       memory_resources mrs,
                                       std::vector<std::unique_ptr<column>>* sorted_keys) {
  SPILLWAY_EXPECTS(!keys.empty(), "sorted_sources: no key tables", invalid_argument);
  SPILLWAY_EXPECTS_LT(keys.size(),
                      std::size_t{1} << (64 - SOURCE_ROW_BITS),
                      "sorted_sources: too many key tables",
                      invalid_argument);
  sort_order const resolved = resolve_orders(orders, keys.front().num_columns());
  std::size_t rows          = 0;
  for (auto const& key : keys) {
    SPILLWAY_EXPECTS_EQ(key.num_columns(),
                        keys.front().num_columns(),
                        "sorted_sources: key tables differ in columns",
                        invalid_argument);
    SPILLWAY_EXPECTS_LT(key.num_rows(),
                        std::size_t{1} << SOURCE_ROW_BITS,
                        "sorted_sources: too many rows in one key table",
                        invalid_argument);
    rows += key.num_rows();
  }
#if SPILLWAY_HAS_CUDA
  for (auto const& key : keys) {
    if (cuda::on_device(key)) {
      // On the device: the keys stacked and radix sorted stably (any key types), the key column
      // not decoded.
      if (sorted_keys != nullptr) {
        sorted_keys->clear();
        sorted_keys->resize(keys.front().num_columns());
      }
      return cuda::sorted_sources(keys, resolved, stream, mrs);
    }
  }
#endif
  normalized_key_layout const layout = plan_normalized_keys(keys, resolved);
  SPILLWAY_EXPECTS(layout.complete && layout.words() > 0,
                   "sorted_sources: keys need a complete normalized-key prefix (fixed-width, at "
                   "most " +
                     std::to_string(MAX_PREFIX_BYTES) + " bytes); planned " +
                     std::to_string(layout.bytes) + " bytes",
                   invalid_argument);
  auto result =
    make_fixed_width_column(type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto* out = result->mutable_data<std::uint64_t>();
  // The key columns that come back from their words of the sorted prefixes are written there
  // and then decoded in place.
  prefix_words prefixes{};
  std::vector<std::size_t> decoded;  // their segments
  if (sorted_keys != nullptr) {
    sorted_keys->clear();
    sorted_keys->resize(keys.front().num_columns());
    for (std::size_t index = 0; index < layout.segments.size(); ++index) {
      auto const& segment  = layout.segments[index];
      data_type const type = keys.front().column(segment.column).type();
      if (word_decodes(layout, index, type)) {
        auto& key = (*sorted_keys)[segment.column];
        key = make_fixed_width_column(type, rows, mask_state::UNALLOCATED, stream, mrs.output());
        prefixes[segment.offset / sizeof(std::uint64_t)] = key->mutable_data<std::uint64_t>();
        decoded.push_back(index);
      }
    }
  }
  if (rows == 0) {
    return result;
  }
  row_comparator const comparator{keys.front(), resolved};
  with_prefix_words(layout.words(), [&]<std::size_t Words>() {
    sort_sources<Words>(keys, layout, comparator, out, prefixes, rows, stream, mrs.temporary());
  });
  for (std::size_t const index : decoded) {
    auto const& segment = layout.segments[index];
    auto& key           = *(*sorted_keys)[segment.column];
    decode_word(segment,
                key.type(),
                key.mutable_data<std::uint64_t>(),
                rows,
                key.mutable_data<std::uint64_t>());
  }
  return result;
}

bool sorts_key_values(std::span<table_view const> keys,
                      sort_order const& orders,
                      std::span<column_view const> values) {
  if (keys.empty() || keys.size() != values.size() || keys.front().num_columns() != 1) {
    return false;
  }
  for (auto const& key : keys) {
    if (cuda::on_device(key)) {
      return false;  // the CUDA sort carries row ids; the rows are then gathered
    }
  }
  data_type const key_type   = keys.front().column(0).type();
  data_type const value_type = values.front().type();
  if (!is_fixed_width(key_type) || size_of(key_type) != sizeof(std::uint64_t) ||
      !is_fixed_width(value_type) || size_of(value_type) > sizeof(std::uint64_t)) {
    return false;
  }
  for (std::size_t input = 0; input < keys.size(); ++input) {
    if (keys[input].num_columns() != 1 || keys[input].column(0).type() != key_type ||
        values[input].type() != value_type || values[input].has_nulls() ||
        values[input].size() != keys[input].num_rows()) {
      return false;
    }
  }
  normalized_key_layout const layout =
    plan_normalized_keys(keys, resolve_orders(orders, keys.front().num_columns()));
  return layout.complete && layout.words() == 1 && layout.segments.size() == 1 &&
         word_decodes(layout, 0, key_type);
}

std::pair<std::unique_ptr<column>, std::unique_ptr<column>> sorted_key_values(
  std::span<table_view const> keys,
  sort_order const& orders,
  std::span<column_view const> values,
  stream_view stream,
  memory_resources mrs) {
  SPILLWAY_EXPECTS(sorts_key_values(keys, orders, values),
                   "sorted_key_values: needs one 8-byte integer or timestamp key column without "
                   "nulls and one fixed-width value column of at most 8 bytes without nulls, of "
                   "the same rows in every table",
                   invalid_argument);
  sort_order const resolved = resolve_orders(orders, 1);
  std::vector<std::size_t> starts(keys.size() + 1, 0);
  for (std::size_t input = 0; input < keys.size(); ++input) {
    starts[input + 1] = starts[input] + keys[input].num_rows();
  }
  std::size_t const rows             = starts.back();
  normalized_key_layout const layout = plan_normalized_keys(keys, resolved);
  data_type const key_type           = keys.front().column(0).type();
  data_type const value_type         = values.front().type();
  std::size_t const width            = size_of(value_type);
  auto sorted_keys =
    make_fixed_width_column(key_type, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto const make_values = [&] {
    return make_fixed_width_column(value_type, rows, mask_state::UNALLOCATED, stream, mrs.output());
  };
  if (rows == 0) {
    return {std::move(sorted_keys), make_values()};
  }
  // Values of 8 bytes are written in place. Narrower ones pass through 8 bytes a row, and their
  // column is made once the sort's records are gone: beside the records, 16 bytes a row.
  std::unique_ptr<column> sorted_values;
  std::optional<buffer> wide;
  if (width != sizeof(std::uint64_t)) {
    wide.emplace(rows * sizeof(std::uint64_t), stream, mrs.temporary());
  } else {
    sorted_values = make_values();
  }
  auto* out =
    wide ? static_cast<std::uint64_t*>(wide->data()) : sorted_values->mutable_data<std::uint64_t>();
  auto* prefixes = sorted_keys->mutable_data<std::uint64_t>();
  row_comparator const comparator{keys.front(), resolved};
  tie_breaker<1> const order{keys.front(), comparator, layout, sort_stability::STABLE};
  sort_records<1>(
    rows,
    [&](std::size_t begin, std::size_t end, key_record<1>* records) {
      // The inputs that overlap global rows [begin, end); each record carries its value.
      auto input = static_cast<std::size_t>(std::upper_bound(starts.begin(), starts.end(), begin) -
                                            starts.begin() - 1);
      for (std::size_t row = begin; row < end; ++input) {
        std::size_t const first = row - starts[input];
        std::size_t const last  = std::min(end, starts[input + 1]) - starts[input];
        key_record<1>* part     = records + (row - begin);
        encode_normalized_keys<1>(layout, keys[input], first, last, part);
        auto const* value = static_cast<std::byte const*>(values[input].head()) +
                            (values[input].offset() + first) * width;
        for (std::size_t index = 0; index < last - first; ++index) {
          std::uint64_t bits = 0;
          std::memcpy(&bits, value + index * width, width);
          part[index].row = bits;
        }
        row += last - first;
      }
    },
    order,
    out,
    prefix_words{prefixes, nullptr, nullptr},
    true,  // the key is fixed-width
    true,  // records carry values, not rows
    stream,
    mrs.temporary());
  decode_word(layout.segments.front(), key_type, prefixes, rows, prefixes);
  if (wide) {
    sorted_values = make_values();
    auto* narrow  = sorted_values->mutable_data<std::byte>();
    for (std::size_t row = 0; row < rows; ++row) {
      std::memcpy(narrow + row * width, &out[row], width);
    }
  }
  return {std::move(sorted_keys), std::move(sorted_values)};
}

std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders,
                            sort_stability stability,
                            stream_view stream,
                            memory_resources mrs) {
  SPILLWAY_EXPECTS(values.num_rows() == keys.num_rows() || keys.num_columns() == 0,
                   "sort: values and keys differ in rows: " + std::to_string(values.num_rows()) +
                     " vs " + std::to_string(keys.num_rows()),
                   invalid_argument);
  sort_order const resolved = resolve_orders(orders, keys.num_columns());  // validates
  memory_resources const scratch{mrs.temporary(), mrs.temporary()};
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(keys) || cuda::on_device(values)) {
    if (keys.num_columns() == 0) {
      return detail::copy(values, stream, mrs);  // every row ties: the input order is sorted
    }
    auto const permutation = cuda::sorted_order(keys, resolved, stream, scratch);
    return detail::gather(values, *permutation, out_of_bounds_policy::FAIL, stream, mrs);
  }
#endif
  if (keys_in_order(keys, resolved)) {
    // Rows already in order (or no keys: every row ties) are their own sort: one copy.
    return detail::copy(values, stream, mrs);
  }
  auto const permutation = detail::sorted_order(keys, resolved, stability, stream, scratch, false);
  return gather_rows_in_parallel(
    values, permutation->view().data<std::uint64_t>(), values.num_rows(), stream, mrs);
}

}  // namespace detail

bool is_sorted(table_view const& keys,
               sort_order const& orders,
               [[maybe_unused]] stream_view stream) {
#if SPILLWAY_HAS_CUDA
  if (detail::cuda::on_device(keys)) {
    return detail::cuda::is_sorted(
      keys, detail::resolve_orders(orders, keys.num_columns()), stream);
  }
#endif
  return detail::keys_in_order(keys, detail::resolve_orders(orders, keys.num_columns()));
}

std::unique_ptr<column> sorted_order(table_view const& keys,
                                     sort_order const& orders,
                                     sort_stability stability,
                                     stream_view stream,
                                     memory_resources mrs) {
  return detail::sorted_order(keys, orders, stability, stream, mrs);
}

std::unique_ptr<table> sort(table_view const& values,
                            table_view const& keys,
                            sort_order const& orders,
                            sort_stability stability,
                            stream_view stream,
                            memory_resources mrs) {
  return detail::sort(values, keys, orders, stability, stream, mrs);
}

}  // namespace spillway
