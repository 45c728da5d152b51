#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <exception>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <thread>
#include <type_traits>
#include <unistd.h>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spillway {
namespace {

constexpr std::uint32_t PACK_MAGIC   = 0x4B575053;  // "SPWK"
constexpr std::uint16_t PACK_VERSION = 1;
/// Every part of a packed buffer starts at a multiple of this.
constexpr std::size_t PART_ALIGNMENT = 64;

struct header {
  std::uint32_t magic;
  std::uint16_t version;
  std::uint16_t reserved;
  std::uint32_t num_columns;
  std::uint32_t padding;
  std::uint64_t num_rows;
  std::uint64_t data_size;
};

/// A column's metadata. `precision` and `scale` (decimals only) sit in what was padding, zero in
/// entries of every other type, so tables packed before decimals read the same.
struct column_entry {
  std::uint8_t type;
  std::uint8_t unit;
  std::uint8_t nullable;
  std::uint8_t precision;
  std::int32_t scale;
  std::uint64_t null_count;
  std::uint64_t mask_offset;
  std::uint64_t offsets_offset;
  std::uint64_t data_offset;
  std::uint64_t data_bytes;
};

static_assert(sizeof(header) == 32);
static_assert(sizeof(column_entry) == 48);

struct part_layout {
  std::size_t mask_offset    = 0;
  std::size_t offsets_offset = 0;
  std::size_t data_offset    = 0;
  std::size_t data_bytes     = 0;
};

/// Places the parts of a column of `rows` rows (and `chars` characters when it is not fixed
/// width) at `cursor`; returns the cursor after them.
std::size_t place_column(std::size_t cursor,
                         data_type type,
                         bool nullable,
                         std::size_t rows,
                         std::size_t chars,
                         part_layout& part) {
  if (nullable) {
    part.mask_offset = cursor;
    cursor           = align_up(cursor + bitmask_allocation_size(rows), PART_ALIGNMENT);
  }
  if (!is_fixed_width(type)) {
    part.offsets_offset = cursor;
    cursor              = align_up(cursor + (rows + 1) * sizeof(std::int64_t), PART_ALIGNMENT);
    part.data_bytes     = chars;
  } else {
    part.data_bytes = rows * size_of(type);
  }
  part.data_offset = cursor;
  return align_up(cursor + part.data_bytes, PART_ALIGNMENT);
}

/// Places each column's parts; returns the total size. `stream` orders the reads of string
/// offsets that live on a CUDA device.
std::size_t layout(table_view const& input,
                   std::vector<part_layout>* parts,
                   stream_view stream = default_stream()) {
  std::size_t cursor = 0;
  for (auto const& column : input) {
    part_layout part;
    std::size_t const chars = detail::cuda::on_device(column)
                                ? detail::cuda::chars_size(column, stream)
                                : column.chars_size();
    cursor = place_column(cursor, column.type(), column.nullable(), column.size(), chars, part);
    if (parts != nullptr) {
      parts->push_back(part);
    }
  }
  return cursor;
}

/// The metadata entry of a column placed at `part`.
column_entry make_entry(data_type type,
                        bool nullable,
                        std::size_t null_count,
                        part_layout const& part) {
  column_entry entry{};
  entry.type = static_cast<std::uint8_t>(type.id());
  entry.unit = static_cast<std::uint8_t>(type.unit());
  if (is_decimal(type.id())) {
    entry.precision = static_cast<std::uint8_t>(type.precision());
    entry.scale     = type.scale();
  }
  entry.nullable       = nullable ? 1 : 0;
  entry.null_count     = null_count;
  entry.mask_offset    = part.mask_offset;
  entry.offsets_offset = part.offsets_offset;
  entry.data_offset    = part.data_offset;
  entry.data_bytes     = part.data_bytes;
  return entry;
}

/// Metadata of `num_columns` columns of `num_rows` rows in `data_size` bytes, entries unset.
std::vector<std::uint8_t> make_metadata(std::size_t num_columns,
                                        std::size_t num_rows,
                                        std::size_t data_size) {
  std::vector<std::uint8_t> metadata(sizeof(header) + num_columns * sizeof(column_entry));
  header const head{
    PACK_MAGIC, PACK_VERSION, 0, static_cast<std::uint32_t>(num_columns), 0, num_rows, data_size};
  std::memcpy(metadata.data(), &head, sizeof(header));
  return metadata;
}

void set_entry(std::vector<std::uint8_t>& metadata, std::size_t index, column_entry const& entry) {
  std::memcpy(
    metadata.data() + sizeof(header) + index * sizeof(column_entry), &entry, sizeof(entry));
}

/// Writes `input`, laid out as `parts` in `total` bytes, to `destination` (of kind `to`) and its
/// metadata entries to `metadata`.
void fill_packed(table_view const& input,
                 std::vector<part_layout> const& parts,
                 std::size_t total,
                 std::uint8_t* destination,
                 memory_kind to,
                 stream_view stream,
                 std::vector<std::uint8_t>& metadata) {
  // Padding is zeroed so that packed bytes (and their checksums) are deterministic; only the
  // padding, as the data is written once anyway. `written`: the end of what is set so far.
  std::size_t written   = 0;
  auto const zero_up_to = [&](std::size_t end) {
    if (end > written) {
      std::memset(destination + written, 0, end - written);
    }
    written = end;
  };
  for (std::size_t index = 0; index < input.num_columns(); ++index) {
    column_view const& column = input.column(index);
    part_layout const& part   = parts[index];
    std::size_t const rows    = column.size();
    if (column.nullable()) {
      // The whole mask allocation is zeroed: copy_bits leaves the bits past the last row alone.
      zero_up_to(is_fixed_width(column.type()) ? part.data_offset : part.offsets_offset);
      copy_bits(destination + part.mask_offset, 0, column.null_mask(), column.offset(), rows);
    }
    if (!is_fixed_width(column.type())) {
      zero_up_to(part.offsets_offset);
      written = part.offsets_offset + (rows + 1) * sizeof(std::int64_t);
    }
    zero_up_to(part.data_offset);
    written = part.data_offset + part.data_bytes;
    if (is_fixed_width(column.type())) {
      copy_bytes(
        destination + part.data_offset,
        to,
        static_cast<std::uint8_t const*>(column.head()) + column.offset() * size_of(column.type()),
        column.kind(),
        part.data_bytes,
        stream);
    } else {
      auto* offsets           = reinterpret_cast<std::int64_t*>(destination + part.offsets_offset);
      std::int64_t const base = rows == 0 ? 0 : column.offsets()[column.offset()];
      for (std::size_t row = 0; row <= rows; ++row) {
        offsets[row] = rows == 0 ? 0 : column.offsets()[column.offset() + row] - base;
      }
      copy_bytes(destination + part.data_offset,
                 to,
                 column.chars() + base,
                 column.kind(),
                 part.data_bytes,
                 stream);
    }
    set_entry(
      metadata, index, make_entry(column.type(), column.nullable(), column.null_count(), part));
  }
  zero_up_to(total);
}

#if SPILLWAY_HAS_CUDA
/// `fill_packed` where the input or the destination is on a CUDA device: the padding zeroed where
/// the destination lives, each column written by the device copy.
void fill_packed_with_cuda(table_view const& input,
                           std::vector<part_layout> const& parts,
                           std::size_t total,
                           std::uint8_t* destination,
                           memory_kind to,
                           stream_view stream,
                           std::vector<std::uint8_t>& metadata) {
  fill_bytes(destination, to, 0, total, stream);
  for (std::size_t index = 0; index < input.num_columns(); ++index) {
    column_view const& column = input.column(index);
    part_layout const& part   = parts[index];
    detail::cuda::column_target target;
    target.data    = destination + part.data_offset;
    target.offsets = is_fixed_width(column.type())
                       ? nullptr
                       : reinterpret_cast<std::int64_t*>(destination + part.offsets_offset);
    target.mask    = column.nullable() ? destination + part.mask_offset : nullptr;
    detail::cuda::copy_column_to(target, column, stream);
    set_entry(
      metadata, index, make_entry(column.type(), column.nullable(), column.null_count(), part));
  }
}
#endif

/// Below this many rows `pack_partitions` scatters on the calling thread alone.
constexpr std::size_t PARALLEL_SCATTER_MIN_ROWS = std::size_t{1} << 14;

/// Copies up to 16 bytes with one fixed-size copy when both sides have room for 16.
inline void copy_chars(char* out,
                       std::size_t out_room,
                       char const* in,
                       std::size_t in_room,
                       std::size_t length) noexcept {
  constexpr std::size_t WIDE = 16;
  if (length <= WIDE && out_room >= WIDE && in_room >= WIDE) {
    std::memcpy(out, in, WIDE);
  } else if (length > 0) {
    std::memcpy(out, in, length);
  }
}

/// From this many partitions on, `scatter_partitions` writes fixed-width values and string
/// offsets through cache lines buffered per partition (`scatter_lines`); with fewer, plain
/// stores keep up.
constexpr std::size_t LINE_SCATTER_MIN_PARTITIONS = 16;
/// Up to this many: the buffers (two lines a partition at the least) stay within a core's L2.
constexpr std::size_t LINE_SCATTER_MAX_PARTITIONS = 8192;

constexpr std::size_t CACHE_LINE = 64;
/// The most cache lines a partition's buffer collects before they are written together.
constexpr std::size_t MAX_BUFFER_LINES = 8;
/// The bytes the buffers of all partitions may take together (within a core's L2), beyond
/// buffers of two lines.
constexpr std::size_t SCATTER_BUFFER_BYTES = std::size_t{1} << 20;
static_assert(2 * CACHE_LINE * LINE_SCATTER_MAX_PARTITIONS <= SCATTER_BUFFER_BYTES);

/**
 * Lines per partition buffer for `num_partitions` partitions: as many as fit
 * SCATTER_BUFFER_BYTES, a power of two from 2 up to MAX_BUFFER_LINES (8 up to 2048 partitions, 4
 * for 4096, 2 for 8192). Several lines written at once drain the non-temporal stores faster than
 * one at a time: 64 partitions of the timeseries, the
 * in-memory shuffle's later runs 0.61-0.68 s (1 line), 0.56-0.61 (2), 0.52-0.64 (4), 0.50-0.56
 * (8); 1024 partitions 0.72-0.78 -> 0.64-0.66 s (8); 4096 partitions no gain
 * (7843efc:docs/BENCHMARKS.md, "Buffers of eight lines, and an MPI progress thread that does not
 * sleep on transfers").
 */
std::size_t buffer_lines(std::size_t num_partitions) noexcept {
  std::size_t lines = MAX_BUFFER_LINES;
  while (lines > 2 && lines * CACHE_LINE * num_partitions > SCATTER_BUFFER_BYTES) {
    lines /= 2;
  }
  return lines;
}

template <std::size_t Lines>
struct alignas(CACHE_LINE) line_buffer {
  std::byte bytes[CACHE_LINE * Lines];
};

/// Writes `Lines` cache lines from `from` (16-byte aligned) to `to` (64-byte aligned) without
/// reading `to`'s lines first.
template <std::size_t Lines>
inline void stream_lines(void* to, void const* from) noexcept {
#if defined(__SSE2__)
  auto* out      = static_cast<__m128i*>(to);
  auto const* in = static_cast<__m128i const*>(from);
  for (std::size_t i = 0; i < 4 * Lines; ++i) {
    _mm_stream_si128(out + i, _mm_load_si128(in + i));
  }
#else
  std::memcpy(to, from, CACHE_LINE * Lines);
#endif
}

/**
 * @brief Writes `value(row, p)` for each row of `[begin, end)` at `out[p]` (p = `ids[row]`),
 * advancing `out[p]`, through a buffer of `Lines` cache lines per partition.
 *
 * A store to one of many partitions misses the cache and first reads the destination's line; the
 * buffers (in L1/L2) collect whole lines and write them with non-temporal stores, which read
 * nothing. Only buffers wholly written here are streamed: a partition's first buffer, when
 * `out[p]` does not start a line, and its last, partial one are written with plain stores of their
 * own values, so that the neighbouring bytes (another thread's rows of the same partition, the
 * next part) are left alone. `out[p]` must be aligned to `T`.
 */
template <std::size_t Lines, typename T, typename Id, typename Value>
void scatter_lines(Id const* ids,
                   std::size_t begin,
                   std::size_t end,
                   std::size_t num_partitions,
                   T** out,
                   Value&& value) {
  static_assert(CACHE_LINE % sizeof(T) == 0);
  constexpr auto PER_BUFFER = static_cast<std::uint32_t>(CACHE_LINE * Lines / sizeof(T));
  // (Left unset: every slot is written before it is read; up to 1 MiB a call.)
  auto const lines = std::make_unique_for_overwrite<line_buffer<Lines>[]>(num_partitions);
  std::vector<std::uint32_t> fill(num_partitions, 0);   // next slot of the buffer
  std::vector<std::uint32_t> start(num_partitions, 0);  // first slot this part owns in the line
  std::vector<T*> line_at(num_partitions, nullptr);     // the destination line being collected
  for (std::size_t p = 0; p < num_partitions; ++p) {
    auto const address = reinterpret_cast<std::uintptr_t>(out[p]);
    fill[p]            = static_cast<std::uint32_t>(address % CACHE_LINE / sizeof(T));
    start[p]           = fill[p];
    line_at[p]         = reinterpret_cast<T*>(address - address % CACHE_LINE);
  }
  for (std::size_t row = begin; row < end; ++row) {
    auto const p   = static_cast<std::size_t>(ids[row]);
    T const item   = value(row, p);
    std::byte* buf = lines[p].bytes;
    std::memcpy(buf + fill[p] * sizeof(T), &item, sizeof(T));
    if (++fill[p] == PER_BUFFER) {
      if (start[p] == 0) {
        stream_lines<Lines>(line_at[p], lines[p].bytes);
      } else {
        std::memcpy(
          line_at[p] + start[p], buf + start[p] * sizeof(T), (PER_BUFFER - start[p]) * sizeof(T));
        start[p] = 0;
      }
      line_at[p] += PER_BUFFER;
      fill[p] = 0;
    }
  }
  for (std::size_t p = 0; p < num_partitions; ++p) {
    if (out[p] == nullptr) {
      continue;  // an empty partition: no rows, no memory
    }
    if (fill[p] > start[p]) {
      std::memcpy(line_at[p] + start[p],
                  lines[p].bytes + start[p] * sizeof(T),
                  (fill[p] - start[p]) * sizeof(T));
    }
    out[p] = line_at[p] + fill[p];
  }
#if defined(__SSE2__)
  _mm_sfence();  // the streamed lines are visible before the caller hands the frames on
#endif
}

/**
 * @brief The characters of a string column's rows, appended per partition through a buffer of
 * `Lines` cache lines each, as `scatter_lines` does for fixed-width values: whole buffers are
 * streamed (no read of the destination's lines), a partition's first partial line and its last
 * bytes are written with plain stores of their own bytes only (another thread's characters of
 * the same partition may share those lines). Before, each row's characters went straight to
 * their partition, a plain store reading the line first: the in-memory shuffle's later runs
 * 0.49-0.54 -> 0.43-0.46 s (7843efc:docs/BENCHMARKS.md, "Four processes timed by their
 * makespan, bound to the two cores, and characters through line buffers").
 */
template <std::size_t Lines>
class char_lines {
 public:
  static constexpr std::size_t CAPACITY = CACHE_LINE * Lines;
  /// Strings up to this long are copied with one fixed-size copy where the buffer has room.
  static constexpr std::size_t WIDE = 16;

