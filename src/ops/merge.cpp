#include "ops/cuda/device_ops.hpp"
#include "ops/merge_cuts.hpp"
#include "ops/normalized_key.hpp"
#include "ops/parallel_gather.hpp"
#include "ops/row_comparator.hpp"
#include "table/cuda/device_table.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/ops/merge.hpp>
#include <spillway/ops/sort.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// Where one output row of a merge comes from: a source id, `(input << SOURCE_ROW_BITS) | row`.
using merge_source = std::uint64_t;

merge_source source_of(std::size_t input, std::size_t row) noexcept {
  return (static_cast<std::uint64_t>(input) << SOURCE_ROW_BITS) | static_cast<std::uint64_t>(row);
}

/// Maps a key value to an unsigned integer whose order is the key order (see normalized_key):
/// sign bit flipped for signed integers, IEEE order for floats with -0.0 == 0.0 and every NaN
/// equal and above +inf, and all bits inverted for DESCENDING.
template <typename T, bool Descending>
std::uint64_t encode_key(T value) noexcept {
  std::uint64_t encoded = 0;
  if constexpr (std::is_floating_point_v<T>) {
    using bits_type = std::conditional_t<sizeof(T) == 4, std::uint32_t, std::uint64_t>;
    if (value == T{0}) {
      value = T{0};
    }
    if (std::isnan(value)) {
      value = std::numeric_limits<T>::quiet_NaN();
    }
    bits_type bits = 0;
    std::memcpy(&bits, &value, sizeof(T));
    bits_type const sign = bits_type{1} << (sizeof(T) * 8 - 1);
    encoded              = (bits & sign) != 0 ? static_cast<bits_type>(~bits) : (bits | sign);
  } else if constexpr (std::is_signed_v<T>) {
    using unsigned_type = std::make_unsigned_t<T>;
    encoded             = static_cast<unsigned_type>(static_cast<unsigned_type>(value) ^
                                         (unsigned_type{1} << (sizeof(T) * 8 - 1)));
  } else {
    encoded = value;
  }
  return Descending ? ~encoded : encoded;
}

/// Whether the keys are a single fixed-width column (of at most 8 bytes) that no input has
/// nulls in: then one encoded word per row orders them, and the tree compares words.
bool single_encodable_key(std::span<table_view const> keys) {
  if (keys.empty() || keys.front().num_columns() != 1) {
    return false;
  }
  data_type const type = keys.front().column(0).type();
  if (!is_fixed_width(type) || size_of(type) > 8) {
    return false;
  }
  return std::none_of(
    keys.begin(), keys.end(), [](table_view const& key) { return key.column(0).has_nulls(); });
}

/// Normalized keys encoded at a time per input.
constexpr std::size_t PREFIX_BLOCK_ROWS = 64;

/// The rows of one input's block of encoded prefixes: PREFIX_BLOCK_ROWS, or all of a shorter input.
std::size_t prefix_block_rows(table_view const& keys) noexcept {
  return std::min(PREFIX_BLOCK_ROWS, keys.num_rows());
}

/// The encoded prefixes one tree over `keys` keeps: a block per input.
std::size_t prefix_block_records(std::span<table_view const> keys) noexcept {
  std::size_t records = 0;
  for (auto const& input : keys) {
    records += prefix_block_rows(input);
  }
  return records;
}

/// Heads of any other keys: normalized-key prefixes, encoded a block of rows at a time, and the
/// full row comparator only when two prefixes tie and the prefix is not the whole key.
template <std::size_t Words>
class prefix_heads {
 public:
  /// @param blocks `prefix_block_records(keys)` records, one block per input one after the other
  prefix_heads(std::span<table_view const> keys,
               normalized_key_layout const& layout,
               row_comparator const& comparator,
               bool reverse,
               key_record<Words>* blocks)
    : keys_(keys),
      layout_(layout),
      comparator_(comparator),
      reverse_(reverse),
      blocks_(keys.size()),
      begin_(keys.size(), 0),
      end_(keys.size(), 0),
      heads_(keys.size()),
      ends_in_string_(!layout.segments.empty() && !keys.empty() &&
                      !is_fixed_width(keys.front().column(layout.segments.back().column).type())) {
    for (std::size_t input = 0; input < keys.size(); ++input) {
      blocks_[input] = blocks;
      blocks += prefix_block_rows(keys[input]);
    }
  }

