/**
 * @file pack_partitions.cpp
 * @brief Packing the rows of a table into one packed frame per partition at once
 * (`pack_partitions`): a scatter on the worker pool through cache lines buffered per partition.
 */
#include "table/cuda/device_table.hpp"
#include "table/pack_layout.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/copy.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <sys/mman.h>
#include <type_traits>
#include <unistd.h>
#include <vector>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace spillway {
namespace {

using detail::make_entry;
using detail::make_metadata;
using detail::PART_ALIGNMENT;
using detail::part_layout;
using detail::place_column;
using detail::set_entry;

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

}  // namespace

namespace detail {

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

}  // namespace spillway