  /// `to[p]`: where partition p's next characters go.
  char_lines(char* const* to, std::size_t num_partitions)
    : buffers_(std::make_unique_for_overwrite<line_buffer<Lines>[]>(num_partitions)),
      fill_(num_partitions),
      start_(num_partitions),
      line_at_(num_partitions) {
    for (std::size_t p = 0; p < num_partitions; ++p) {
      auto const address = reinterpret_cast<std::uintptr_t>(to[p]);
      fill_[p]           = static_cast<std::uint32_t>(address % CACHE_LINE);
      start_[p]          = fill_[p];
      line_at_[p]        = reinterpret_cast<char*>(address - address % CACHE_LINE);
    }
  }

  /// Appends `length` bytes at `from` to partition p; `from_room` bytes are readable from `from`.
  void append(std::size_t p, char const* from, std::size_t from_room, std::size_t length) noexcept {
    std::byte* const bytes = buffers_[p].bytes;
    std::uint32_t& fill    = fill_[p];
    if (length <= WIDE && from_room >= WIDE && fill + WIDE <= CAPACITY) {
      std::memcpy(bytes + fill, from, WIDE);  // (the bytes past `length` are written over later)
      fill += static_cast<std::uint32_t>(length);
      if (fill == CAPACITY) {
        flush(p);
      }
      return;
    }
    while (length > 0) {
      std::size_t const take = std::min(length, CAPACITY - fill);
      std::memcpy(bytes + fill, from, take);
      fill += static_cast<std::uint32_t>(take);
      from += take;
      length -= take;
      if (fill == CAPACITY) {
        flush(p);
      }
    }
  }

