/**
 * @file with_retry.hpp
 * @brief Runs a step on a spillable input and recovers from out-of-memory by rolling back,
 * retrying, and splitting.
 *
 * ```
 * auto results = with_retry(coordinator, task, input, [&](auto& piece) {
 *   return sort(piece.materialize(), keys, stream, mrs);
 * });
 * ```
 * On `retry_oom` the input is made spillable, the task waits for memory (the protocol of
 * `oom_coordinator`), and the step runs again on the same input. On `split_and_retry_oom` (or
 * when the protocol chooses this task to split) the input is split by the policy and the pieces
 * run in order; their results come back in order. An input of one row that still cannot run is
 * a final `out_of_memory` naming the sizes.
 */
#pragma once

#include <spillway/lease/task_context.hpp>
#include <spillway/retry/oom_coordinator.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/retry/split_policy.hpp>

#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace spillway {

/** @brief What a step run by `with_retry` rolled back: each failed attempt ran again or split. */
struct retry_counts {
  std::size_t retries = 0;  ///< attempts rolled back and run again on the same input
  std::size_t splits  = 0;  ///< attempts rolled back and cut in two

  retry_counts& operator+=(retry_counts const& other) noexcept {
    retries += other.retries;
    splits += other.splits;
    return *this;
  }
};

namespace detail {

/// What one attempt ended with.
enum class attempt_outcome : std::uint8_t { DONE, RETRY, SPLIT };

[[noreturn]] void throw_cannot_split(task_id task,
                                     std::size_t rows,
                                     out_of_memory const& cause,
                                     bool splitting_allowed);

/// Runs `fn(piece)` once; returns DONE with the result stored in `sink`, or how to go on.
template <typename Input, typename Fn, typename Sink>
attempt_outcome run_attempt(oom_coordinator& coordinator,
                            task_context& task,
                            Input& piece,
                            Fn& fn,
                            Sink&& sink,
                            std::optional<out_of_memory>& cause) {
  try {
    retry_block_marker const marker;
    task_context::thread_binding const binding{task};
    // Inputs may return what they materialized (table_input returns a view, [[nodiscard]]);
    // the step reads the piece itself.
    static_cast<void>(piece.materialize());
    sink(fn(piece));
    coordinator.attempt_succeeded(task.id());
    return attempt_outcome::DONE;
  } catch (retry_oom const& error) {
    cause.emplace(error);
  } catch (split_and_retry_oom const& error) {
    cause.emplace(error);
    piece.make_spillable();
    return attempt_outcome::SPLIT;
  }
  // Rolled back: everything the attempt allocated is freed; the input may spill while we wait.
  piece.make_spillable();
  return coordinator.wait_after_rollback(task.id()) == resume_action::RETRY
           ? attempt_outcome::RETRY
           : attempt_outcome::SPLIT;
}

}  // namespace detail

/**
 * @brief Runs `fn` on `input`, recovering from out-of-memory; see the file comment.
 * @param coordinator the device's OOM protocol
 * @param task the task running the step; bound to the calling thread during each attempt
 * @param input the spillable input; consumed
 * @param fn called as `fn(Input&)` once per attempt and piece
 * @param policy how to split; default halves by rows
 * @param counted where the step's retries and splits are added (also when it throws); may be null
 * @return the results of `fn`, one per piece, in input order (nothing when `fn` returns void)
 * @throws spillway::out_of_memory when a one-row piece still fails to fit
 */
template <retryable_input Input, typename Fn>
auto with_retry(oom_coordinator& coordinator,
                task_context& task,
                Input input,
                Fn&& fn,
                split_policy<Input> policy = split_in_half<Input>,
                retry_counts* counted      = nullptr) {
  retry_counts ignored;
  retry_counts& counts        = counted != nullptr ? *counted : ignored;
  using result_type           = std::invoke_result_t<Fn&, Input&>;
  constexpr bool returns_void = std::is_void_v<result_type>;
  using results_type =
    std::conditional_t<returns_void,
                       std::size_t,
                       std::vector<std::conditional_t<returns_void, int, result_type>>>;
  results_type results{};
  std::deque<Input> pending;
  pending.push_back(std::move(input));
  while (!pending.empty()) {
    Input piece = std::move(pending.front());
    pending.pop_front();
    while (true) {
      std::optional<out_of_memory> cause;
      detail::attempt_outcome outcome;
      if constexpr (returns_void) {
        auto call = [&](Input& in) {
          fn(in);
          return 0;
        };
        outcome = detail::run_attempt(
          coordinator, task, piece, call, [&](int) { ++results; }, cause);
      } else {
        outcome = detail::run_attempt(
          coordinator,
          task,
          piece,
          fn,
          [&](result_type&& r) { results.push_back(std::move(r)); },
          cause);
      }
      if (outcome == detail::attempt_outcome::DONE) {
        break;
      }
      if (outcome == detail::attempt_outcome::RETRY) {
        ++counts.retries;
        continue;
      }
      if (piece.rows() <= 1) {
        detail::throw_cannot_split(task.id(), piece.rows(), *cause, true);
      }
      ++counts.splits;
      auto [first, second] = policy(piece);
      pending.push_front(std::move(second));
      pending.push_front(std::move(first));
      break;
    }
  }
  if constexpr (!returns_void) {
    return results;
  }
}

/**
 * @brief `with_retry` for steps that cannot split their input: a split request is a final
 * `out_of_memory` naming the sizes.
 * @param counted where the step's retries are added (also when it throws); may be null
 * @return the result of `fn`
 */
template <retryable_input Input, typename Fn>
auto with_retry_no_split(oom_coordinator& coordinator,
                         task_context& task,
                         Input input,
                         Fn&& fn,
                         retry_counts* counted = nullptr) {
  using result_type = std::invoke_result_t<Fn&, Input&>;
  for (bool first = true;; first = false) {
    if (!first && counted != nullptr) {
      ++counted->retries;
    }
    std::optional<out_of_memory> cause;
    detail::attempt_outcome outcome;
    if constexpr (std::is_void_v<result_type>) {
      auto call = [&](Input& in) {
        fn(in);
        return 0;
      };
      outcome = detail::run_attempt(
        coordinator, task, input, call, [](int) {}, cause);
      if (outcome == detail::attempt_outcome::DONE) {
        return;
      }
    } else {
      std::optional<result_type> result;
      outcome = detail::run_attempt(
        coordinator,
        task,
        input,
        fn,
        [&](result_type&& r) { result.emplace(std::move(r)); },
        cause);
      if (outcome == detail::attempt_outcome::DONE) {
        return std::move(*result);
      }
    }
    if (outcome == detail::attempt_outcome::SPLIT) {
      detail::throw_cannot_split(task.id(), input.rows(), *cause, false);
    }
  }
}

}  // namespace spillway