  void load(std::size_t input, std::size_t row) noexcept {
    if (row < begin_[input] || row >= end_[input]) {
      std::size_t const rows  = keys_[input].num_rows();
      std::size_t const block = prefix_block_rows(keys_[input]);
      std::size_t const begin = reverse_ ? (row + 1 > block ? row + 1 - block : 0) : row;
      std::size_t const end   = reverse_ ? row + 1 : std::min(rows, row + block);
      encode_normalized_keys<Words>(layout_, keys_[input], begin, end, blocks_[input]);
      begin_[input] = begin;
      end_[input]   = end;
      prefetch_next_block(input, begin, end);
    }
    // The head's words are copied beside the others: comparisons read them without going
    // through the block.
    std::copy_n(blocks_[input][row - begin_[input]].key, Words, heads_[input].begin());
  }
  /// The first word of `input`'s head (loaded).
  [[nodiscard]] std::uint64_t first_word(std::size_t input) const noexcept {
    return heads_[input][0];
  }

  /// Asks for the characters of the block after `[begin, end)` (before it in reverse) when the
  /// prefix ends in a string: the merge takes a while to come back to this input, and its next
  /// encoding then finds them in the cache instead of waiting on each string's first load.
  void prefetch_next_block(std::size_t input, std::size_t begin, std::size_t end) const noexcept {
    if (!ends_in_string_) {
      return;
    }
    column_view const& column = keys_[input].column(layout_.segments.back().column);
    std::size_t const rows    = column.size();
    std::size_t const from =
      reverse_ ? (begin > PREFIX_BLOCK_ROWS ? begin - PREFIX_BLOCK_ROWS : 0) : end;
    std::size_t const to = reverse_ ? begin : std::min(rows, end + PREFIX_BLOCK_ROWS);
    if (from >= to) {
      return;
    }
    std::int64_t const* offsets = column.offsets() + column.offset();
    char const* chars           = column.chars();
    constexpr std::size_t LINE  = 64;
    __builtin_prefetch(offsets + from);
    __builtin_prefetch(offsets + to);
    auto const first = static_cast<std::size_t>(offsets[from]);
    auto const last  = static_cast<std::size_t>(offsets[to]);
    for (std::size_t at = first / LINE * LINE; at < last; at += LINE) {
      __builtin_prefetch(chars + at);
    }
  }

  [[nodiscard]] int compare(std::size_t lhs,
                            std::size_t lhs_row,
                            std::size_t rhs,
                            std::size_t rhs_row) const noexcept {
    for (std::size_t word = 0; word < Words; ++word) {
      std::uint64_t const left  = heads_[lhs][word];
      std::uint64_t const right = heads_[rhs][word];
      if (left != right) {
        return left < right ? -1 : 1;
      }
    }
    return layout_.complete ? 0 : comparator_.compare(keys_[lhs], lhs_row, keys_[rhs], rhs_row);
  }

 private:
  std::span<table_view const> keys_;
  normalized_key_layout const& layout_;
  row_comparator const& comparator_;
  bool reverse_;
  std::vector<key_record<Words>*> blocks_;  ///< each input's block
  std::vector<std::size_t> begin_;
  std::vector<std::size_t> end_;
  std::vector<std::array<std::uint64_t, Words>> heads_;
  bool ends_in_string_;  ///< the prefix's last segment is a string column (prefetched ahead)
};

