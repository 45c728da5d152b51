/**
 * @file oom_injection.hpp
 * @brief Deterministic allocation failures for tests.
 *
 * Spec text (API or SPILLWAY_INJECT_OOM): `task=*|ID,kind=retry|split|oom,skip=N,count=M`
 * makes allocations N+1 .. N+M (counted per matching task, through one retry resource adaptor)
 * fail: `retry` throws `retry_oom`, `split` throws `split_and_retry_oom`, `oom` makes the
 * upstream allocation fail so that the whole failure path (spill, block, retry protocol) runs.
 * Defaults: task=*, kind=retry, skip=0, count=1.
 */
#pragma once

#include <spillway/core/ids.hpp>

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace spillway {

/** @brief What an injected failure throws. */
enum class injected_oom_kind : std::uint8_t { RETRY, SPLIT, OOM };

/** @brief Which allocations fail. */
struct oom_injection {
  std::optional<task_id> task;  ///< empty: every task (and allocations outside tasks)
  injected_oom_kind kind = injected_oom_kind::RETRY;
  std::size_t skip       = 0;  ///< matching allocations let through first
  std::size_t count      = 1;  ///< matching allocations that fail after those
};

/**
 * @brief Parses the spec text described in this file.
 * @throws spillway::invalid_argument naming the bad field
 */
oom_injection parse_oom_injection(std::string_view text);

/** @return the spec text of `injection` */
std::string to_string(oom_injection const& injection);

}  // namespace spillway
