/**
 * @file record_merge.hpp
 * @brief Internal: ordering sorted key records whose prefixes tie by their full rows
 * (`tie_breaker`), and merging two sorted runs of records in parts of the output.
 */
#pragma once

#include "ops/normalized_key.hpp"
#include "ops/radix_sort.hpp"
#include "ops/row_comparator.hpp"

#include <spillway/ops/sort.hpp>
#include <spillway/table/table_view.hpp>

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace spillway::detail {

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

}  // namespace spillway::detail