  /// Writes what the buffers still hold.
  void finish() noexcept {
    for (std::size_t p = 0; p < fill_.size(); ++p) {
      if (fill_[p] > start_[p]) {
        std::memcpy(line_at_[p] + start_[p], buffers_[p].bytes + start_[p], fill_[p] - start_[p]);
      }
    }
  }

 private:
  void flush(std::size_t p) noexcept {
    if (start_[p] == 0) {
      stream_lines<Lines>(line_at_[p], buffers_[p].bytes);
    } else {
      std::memcpy(line_at_[p] + start_[p], buffers_[p].bytes + start_[p], CAPACITY - start_[p]);
      start_[p] = 0;
    }
    line_at_[p] += CAPACITY;
    fill_[p] = 0;
  }

  std::unique_ptr<line_buffer<Lines>[]> buffers_;  ///< CAPACITY bytes each, line-aligned
  std::vector<std::uint32_t> fill_;   ///< bytes of the buffer in use (from the start of the line)
  std::vector<std::uint32_t> start_;  ///< the first byte this part owns in the first line
  std::vector<char*> line_at_;        ///< the destination of the buffer
};

/// Calls `f` with `std::integral_constant<std::size_t, L>{}` for L = `lines` (8, 4 or 2).
template <typename F>
void with_lines(std::size_t lines, F&& f) {
  switch (lines) {
    case 8:
      f(std::integral_constant<std::size_t, 8>{});
      break;
    case 4:
      f(std::integral_constant<std::size_t, 4>{});
      break;
    default:  // 2
      f(std::integral_constant<std::size_t, 2>{});
      break;
  }
}

/// `scatter_lines` with buffers of `buffer_lines(num_partitions)` lines.
template <typename T, typename Id, typename Value>
void scatter_buffered(Id const* ids,
                      std::size_t begin,
                      std::size_t end,
                      std::size_t num_partitions,
                      T** out,
                      Value&& value) {
  with_lines(buffer_lines(num_partitions), [&](auto lines_per_buffer) {
    scatter_lines<decltype(lines_per_buffer)::value>(ids, begin, end, num_partitions, out, value);
  });
}

/**
 * @brief A string column's rows of `[begin, end)` into their partitions through line buffers:
 * offsets (`cursor[p]`, the characters partition p holds so far, at `offsets[p]`) and characters
 * (at `chars[p] + cursor[p]`) alike. `in_end`: the characters readable from `in_chars`.
 */
template <std::size_t Lines, typename Id>
void scatter_strings(Id const* ids,
                     std::size_t begin,
                     std::size_t end,
                     std::size_t num_partitions,
                     std::int64_t** offsets,
                     char* const* chars,
                     std::size_t* cursor,
                     std::int64_t const* in_offsets,
                     char const* in_chars,
                     std::size_t in_end) {
  std::vector<char*> next(num_partitions);
  for (std::size_t p = 0; p < num_partitions; ++p) {
    next[p] = chars[p] == nullptr ? nullptr : chars[p] + cursor[p];
  }
  char_lines<Lines> buffered(next.data(), num_partitions);
  scatter_lines<Lines>(
    ids, begin, end, num_partitions, offsets, [&](std::size_t row, std::size_t p) {
      auto const from   = static_cast<std::size_t>(in_offsets[row]);
      auto const length = static_cast<std::size_t>(in_offsets[row + 1]) - from;
      auto const at     = static_cast<std::int64_t>(cursor[p]);
      buffered.append(p, in_chars + from, in_end - from, length);
      cursor[p] += length;
      return at;
    });
  buffered.finish();
}

/**
 * @brief Whether most of the frames at `bases` are memory the process has touched before (a
 * recycled block), rather than fresh pages: sampled with mincore at the middle of the largest
 * column part of up to 8 frames, which the layout step (padding, masks) did not write.
 */
bool frames_mapped(std::vector<std::uint8_t*> const& bases,
                   std::vector<part_layout> const& layouts,
                   std::size_t num_columns) {
  auto const page         = static_cast<std::size_t>(::sysconf(_SC_PAGESIZE));
  std::size_t const count = bases.size();
  std::size_t sampled     = 0;
  std::size_t mapped      = 0;
  for (std::size_t p = 0; p < count; p += std::max<std::size_t>(1, count / 8)) {
    if (bases[p] == nullptr || num_columns == 0) {
      continue;
    }
    part_layout const* largest = &layouts[p * num_columns];
    for (std::size_t c = 1; c < num_columns; ++c) {
      if (layouts[p * num_columns + c].data_bytes > largest->data_bytes) {
        largest = &layouts[p * num_columns + c];
      }
    }
    if (largest->data_bytes < 2 * page) {
      continue;
    }
    auto const middle =
      reinterpret_cast<std::uintptr_t>(bases[p] + largest->data_offset + largest->data_bytes / 2);
    unsigned char resident = 0;
    if (::mincore(reinterpret_cast<void*>(middle - middle % page), page, &resident) != 0) {
      continue;
    }
    ++sampled;
    mapped += resident & 1U;
  }
  return sampled > 0 && 2 * mapped > sampled;
}

template <typename Id>
std::vector<packed_partition> scatter_partitions(table_view const& input,
                                                 Id const* ids,
                                                 std::size_t num_partitions,
                                                 std::size_t data_offset,
                                                 stream_view stream,
                                                 resource_ref output,
                                                 std::size_t threads) {
  std::size_t const rows        = input.num_rows();
  std::size_t const num_columns = input.num_columns();
  // One part per pool thread, at most `threads`, each of at least half of
  // PARALLEL_SCATTER_MIN_ROWS rows; the parts' rows start at multiples of 64.
  std::size_t const parts =
    threads > 1 ? std::min(threads, parallel_parts(rows, PARALLEL_SCATTER_MIN_ROWS / 2)) : 1;
  std::vector<std::size_t> bounds(parts + 1, rows);
  for (std::size_t part = 0; part < parts; ++part) {
    bounds[part] = (rows / parts * part + rows % parts * part / parts) / 64 * 64;
  }
  // The string columns, and which columns keep a mask (those with nulls, as gather does).
  std::vector<std::size_t> strings;
  std::vector<std::size_t> string_slot(num_columns, 0);
  std::vector<bool> nullable(num_columns, false);
  for (std::size_t c = 0; c < num_columns; ++c) {
    column_view const& column = input.column(c);
    nullable[c]               = column.has_nulls();
    if (!is_fixed_width(column.type())) {
      string_slot[c] = strings.size();
      strings.push_back(c);
    }
  }

  // Count: rows of each partition in each part, and characters per string column.
  std::vector<std::size_t> counts(parts * num_partitions, 0);                  // [part][p]
  std::vector<std::size_t> chars(strings.size() * parts * num_partitions, 0);  // [string][part][p]
  parallel_for(parts, [&](std::size_t part) {
    std::size_t* count = counts.data() + part * num_partitions;
    for (std::size_t row = bounds[part]; row < bounds[part + 1]; ++row) {
      auto const id = static_cast<std::size_t>(ids[row]);
      SPILLWAY_EXPECTS_LT(
        id,
        num_partitions,
        "pack_partitions: partition id out of range at row " + std::to_string(row),
        invalid_argument);
      ++count[id];
    }
    for (std::size_t s = 0; s < strings.size(); ++s) {
      column_view const& column  = input.column(strings[s]);
      std::int64_t const* offset = column.offsets() + column.offset();
      std::size_t* total         = chars.data() + (s * parts + part) * num_partitions;
      for (std::size_t row = bounds[part]; row < bounds[part + 1]; ++row) {
        total[ids[row]] += static_cast<std::size_t>(offset[row + 1] - offset[row]);
      }
    }
  });

  // Lay out and allocate each partition (here, on the calling thread), zeroing its padding.
  std::vector<packed_partition> result(num_partitions);
  std::vector<part_layout> layouts(num_partitions * num_columns);  // [p][column]
  std::vector<std::uint8_t*> bases(num_partitions, nullptr);
  for (std::size_t p = 0; p < num_partitions; ++p) {
    std::size_t partition_rows = 0;
    for (std::size_t part = 0; part < parts; ++part) {
      partition_rows += counts[part * num_partitions + p];
    }
    std::size_t cursor = 0;
    for (std::size_t c = 0; c < num_columns; ++c) {
      std::size_t partition_chars = 0;
      if (!is_fixed_width(input.column(c).type())) {
        for (std::size_t part = 0; part < parts; ++part) {
          partition_chars += chars[(string_slot[c] * parts + part) * num_partitions + p];
        }
      }
      cursor = place_column(cursor,
                            input.column(c).type(),
                            nullable[c],
                            partition_rows,
                            partition_chars,
                            layouts[p * num_columns + c]);
    }
    packed_partition& out = result[p];
    out.num_rows          = partition_rows;
    out.metadata          = make_metadata(num_columns, partition_rows, cursor);
    out.frame             = buffer{data_offset + cursor, stream, output};
    auto* frame           = static_cast<std::uint8_t*>(out.frame.data());
    if (data_offset > 0) {
      std::memset(frame, 0, data_offset);
    }
    bases[p] = frame == nullptr ? nullptr : frame + data_offset;
    if (bases[p] == nullptr) {
      continue;  // no bytes: no rows nor masks nor strings
    }
    for (std::size_t c = 0; c < num_columns; ++c) {
      part_layout const& part = layouts[p * num_columns + c];
      if (nullable[c]) {
        std::memset(bases[p] + part.mask_offset, 0, bitmask_allocation_size(partition_rows));
      }
      if (!is_fixed_width(input.column(c).type())) {
        std::size_t const used = (partition_rows + 1) * sizeof(std::int64_t);
        std::memset(
          bases[p] + part.offsets_offset + used, 0, align_up(used, PART_ALIGNMENT) - used);
      }
      std::size_t const end = part.data_offset + part.data_bytes;
      std::memset(bases[p] + end, 0, align_up(end, PART_ALIGNMENT) - end);
    }
  }

  // Many partitions go through line buffers, but only into memory that is mapped already: the
  // kernel clears a fresh page in the cache, and a streaming store then evicts the cleared line
  // before writing it (twice the memory traffic), where a plain store hits it.
  bool const lines = num_partitions >= LINE_SCATTER_MIN_PARTITIONS &&
                     num_partitions <= LINE_SCATTER_MAX_PARTITIONS &&
                     frames_mapped(bases, layouts, num_columns);

  // Scatter: part `part` writes its rows of partition p after those of the parts before it.
  std::vector<std::size_t> null_counts(num_columns * parts * num_partitions,
                                       0);  // [column][part][p]
  parallel_for(parts, [&](std::size_t part) {
    std::size_t const begin = bounds[part];
    std::size_t const end   = bounds[part + 1];
    // first[p]: the partition row this part starts at.
    std::vector<std::size_t> first(num_partitions, 0);
    for (std::size_t before = 0; before < part; ++before) {
      for (std::size_t p = 0; p < num_partitions; ++p) {
        first[p] += counts[before * num_partitions + p];
      }
    }
    for (std::size_t c = 0; c < num_columns; ++c) {
      column_view const& column = input.column(c);
      if (is_fixed_width(column.type())) {
        visit_fixed_width(column.type(), [&]<typename T>() {
          std::vector<T*> out(num_partitions);
          for (std::size_t p = 0; p < num_partitions; ++p) {
            out[p] = bases[p] == nullptr
                       ? nullptr
                       : reinterpret_cast<T*>(bases[p] + layouts[p * num_columns + c].data_offset) +
                           first[p];
          }
          T const* in = column.data<T>();
          if (lines) {
            scatter_buffered(
              ids, begin, end, num_partitions, out.data(), [in](std::size_t row, std::size_t) {
                return in[row];
              });
          } else {
            for (std::size_t row = begin; row < end; ++row) {
              *out[ids[row]]++ = in[row];
            }
          }
        });
      } else if (end > begin) {
        std::size_t const s = string_slot[c];
        std::vector<std::int64_t*> offsets(num_partitions);
        std::vector<char*> out(num_partitions);
        std::vector<std::size_t> cursor(num_partitions, 0);
        std::vector<std::size_t> stop(num_partitions, 0);
        for (std::size_t p = 0; p < num_partitions; ++p) {
          part_layout const& layout = layouts[p * num_columns + c];
          if (bases[p] == nullptr) {
            continue;
          }
          offsets[p] = reinterpret_cast<std::int64_t*>(bases[p] + layout.offsets_offset) + first[p];
          out[p]     = reinterpret_cast<char*>(bases[p] + layout.data_offset);
          for (std::size_t before = 0; before < part; ++before) {
            cursor[p] += chars[(s * parts + before) * num_partitions + p];
          }
          stop[p] = cursor[p] + chars[(s * parts + part) * num_partitions + p];
        }
        std::int64_t const* in_offsets = column.offsets() + column.offset();
        char const* in_chars           = column.chars();
        auto const in_end              = static_cast<std::size_t>(in_offsets[column.size()]);
        auto const string_offset       = [&](std::size_t row, std::size_t p) {
          auto const from   = static_cast<std::size_t>(in_offsets[row]);
          auto const length = static_cast<std::size_t>(in_offsets[row + 1]) - from;
          auto const at     = static_cast<std::int64_t>(cursor[p]);
          copy_chars(
            out[p] + cursor[p], stop[p] - cursor[p], in_chars + from, in_end - from, length);
          cursor[p] += length;
          return at;
        };
        if (lines) {
          // Two buffers a partition (offsets and characters), within SCATTER_BUFFER_BYTES up to
          // 4096 partitions (buffers of two lines at the least: 2 MiB for 8192).
          with_lines(buffer_lines(2 * num_partitions), [&](auto lines_per_buffer) {
            scatter_strings<decltype(lines_per_buffer)::value>(ids,
                                                               begin,
                                                               end,
                                                               num_partitions,
                                                               offsets.data(),
                                                               out.data(),
                                                               cursor.data(),
                                                               in_offsets,
                                                               in_chars,
                                                               in_end);
          });
        } else {
          for (std::size_t row = begin; row < end; ++row) {
            auto const p  = static_cast<std::size_t>(ids[row]);
            *offsets[p]++ = string_offset(row, p);
          }
        }
      }
      if (nullable[c]) {
        std::vector<std::size_t> bit(first);
        std::vector<bitmask_type> pending(num_partitions, 0);
        std::size_t* nulls = null_counts.data() + (c * parts + part) * num_partitions;
        auto const flush   = [&](std::size_t p, std::size_t byte) {
          std::atomic_ref<bitmask_type>(bases[p][layouts[p * num_columns + c].mask_offset + byte])
            .fetch_or(pending[p], std::memory_order_relaxed);
          pending[p] = 0;
        };
        for (std::size_t row = begin; row < end; ++row) {
          auto const p           = static_cast<std::size_t>(ids[row]);
          std::size_t const into = bit[p]++;
          if (column.is_valid(row)) {
            pending[p] = static_cast<bitmask_type>(pending[p] | (1U << (into % 8)));
          } else {
            ++nulls[p];
          }
          if (into % 8 == 7) {
            flush(p, into / 8);
          }
        }
        for (std::size_t p = 0; p < num_partitions; ++p) {
          if (bit[p] % 8 != 0 && bit[p] > first[p]) {
            flush(p, bit[p] / 8);
          }
        }
      }
    }
  });

  // The last offset of each string column, and the metadata entries.
  for (std::size_t p = 0; p < num_partitions; ++p) {
    packed_partition& out = result[p];
    for (std::size_t c = 0; c < num_columns; ++c) {
      part_layout const& part   = layouts[p * num_columns + c];
      column_view const& column = input.column(c);
      if (!is_fixed_width(column.type()) && bases[p] != nullptr) {
        reinterpret_cast<std::int64_t*>(bases[p] + part.offsets_offset)[out.num_rows] =
          static_cast<std::int64_t>(part.data_bytes);
      }
      std::size_t null_count = 0;
      if (nullable[c]) {
        for (std::size_t each = 0; each < parts; ++each) {
          null_count += null_counts[(c * parts + each) * num_partitions + p];
        }
      }
      set_entry(out.metadata, c, make_entry(column.type(), nullable[c], null_count, part));
    }
  }
  return result;
}

[[noreturn]] void corrupt(std::string const& what) {
  throw corruption_error("packed table metadata is corrupt: " + what);
}

header read_header(std::span<std::uint8_t const> metadata) {
  if (metadata.size() < sizeof(header)) {
    corrupt("metadata of " + std::to_string(metadata.size()) + " bytes is shorter than a header");
  }
  header head{};
  std::memcpy(&head, metadata.data(), sizeof(header));
  if (head.magic != PACK_MAGIC) {
    corrupt("bad magic number " + std::to_string(head.magic));
  }
  if (head.version != PACK_VERSION) {
    corrupt("unknown version " + std::to_string(head.version));
  }
  if (metadata.size() != sizeof(header) + head.num_columns * sizeof(column_entry)) {
    corrupt("metadata of " + std::to_string(metadata.size()) + " bytes does not hold " +
            std::to_string(head.num_columns) + " columns");
  }
  return head;
}

}  // namespace