/// Heads without a prefix (no key bytes fit): the full row comparator.
class row_heads {
 public:
  row_heads(std::span<table_view const> keys, row_comparator const& comparator)
    : keys_(keys), comparator_(comparator) {}

  void load(std::size_t, std::size_t) noexcept {}
  [[nodiscard]] int compare(std::size_t lhs,
                            std::size_t lhs_row,
                            std::size_t rhs,
                            std::size_t rhs_row) const noexcept {
    return comparator_.compare(keys_[lhs], lhs_row, keys_[rhs], rhs_row);
  }

 private:
  std::span<table_view const> keys_;
  row_comparator const& comparator_;
};

/**
 * A tournament tree of losers over one cursor per input: `winner()` is the input whose current
 * row comes first; `advance()` moves its cursor and replays only its path to the root.
 *
 * Rows are ordered by (key, input, row). A forward tree yields them from the first; a reverse
 * tree (`Reverse`) from the last, so that one thread can write the front of the output and
 * another the back.
 */
template <bool Reverse, typename Heads>
class loser_tree {
  /// Heads with a first word: a node compares the two words and goes to the full comparison
  /// only when they are equal (a tie, or an input run out).
  static constexpr bool WORDS = requires(Heads const& heads) { heads.first_word(std::size_t{}); };
  /// The word of an input that has run out (and of the leaves past the last input): it sorts
  /// last, and any real word equal to it goes to the full comparison, which knows better.
  static constexpr std::uint64_t EXHAUSTED = Reverse ? 0 : ~std::uint64_t{0};

 public:
  loser_tree(std::span<table_view const> keys, Heads& heads)
    : keys_(keys),
      heads_(heads),
      leaves_(std::bit_ceil(std::max<std::size_t>(keys.size(), 1))),
      cursors_(leaves_, 0),
      losers_(leaves_, 0),
      words_(WORDS ? leaves_ : 0, EXHAUSTED) {
    for (std::size_t input = 0; input < keys_.size(); ++input) {
      cursors_[input] = Reverse ? keys_[input].num_rows() : 0;
      if (!is_exhausted(input)) {
        heads_.load(input, row_of(input));
        if constexpr (WORDS) {
          words_[input] = heads_.first_word(input);
        }
      }
    }
    std::vector<std::size_t> winners(2 * leaves_);
    for (std::size_t leaf = 0; leaf < leaves_; ++leaf) {
      winners[leaves_ + leaf] = leaf;
    }
    for (std::size_t node = leaves_ - 1; node >= 1; --node) {
      std::size_t const left  = winners[2 * node];
      std::size_t const right = winners[2 * node + 1];
      bool const right_wins   = before(right, left);
      winners[node]           = right_wins ? right : left;
      losers_[node]           = right_wins ? left : right;
    }
    losers_[0] = winners[1];
  }

  /// @return the input whose current row comes next
  [[nodiscard]] std::size_t winner() const noexcept { return losers_[0]; }
  /// @return the current row of `input`
  [[nodiscard]] std::size_t row_of(std::size_t input) const noexcept {
    return Reverse ? cursors_[input] - 1 : cursors_[input];
  }

  /// Moves the winner's cursor to its next row and finds the new winner.
  void advance() noexcept {
    std::size_t candidate = losers_[0];
    if constexpr (Reverse) {
      --cursors_[candidate];
    } else {
      ++cursors_[candidate];
    }
    if (!is_exhausted(candidate)) {
      heads_.load(candidate, row_of(candidate));
      if constexpr (WORDS) {
        words_[candidate] = heads_.first_word(candidate);
      }
    } else if constexpr (WORDS) {
      words_[candidate] = EXHAUSTED;
    }
    if constexpr (WORDS) {
      // Words that differ decide without a branch the predictor would miss half the time.
      std::uint64_t word = words_[candidate];
      for (std::size_t node = (leaves_ + candidate) / 2; node >= 1; node /= 2) {
        std::size_t const other     = losers_[node];
        std::uint64_t const against = words_[other];
        bool const other_first =
          against != word ? (Reverse ? against > word : against < word) : before(other, candidate);
        losers_[node] = other_first ? candidate : other;
        candidate     = other_first ? other : candidate;
        word          = other_first ? against : word;
      }
    } else {
      for (std::size_t node = (leaves_ + candidate) / 2; node >= 1; node /= 2) {
        if (before(losers_[node], candidate)) {
          std::swap(losers_[node], candidate);
        }
      }
    }
    losers_[0] = candidate;
  }

