/**
 * @file split_policy.hpp
 * @brief How `with_retry` cuts an input that does not fit, and the interface inputs implement.
 */
#pragma once

#include <concepts>
#include <cstddef>
#include <functional>
#include <utility>

namespace spillway {

/**
 * @brief An input `with_retry` can protect.
 *
 * - `rows()`: its size in rows;
 * - `make_spillable()`: from now on its data may leave the device (the roll-back point);
 * - `materialize()`: bring it back and pin it for the attempt;
 * - `split_at(row)`: two inputs, rows [0, row) and [row, rows()), in order.
 * Spillable handles of the spill store implement it; `table_input` is the in-memory one.
 */
template <typename Input>
concept retryable_input = std::movable<Input> && requires(Input& input, Input const& const_input) {
  { const_input.rows() } -> std::convertible_to<std::size_t>;
  input.make_spillable();
  input.materialize();
  { input.split_at(std::size_t{}) } -> std::same_as<std::pair<Input, Input>>;
};

/** @brief Cuts an input (of at least two rows) into two non-empty pieces, in order. */
template <typename Input>
using split_policy = std::function<std::pair<Input, Input>(Input& input)>;

/** @brief The default policy: halve by rows. */
template <retryable_input Input>
std::pair<Input, Input> split_in_half(Input& input) {
  return input.split_at(input.rows() / 2);
}

}  // namespace spillway