std::size_t packed_size(table_view const& input) { return layout(input, nullptr); }

std::size_t packed_metadata_size(std::size_t num_columns) noexcept {
  return sizeof(header) + num_columns * sizeof(column_entry);
}

namespace detail {

packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs) {
  std::vector<part_layout> parts;
  parts.reserve(input.num_columns());
  std::size_t const total = layout(input, &parts, stream);

  packed_columns out;
  out.data     = buffer{total, stream, mrs.output()};
  out.metadata = make_metadata(input.num_columns(), input.num_rows(), total);
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input) || is_cuda_device_pointer(out.data.data())) {
    fill_packed_with_cuda(input,
                          parts,
                          total,
                          static_cast<std::uint8_t*>(out.data.data()),
                          out.data.kind(),
                          stream,
                          out.metadata);
    return out;
  }
#endif
  fill_packed(input,
              parts,
              total,
              static_cast<std::uint8_t*>(out.data.data()),
              out.data.kind(),
              stream,
              out.metadata);
  return out;
}

packed_partition pack_at(table_view const& input,
                         std::size_t data_offset,
                         stream_view stream,
                         memory_resources mrs) {
  SPILLWAY_EXPECTS(data_offset % PART_ALIGNMENT == 0,
                   "pack: the data offset " + std::to_string(data_offset) +
                     " is not a multiple of " + std::to_string(PART_ALIGNMENT),
                   invalid_argument);
  std::vector<part_layout> parts;
  parts.reserve(input.num_columns());
  std::size_t const total = layout(input, &parts, stream);

  packed_partition out;
  out.num_rows = input.num_rows();
  out.frame    = buffer{data_offset + total, stream, mrs.output()};
  out.metadata = make_metadata(input.num_columns(), input.num_rows(), total);
  auto* frame  = static_cast<std::uint8_t*>(out.frame.data());
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input) || is_cuda_device_pointer(frame)) {
    fill_bytes(frame, out.frame.kind(), 0, data_offset, stream);
    fill_packed_with_cuda(
      input, parts, total, frame + data_offset, out.frame.kind(), stream, out.metadata);
    return out;
  }