 private:
  [[nodiscard]] bool is_exhausted(std::size_t input) const noexcept {
    if (input >= keys_.size()) {
      return true;
    }
    return Reverse ? cursors_[input] == 0 : cursors_[input] >= keys_[input].num_rows();
  }

  /// Whether input `lhs`'s current row leaves this tree strictly before input `rhs`'s.
  [[nodiscard]] bool before(std::size_t lhs, std::size_t rhs) const noexcept {
    if (is_exhausted(lhs)) {
      return false;
    }
    if (is_exhausted(rhs)) {
      return true;
    }
    int const result = heads_.compare(lhs, row_of(lhs), rhs, row_of(rhs));
    if constexpr (Reverse) {
      return result != 0 ? result > 0 : lhs > rhs;
    } else {
      return result != 0 ? result < 0 : lhs < rhs;
    }
  }

  std::span<table_view const> keys_;
  Heads& heads_;
  std::size_t leaves_;
  std::vector<std::size_t> cursors_;  ///< forward: the next row; reverse: rows left
  std::vector<std::size_t> losers_;   ///< [0]: the winner; [1, leaves): the loser at each node
  std::vector<std::uint64_t> words_;  ///< WORDS: each input's first head word, or EXHAUSTED
};

/**
 * Writes `sources[0, front)` with a forward tree, or `sources[front, rows)` with a reverse one.
 * @return the rows taken from each input (a prefix of it forward, a suffix in reverse)
 */
template <bool Reverse, typename Heads>
std::vector<std::size_t> merge_part(std::span<table_view const> keys,
                                    Heads& heads,
                                    merge_source* sources,
                                    std::size_t front,
                                    std::size_t rows) {
  loser_tree<Reverse, Heads> tree{keys, heads};
  std::vector<std::size_t> taken(keys.size(), 0);
  if constexpr (Reverse) {
    for (std::size_t position = rows; position-- > front;) {
      std::size_t const input = tree.winner();
      sources[position]       = source_of(input, tree.row_of(input));
      ++taken[input];
      tree.advance();
    }
  } else {
    for (std::size_t position = 0; position < front; ++position) {
      std::size_t const input = tree.winner();
      sources[position]       = source_of(input, tree.row_of(input));
      ++taken[input];
      tree.advance();
    }
  }
  return taken;
}

/**
 * Fills `sources` (one entry per output row) for `keys`: the front half and the back half in two
 * parts on the worker pool when `halves` (`plan_merge`: a large merge on a pool of at most two
 * threads; one after the other on a pool of one), else on one tree.
 * `part(reverse, front)` writes `sources[0, front)` forward or `sources[front, rows)` in reverse
 * and returns the rows it took from each input. Sorted inputs make the halves meet exactly: the
 * front takes a prefix of each input and the back the rest. Unsorted inputs may make them overlap;
 * then the merge runs again on one thread, which still gives a permutation of the rows.
 */
template <typename Part>
void merge_halves(std::span<table_view const> keys,
                  std::size_t rows,
                  bool halves,
                  Part const& part) {
  if (halves) {
    std::size_t const front = rows / 2;
    std::array<std::vector<std::size_t>, 2> taken;
    parallel_for(2, [&](std::size_t half) { taken[half] = part(half == 1, front); });
    bool meet = true;
    for (std::size_t input = 0; input < keys.size(); ++input) {
      meet = meet && taken[0][input] + taken[1][input] == keys[input].num_rows();
    }
    if (meet) {
      return;
    }
  }
  (void)part(false, rows);
}

