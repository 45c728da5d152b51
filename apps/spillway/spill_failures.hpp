/**
 * @file spill_failures.hpp
 * @brief The commands name a full or broken spill disk behind an out-of-memory failure as the
 * library does (spillway/spill/spill_failures.hpp).
 */
#pragma once

#include <spillway/spill/spill_failures.hpp>

namespace spillway::cli {

using spillway::explaining_spill_failures;

}  // namespace spillway::cli