#endif
  if (data_offset > 0) {
    std::memset(frame, 0, data_offset);
  }
  fill_packed(input,
              parts,
              total,
              frame == nullptr ? nullptr : frame + data_offset,
              out.frame.kind(),
              stream,
              out.metadata);
  return out;
}

std::vector<packed_partition> pack_partitions(table_view const& input,
                                              column_view const& partition_map,
                                              std::size_t num_partitions,
                                              std::size_t data_offset,
                                              std::size_t threads,
                                              stream_view stream,
                                              memory_resources mrs) {
  SPILLWAY_EXPECTS(num_partitions > 0,
                   "pack_partitions: the number of partitions must be at least 1",
                   invalid_argument);
  SPILLWAY_EXPECTS(data_offset % PART_ALIGNMENT == 0,
                   "pack_partitions: the data offset " + std::to_string(data_offset) +
                     " is not a multiple of " + std::to_string(PART_ALIGNMENT),
                   invalid_argument);
  type_id const id = partition_map.type().id();
  SPILLWAY_EXPECTS(
    id == type_id::UINT8 || id == type_id::UINT16 || id == type_id::UINT32 || id == type_id::UINT64,
    "pack_partitions: the map must be UINT8, UINT16, UINT32 or UINT64, not " +
      to_string(partition_map.type()),
    invalid_argument);
  SPILLWAY_EXPECTS_EQ(partition_map.size(),
                      input.num_rows(),
                      "pack_partitions: one partition id per row",
                      invalid_argument);
  SPILLWAY_EXPECTS(
    !partition_map.has_nulls(), "pack_partitions: the map has nulls", invalid_argument);
#if SPILLWAY_HAS_CUDA
  if (cuda::on_device(input)) {
    // On the device: the rows grouped by partition, then each partition gathered (scratch) and
    // packed into its frame.
    auto const grouped =
      cuda::partition_rows(partition_map, num_partitions, stream, mrs.temporary());
    std::vector<packed_partition> out;
    out.reserve(num_partitions);
    // An empty partition keeps a mask where the input has nulls, as the CPU's scatter does.
    std::vector<column_view> no_rows;
    for (auto const& column : input) {
      no_rows.emplace_back(column.type(),
                           0,
                           column.head(),
                           column.has_nulls() ? column.null_mask() : nullptr,
                           0,
                           column.offset(),
                           column.offsets(),
                           column.kind());
    }
    table_view const empty{no_rows};
    for (std::size_t partition = 0; partition < num_partitions; ++partition) {
      if (grouped.offsets[partition] == grouped.offsets[partition + 1]) {
        out.push_back(pack_at(empty, data_offset, stream, mrs));
        continue;
      }
      column_view const rows =
        slice(grouped.map, grouped.offsets[partition], grouped.offsets[partition + 1]);
      auto const part = detail::gather(input,
                                       rows,
                                       out_of_bounds_policy::FAIL,
                                       stream,
                                       memory_resources{mrs.temporary(), mrs.temporary()});
      out.push_back(pack_at(part->view(), data_offset, stream, mrs));
    }
    return out;
  }
#endif
  auto const scatter = [&](auto const* ids) {
    return scatter_partitions(
      input, ids, num_partitions, data_offset, stream, mrs.output(), threads);
  };
  switch (id) {
    case type_id::UINT8:
      return scatter(partition_map.data<std::uint8_t>());
    case type_id::UINT16:
      return scatter(partition_map.data<std::uint16_t>());
    case type_id::UINT32:
      return scatter(partition_map.data<std::uint32_t>());
    default:
      return scatter(partition_map.data<std::uint64_t>());
  }
}

}  // namespace detail