/**
 * Runs the parts of `cuts` on the pool: `part(slices, starts, output, rows, index)` merges the
 * `rows` rows of `slices` (the part's slice of every input, which starts at row `starts[input]`)
 * into `output[0, rows)`.
 */
template <typename Part>
void merge_cut_parts(std::span<table_view const> keys,
                     merge_cuts const& cuts,
                     merge_source* sources,
                     Part const& part) {
  parallel_for(cuts.parts(), [&](std::size_t index) {
    std::vector<table_view> slices;
    std::vector<std::size_t> starts;
    slices.reserve(keys.size());
    starts.reserve(keys.size());
    std::size_t rows = 0;
    for (std::size_t input = 0; input < keys.size(); ++input) {
      std::size_t const begin = cuts.begin(index, input);
      std::size_t const end   = cuts.end(index, input);
      slices.push_back(slice(keys[input], begin, end));
      starts.push_back(begin);
      rows += end - begin;
    }
    if (rows > 0) {
      part(std::span<table_view const>{slices},
           std::span<std::size_t const>{starts},
           sources + cuts.output_begin(index),
           rows,
           index);
    }
  });
}

/// Writes the first `rows` rows of a forward `tree` over slices that start at `starts` to
/// `output`, as source ids of the whole inputs.
template <typename Tree>
void write_forward(Tree& tree,
                   std::span<std::size_t const> starts,
                   merge_source* output,
                   std::size_t rows) {
  for (std::size_t position = 0; position < rows; ++position) {
    std::size_t const input = tree.winner();
    output[position]        = source_of(input, starts[input] + tree.row_of(input));
    tree.advance();
  }
}

/**
 * `merge_halves`, or the parts of `plan.cuts`, with loser trees over the heads that
 * `make_heads(keys, reverse, tree)` makes for tree number `tree` (0 and 1 the halves, or the
 * part) over `keys` (the inputs, or a part's slices of them).
 */
template <typename MakeHeads>
void merge_sources(std::span<table_view const> keys,
                   merge_source* sources,
                   std::size_t rows,
                   merge_plan const& plan,
                   MakeHeads const& make_heads) {
  if (plan.cuts.has_value()) {
    merge_cut_parts(keys,
                    *plan.cuts,
                    sources,
                    [&](std::span<table_view const> slices,
                        std::span<std::size_t const> starts,
                        merge_source* output,
                        std::size_t part_rows,
                        std::size_t part) {
                      auto heads = make_heads(slices, false, part);
                      loser_tree<false, decltype(heads)> tree{slices, heads};
                      write_forward(tree, starts, output, part_rows);
                    });
    return;
  }
  merge_halves(keys, rows, plan.halves, [&](bool reverse, std::size_t front) {
    auto heads = make_heads(keys, reverse, reverse ? 1 : 0);
    return reverse ? merge_part<true>(keys, heads, sources, front, rows)
                   : merge_part<false>(keys, heads, sources, front, rows);
  });
}

__extension__ using uint128 = unsigned __int128;

/**
 * A loser tree for a single null-free fixed-width key, which one encoded word per row orders.
 * Each node holds its loser as one 128-bit value, (word << 64) | rank, so replaying a path is a
 * compare and a min/max per level: no calls, no bounds checks, no branches on the keys.
 *
 * Forward, rows leave by (word, input); in reverse (`Reverse`, from the last row) by the
 * complement of both, so the smallest value always leaves first. An exhausted input holds the
 * largest word and a rank past every input's, so it loses to every row.
 */
