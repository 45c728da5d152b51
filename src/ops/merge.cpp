#include "ops/row_comparator.hpp"

#include <spillway/core/error.hpp>
#include <spillway/memory/buffer.hpp>
#include <spillway/ops/merge.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// Where one output row of a merge comes from.
struct merge_source {
  std::uint64_t input;
  std::uint64_t row;
};

/// Maps a key value to an unsigned integer whose order is the key order (see normalized_key):
/// sign bit flipped for signed integers, IEEE order for floats with -0.0 == 0.0 and every NaN
/// equal and above +inf, and all bits inverted for DESCENDING.
using key_encoder = std::uint64_t (*)(column_view const&, std::size_t) noexcept;

template <typename T, bool Descending>
std::uint64_t encode_key(column_view const& column, std::size_t row) noexcept {
  T value               = column.data<T>()[row];
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

/// An encoder for a single fixed-width key column that no input has nulls in; null otherwise,
/// and then the tree compares full rows.
key_encoder single_key_encoder(std::span<table_view const> keys, sort_order const& orders) {
  if (keys.empty() || keys.front().num_columns() != 1) {
    return nullptr;
  }
  data_type const type = keys.front().column(0).type();
  if (!is_fixed_width(type) || size_of(type) > 8) {
    return nullptr;
  }
  for (auto const& key : keys) {
    if (key.column(0).has_nulls()) {
      return nullptr;
    }
  }
  bool const descending = !orders.empty() && orders.front().direction == order::DESCENDING;
  return visit_fixed_width(type, [&]<typename T>() -> key_encoder {
    return descending ? &encode_key<T, true> : &encode_key<T, false>;
  });
}

/**
 * A tournament tree of losers over one cursor per input: `winner()` is the input whose current
 * row comes first; `advance()` moves its cursor and replays only its path to the root.
 */
class loser_tree {
 public:
  loser_tree(std::span<table_view const> keys,
             row_comparator const& comparator,
             key_encoder encoder)
    : keys_(keys),
      comparator_(comparator),
      encoder_(encoder),
      leaves_(std::bit_ceil(std::max<std::size_t>(keys.size(), 1))),
      cursors_(leaves_, 0),
      heads_(encoder != nullptr ? leaves_ : 0, 0),
      losers_(leaves_, 0) {
    if (encoder_ != nullptr) {
      for (std::size_t input = 0; input < keys_.size(); ++input) {
        if (!is_exhausted(input)) {
          heads_[input] = encoder_(keys_[input].column(0), 0);
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

  /// @return the input whose current row comes next, or null when every input is exhausted
  [[nodiscard]] bool exhausted() const noexcept { return is_exhausted(losers_[0]); }
  [[nodiscard]] std::size_t winner() const noexcept { return losers_[0]; }
  [[nodiscard]] std::size_t cursor(std::size_t input) const noexcept { return cursors_[input]; }

  /// Moves the winner's cursor to its next row and finds the new winner.
  void advance() noexcept {
    std::size_t candidate = losers_[0];
    ++cursors_[candidate];
    if (encoder_ != nullptr && !is_exhausted(candidate)) {
      heads_[candidate] = encoder_(keys_[candidate].column(0), cursors_[candidate]);
    }
    for (std::size_t node = (leaves_ + candidate) / 2; node >= 1; node /= 2) {
      if (before(losers_[node], candidate)) {
        std::swap(losers_[node], candidate);
      }
    }
    losers_[0] = candidate;
  }

 private:
  [[nodiscard]] bool is_exhausted(std::size_t input) const noexcept {
    return input >= keys_.size() || cursors_[input] >= keys_[input].num_rows();
  }

  /// Whether input `lhs`'s current row goes strictly before input `rhs`'s; ties by input.
  [[nodiscard]] bool before(std::size_t lhs, std::size_t rhs) const noexcept {
    if (is_exhausted(lhs)) {
      return false;
    }
    if (is_exhausted(rhs)) {
      return true;
    }
    if (encoder_ != nullptr) {
      return heads_[lhs] != heads_[rhs] ? heads_[lhs] < heads_[rhs] : lhs < rhs;
    }
    int const result = comparator_.compare(keys_[lhs], cursors_[lhs], keys_[rhs], cursors_[rhs]);
    return result != 0 ? result < 0 : lhs < rhs;
  }

  std::span<table_view const> keys_;
  row_comparator const& comparator_;
  key_encoder encoder_;  ///< set for a single null-free fixed-width key: compare encoded heads
  std::size_t leaves_;
  std::vector<std::size_t> cursors_;
  std::vector<std::uint64_t> heads_;  ///< encoded key of each input's current row
  std::vector<std::size_t> losers_;   ///< [0]: the winner; [1, leaves): the loser at each node
};

/// Column `index` of every input, gathered by `sources` into one column from `output`.
std::unique_ptr<column> gather_from_inputs(std::span<table_view const> inputs,
                                           std::size_t index,
                                           merge_source const* sources,
                                           std::size_t rows,
                                           stream_view stream,
                                           resource_ref output) {
  data_type const type = inputs.front().column(index).type();
  bool nullable        = false;
  for (auto const& input : inputs) {
    nullable = nullable || input.column(index).has_nulls();
  }
  mask_state const state   = nullable ? mask_state::ALL_VALID : mask_state::UNALLOCATED;
  auto const source_column = [&](std::size_t row) -> column_view const& {
    return inputs[sources[row].input].column(index);
  };
  std::unique_ptr<column> result;
  if (is_fixed_width(type)) {
    result = make_fixed_width_column(type, rows, state, stream, output);
    visit_fixed_width(type, [&]<typename T>() {
      T* out = result->mutable_data<T>();
      for (std::size_t row = 0; row < rows; ++row) {
        out[row] = source_column(row).template data<T>()[sources[row].row];
      }
    });
  } else {
    std::size_t chars = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      chars += source_column(row).string_at(sources[row].row).size();
    }
    result                = make_strings_column(rows, chars, state, stream, output);
    std::int64_t* offsets = result->mutable_offsets();
    char* out             = result->mutable_chars();
    std::int64_t cursor   = 0;
    offsets[0]            = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      std::string_view const value = source_column(row).string_at(sources[row].row);
      if (!value.empty()) {
        std::memcpy(out + cursor, value.data(), value.size());
      }
      cursor += static_cast<std::int64_t>(value.size());
      offsets[row + 1] = cursor;
    }
  }
  if (nullable) {
    bitmask_type* mask     = result->mutable_null_mask();
    std::size_t null_count = 0;
    for (std::size_t row = 0; row < rows; ++row) {
      if (source_column(row).is_null(sources[row].row)) {
        set_bit(mask, row, false);
        ++null_count;
      }
    }
    result->set_null_count(null_count);
  }
  return result;
}

}  // namespace

std::unique_ptr<table> merge(std::span<table_view const> inputs,
                             std::vector<std::size_t> const& key_columns,
                             sort_order const& orders,
                             stream_view stream,
                             memory_resources mrs) {
  sort_order const resolved = resolve_orders(orders, key_columns.size());
  if (inputs.empty()) {
    return std::make_unique<table>();
  }
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

  std::vector<table_view> keys;
  keys.reserve(inputs.size());
  std::size_t rows = 0;
  for (auto const& input : inputs) {
    keys.push_back(input.select(key_columns));
    rows += input.num_rows();
  }
  buffer sources_memory{rows * sizeof(merge_source), stream, mrs.temporary()};
  auto* sources = static_cast<merge_source*>(sources_memory.data());
  row_comparator const comparator{keys.front(), resolved};
  loser_tree tree{keys, comparator, single_key_encoder(keys, resolved)};
  for (std::size_t row = 0; row < rows; ++row) {
    std::size_t const input = tree.winner();
    sources[row]            = merge_source{input, tree.cursor(input)};
    tree.advance();
  }

  std::vector<std::unique_ptr<column>> columns;
  columns.reserve(first.num_columns());
  for (std::size_t index = 0; index < first.num_columns(); ++index) {
    columns.push_back(gather_from_inputs(inputs, index, sources, rows, stream, mrs.output()));
  }
  return std::make_unique<table>(std::move(columns));
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