packed_columns pack(table_view const& input, stream_view stream, memory_resources mrs) {
  return detail::pack(input, stream, mrs);
}

std::vector<packed_partition> pack_partitions(table_view const& input,
                                              column_view const& partition_map,
                                              std::size_t num_partitions,
                                              std::size_t data_offset,
                                              stream_view stream,
                                              memory_resources mrs) {
  return detail::pack_partitions(input,
                                 partition_map,
                                 num_partitions,
                                 data_offset,
                                 detail::PACK_PARTITIONS_THREADS,
                                 stream,
                                 mrs);
}

std::size_t packed_num_rows(std::span<std::uint8_t const> metadata) {
  return read_header(metadata).num_rows;
}

table_view unpack(std::span<std::uint8_t const> metadata,
                  void const* data,
                  std::size_t data_size,
                  memory_kind data_kind) {
  header const head = read_header(metadata);
  if (head.data_size != data_size) {
    corrupt("metadata describes " + std::to_string(head.data_size) + " data bytes, buffer has " +
            std::to_string(data_size));
  }
  // Every column takes at least one byte per row (strings eight), so a row count above the data
  // size is corrupt; bounding it here also keeps the size arithmetic below from overflowing.
  if (head.num_columns > 0 && head.num_rows > data_size) {
    corrupt(std::to_string(head.num_rows) + " rows cannot fit in " + std::to_string(data_size) +
            " data bytes");
  }
  auto const* base = static_cast<std::uint8_t const*>(data);
  std::vector<column_view> columns;
  columns.reserve(head.num_columns);
  std::size_t const rows = head.num_rows;
  auto const check_range =
    [&](std::uint64_t offset, std::uint64_t bytes, char const* part, std::size_t index) {
      if (offset > data_size || bytes > data_size - offset) {
        corrupt(std::string{part} + " of column " + std::to_string(index) + " at offset " +
                std::to_string(offset) + " (+" + std::to_string(bytes) + " bytes) exceeds " +
                std::to_string(data_size) + " data bytes");
      }
      // pack() starts every part on a boundary; a view elsewhere would read misaligned values.
      if (offset % PART_ALIGNMENT != 0) {
        corrupt(std::string{part} + " of column " + std::to_string(index) + " at offset " +
                std::to_string(offset) + " is not " + std::to_string(PART_ALIGNMENT) +
                "-byte aligned");
      }
    };
  for (std::size_t index = 0; index < head.num_columns; ++index) {
    column_entry entry{};
    std::memcpy(
      &entry, metadata.data() + sizeof(header) + index * sizeof(column_entry), sizeof(entry));
    if (entry.type >= TYPE_ID_COUNT || entry.unit > 3) {
      corrupt("column " + std::to_string(index) + " has unknown type " +
              std::to_string(entry.type));
    }
    data_type const type =
      is_decimal(static_cast<type_id>(entry.type))
        ? data_type{static_cast<type_id>(entry.type), entry.precision, entry.scale}
        : data_type{static_cast<type_id>(entry.type), static_cast<time_unit>(entry.unit)};
    if (is_decimal(type.id()) && !is_valid_decimal(type)) {
      corrupt("column " + std::to_string(index) + " is " + to_string(type) +
              ", whose precision its type does not hold");
    }
    if (entry.null_count > rows || (entry.null_count > 0 && entry.nullable == 0)) {
      corrupt("column " + std::to_string(index) + " has null count " +
              std::to_string(entry.null_count) + " for " + std::to_string(rows) + " rows");
    }
    bitmask_type const* mask = nullptr;
    if (entry.nullable != 0) {
      check_range(entry.mask_offset, (rows + 7) / 8, "mask", index);
      mask = base + entry.mask_offset;
    }
    std::int64_t const* offsets = nullptr;
    if (is_fixed_width(type)) {
      if (entry.data_bytes != rows * size_of(type)) {
        corrupt("column " + std::to_string(index) + " has " + std::to_string(entry.data_bytes) +
                " data bytes for " + std::to_string(rows) + " rows of " + to_string(type));
      }
    } else {
      check_range(entry.offsets_offset, (rows + 1) * sizeof(std::int64_t), "offsets", index);
      offsets = reinterpret_cast<std::int64_t const*>(base + entry.offsets_offset);
      // Offsets on a CUDA device: only the first and the last are read back and checked.
      bool const on_cuda   = data_kind == memory_kind::DEVICE && is_cuda_device_pointer(offsets);
      std::int64_t ends[2] = {0, 0};
      if (on_cuda) {
        copy_bytes(&ends[0], memory_kind::HOST, offsets, data_kind, sizeof(std::int64_t), {});
        copy_bytes(
          &ends[1], memory_kind::HOST, offsets + rows, data_kind, sizeof(std::int64_t), {});
      } else {
        ends[0] = offsets[0];
        ends[1] = offsets[rows];
      }
      if (ends[0] != 0 || static_cast<std::uint64_t>(ends[1]) != entry.data_bytes) {
        corrupt("string offsets of column " + std::to_string(index) +
                " do not span its characters");
      }
      // Ascending offsets from 0 to data_bytes keep every row inside the characters.
      for (std::size_t row = 0; !on_cuda && row < rows; ++row) {
        if (offsets[row] > offsets[row + 1]) {
          corrupt("string offsets of column " + std::to_string(index) + " descend at row " +
                  std::to_string(row) + ": " + std::to_string(offsets[row]) + " then " +
                  std::to_string(offsets[row + 1]));
        }
      }
    }
    check_range(entry.data_offset, entry.data_bytes, "data", index);
    columns.emplace_back(
      type, rows, base + entry.data_offset, mask, entry.null_count, 0, offsets, data_kind);
  }
  return table_view{std::move(columns)};
}

table_view unpack(packed_columns const& packed) {
  return unpack(packed.metadata, packed.data.data(), packed.data.size(), packed.data.kind());
}

}  // namespace spillway