template <typename T, bool Descending, bool Reverse>
class encoded_loser_tree {
 public:
  explicit encoded_loser_tree(std::span<table_view const> keys)
    : leaves_(std::bit_ceil(std::max<std::size_t>(keys.size(), 1))),
      values_(leaves_, nullptr),
      cursors_(leaves_, 0),
      nodes_(leaves_, 0) {
    for (std::size_t input = 0; input < keys.size(); ++input) {
      values_[input]  = keys[input].column(0).data<T>();
      cursors_[input] = Reverse ? keys[input].num_rows() : 0;
      ends_.push_back(Reverse ? 0 : keys[input].num_rows());
    }
    ends_.resize(leaves_, 0);  // inputs past the last: exhausted from the start
    std::vector<uint128> winners(2 * leaves_);
    for (std::size_t leaf = 0; leaf < leaves_; ++leaf) {
      winners[leaves_ + leaf] = head(leaf);
    }
    for (std::size_t node = leaves_ - 1; node >= 1; --node) {
      winners[node] = std::min(winners[2 * node], winners[2 * node + 1]);
      nodes_[node]  = std::max(winners[2 * node], winners[2 * node + 1]);
    }
    nodes_[0] = winners[1];
  }

  /// @return the input whose current row comes next
  [[nodiscard]] std::size_t winner() const noexcept { return input_of(nodes_[0]); }
  /// @return the current row of `input`
  [[nodiscard]] std::size_t row_of(std::size_t input) const noexcept {
    return Reverse ? cursors_[input] - 1 : cursors_[input];
  }

  /// Moves the winner's cursor to its next row and finds the new winner.
  void advance() noexcept {
    std::size_t const input = winner();
    cursors_[input] += Reverse ? std::size_t(-1) : 1;
    uint128 candidate = head(input);
    for (std::size_t node = (leaves_ + input) / 2; node >= 1; node /= 2) {
      uint128 const held = nodes_[node];
      nodes_[node]       = std::max(held, candidate);
      candidate          = std::min(held, candidate);
    }
    nodes_[0] = candidate;
  }

 private:
  /// The value of `input`'s current row in the tree's order.
  [[nodiscard]] uint128 head(std::size_t input) const noexcept {
    if (cursors_[input] == ends_[input]) {
      return (uint128{~std::uint64_t{0}} << 64) | (leaves_ + input);
    }
    std::uint64_t const word = encode_key<T, Descending>(values_[input][row_of(input)]);
    return Reverse ? (uint128{~word} << 64) | (leaves_ - 1 - input) : (uint128{word} << 64) | input;
  }
  [[nodiscard]] std::size_t input_of(uint128 value) const noexcept {
    auto const rank = static_cast<std::size_t>(static_cast<std::uint64_t>(value));
    if (rank >= leaves_) {
      return rank - leaves_;
    }
    return Reverse ? leaves_ - 1 - rank : rank;
  }

  std::size_t leaves_;
  std::vector<T const*> values_;
  std::vector<std::size_t> cursors_;  ///< forward: the next row; reverse: rows left
  std::vector<std::size_t> ends_;     ///< the cursor of an exhausted input
  std::vector<uint128> nodes_;        ///< [0]: the winner; [1, leaves): the loser at each node
};

/// `merge_halves`, or the parts of `plan.cuts`, with encoded loser trees, for a single null-free
/// fixed-width key.
template <typename T, bool Descending>
void merge_encoded(std::span<table_view const> keys,
                   merge_source* sources,
                   std::size_t rows,
                   merge_plan const& plan) {
  if (plan.cuts.has_value()) {
    merge_cut_parts(keys,
                    *plan.cuts,
                    sources,
                    [&](std::span<table_view const> slices,
                        std::span<std::size_t const> starts,
                        merge_source* output,
                        std::size_t part_rows,
                        std::size_t) {
                      encoded_loser_tree<T, Descending, false> tree{slices};
                      write_forward(tree, starts, output, part_rows);
                    });
    return;
  }
  auto const part = [&]<bool Reverse>(std::size_t begin, std::size_t end) {
    encoded_loser_tree<T, Descending, Reverse> tree{keys};
    std::vector<std::size_t> taken(keys.size(), 0);
    for (std::size_t step = begin; step < end; ++step) {
      std::size_t const position = Reverse ? end - 1 - (step - begin) : step;
      std::size_t const input    = tree.winner();
      sources[position]          = source_of(input, tree.row_of(input));
      ++taken[input];
      tree.advance();
    }
    return taken;
  };
  merge_halves(keys, rows, plan.halves, [&](bool reverse, std::size_t front) {
    return reverse ? part.template operator()<true>(front, rows)
                   : part.template operator()<false>(0, front);
  });
}

/// `merge_sources` over normalized-key prefixes of `Words` words.
template <std::size_t Words>
void merge_by_prefix(std::span<table_view const> keys,
                     normalized_key_layout const& layout,
                     row_comparator const& comparator,
                     merge_source* sources,
                     std::size_t rows,
                     merge_plan const& plan,
                     stream_view stream,
                     resource_ref temporary) {
  // One block of encoded rows per input for each tree, the trees' blocks one after the other.
  std::vector<std::size_t> firsts{0};
  if (plan.cuts.has_value()) {
    merge_cuts const& cuts = *plan.cuts;
    for (std::size_t part = 0; part < cuts.parts(); ++part) {
      std::size_t records = 0;
      for (std::size_t input = 0; input < keys.size(); ++input) {
        records += std::min(PREFIX_BLOCK_ROWS, cuts.end(part, input) - cuts.begin(part, input));
      }
      firsts.push_back(firsts.back() + records);
    }
  } else {
    std::size_t const records = prefix_block_records(keys);
    firsts.push_back(records);
    firsts.push_back(2 * records);
  }
  buffer blocks{firsts.back() * sizeof(key_record<Words>), stream, temporary};
  auto* base = static_cast<key_record<Words>*>(blocks.data());
  merge_sources(
    keys,
    sources,
    rows,
    plan,
    [&](std::span<table_view const> tree_keys, bool reverse, std::size_t tree) {
      return prefix_heads<Words>{tree_keys, layout, comparator, reverse, base + firsts[tree]};
    });
}

/// Checks what every merge needs of its inputs: matching columns and key columns in range.
void check_merge_inputs(std::span<table_view const> inputs,
                        std::vector<std::size_t> const& key_columns) {
  SPILLWAY_EXPECTS_LT(inputs.size(),
                      std::size_t{1} << (64 - SOURCE_ROW_BITS),
                      "merge: too many inputs",
                      invalid_argument);
  table_view const& first = inputs.front();
  for (std::size_t input = 0; input < inputs.size(); ++input) {
    SPILLWAY_EXPECTS(inputs[input].num_columns() == first.num_columns(),
                     "merge: input " + std::to_string(input) + " has " +
                       std::to_string(inputs[input].num_columns()) + " columns, input 0 has " +
                       std::to_string(first.num_columns()),
                     invalid_argument);
    for (std::size_t index = 0; index < first.num_columns(); ++index) {
      SPILLWAY_EXPECTS(inputs[input].column(index).type() == first.column(index).type(),
                       "merge: column " + std::to_string(index) + " of input " +
                         std::to_string(input) + " is " +
                         to_string(inputs[input].column(index).type()) + ", of input 0 " +
                         to_string(first.column(index).type()),
                       invalid_argument);
    }
  }
  for (std::size_t const key : key_columns) {
    SPILLWAY_EXPECTS(key < first.num_columns(),
                     "merge: key column " + std::to_string(key) + " out of range; inputs have " +
                       std::to_string(first.num_columns()) + " columns",
                     invalid_argument);
  }
}

}  // namespace

std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs) {
  return merge_order(inputs, key_columns, orders, stream, mrs, PARALLEL_MERGE_MIN_ROWS);
}

std::unique_ptr<column> merge_order(std::span<table_view const> inputs,
                                    std::vector<std::size_t> const& key_columns,
                                    sort_order const& orders,
                                    stream_view stream,
                                    memory_resources mrs,
                                    std::size_t min_rows_per_part) {
  SPILLWAY_EXPECTS(
    min_rows_per_part > 0, "merge_order: min_rows_per_part must be positive", invalid_argument);
  sort_order const resolved = resolve_orders(orders, key_columns.size());
  if (inputs.empty()) {
    return make_fixed_width_column(
      type_id::UINT64, 0, mask_state::UNALLOCATED, stream, mrs.output());
  }
  check_merge_inputs(inputs, key_columns);

#if SPILLWAY_HAS_CUDA
  for (auto const& input : inputs) {
    if (cuda::on_device(input)) {
      return cuda::merge_order(inputs, key_columns, resolved, stream, mrs);
    }
  }
#endif
  std::vector<table_view> keys;
  keys.reserve(inputs.size());
  std::size_t rows = 0;
  for (auto const& input : inputs) {
    SPILLWAY_EXPECTS_LT(input.num_rows(),
                        std::size_t{1} << SOURCE_ROW_BITS,
                        "merge: too many rows in one input",
                        invalid_argument);
    keys.push_back(input.select(key_columns));
    rows += input.num_rows();
  }
  auto order =
    make_fixed_width_column(type_id::UINT64, rows, mask_state::UNALLOCATED, stream, mrs.output());
  auto* sources = order->mutable_data<merge_source>();
  if (key_columns.empty()) {
    // Every row ties, and ties keep input order: the inputs one after the other. (The trees
    // below would see no rows: a table of no key columns has none.)
    for (std::size_t input = 0; input < inputs.size(); ++input) {
      for (std::size_t row = 0; row < inputs[input].num_rows(); ++row) {
        *sources++ = source_of(input, row);
      }
    }
    return order;
  }
  row_comparator const comparator{keys.front(), resolved};
  merge_plan const plan = plan_merge(keys, rows, comparator, min_rows_per_part);
  if (single_encodable_key(keys)) {
    bool const descending = resolved.front().direction == order::DESCENDING;
    visit_fixed_width(keys.front().column(0).type(), [&]<typename T>() {
      if constexpr (sizeof(T) <= sizeof(std::uint64_t)) {  // as single_encodable_key says
        if (descending) {
          merge_encoded<T, true>(keys, sources, rows, plan);
        } else {
          merge_encoded<T, false>(keys, sources, rows, plan);
        }
      }
    });
  } else {
    normalized_key_layout layout = plan_normalized_keys(keys, resolved);
    narrow_string_prefix(layout, keys);
    if (layout.words() == 0) {
      merge_sources(
        keys, sources, rows, plan, [&](std::span<table_view const> tree_keys, bool, std::size_t) {
          return row_heads{tree_keys, comparator};
        });
    } else {
      with_prefix_words(layout.words(), [&]<std::size_t Words>() {
        merge_by_prefix<Words>(
          keys, layout, comparator, sources, rows, plan, stream, mrs.temporary());
      });
    }
  }

  return order;
}

std::unique_ptr<table> merge(std::span<table_view const> inputs,
                             std::vector<std::size_t> const& key_columns,
                             sort_order const& orders,
                             stream_view stream,
                             memory_resources mrs) {
  if (inputs.empty()) {
    resolve_orders(orders, key_columns.size());  // validate
    return std::make_unique<table>();
  }
  auto const order =
    merge_order(inputs, key_columns, orders, stream, mrs.with_output(mrs.temporary()));
  return gather_sources_in_parallel(
    inputs, order->view().data<std::uint64_t>(), order->size(), SOURCE_ROW_BITS, stream, mrs);
}

}  // namespace detail

std::unique_ptr<table> merge(std::span<table_view const> inputs,
                             std::vector<std::size_t> const& key_columns,
                             sort_order const& orders,
                             stream_view stream,
                             memory_resources mrs) {
  return detail::merge(inputs, key_columns, orders, stream, mrs);
}

}  // namespace spillway
