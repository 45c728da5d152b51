/**
 * @file commands.hpp
 * @brief The subcommands of the `spillway` tool; each file registers its flags with CLI11 and
 * returns the function main() runs when that subcommand was chosen.
 */
#pragma once

#include <CLI/CLI.hpp>

#include <functional>

namespace spillway::cli {

/** @brief A registered subcommand: its CLI11 app and what runs it (returns the exit status). */
struct command {
  CLI::App* app = nullptr;   ///< owned by the parent app
  std::function<int()> run;  ///< called after a successful parse
};

/** @brief `spillway gen timeseries|uniform|skewed|strings ...`: deterministic Parquet data. */
command add_gen_command(CLI::App& parent);

/** @brief `spillway sort INPUT -o OUTPUT --by ...`: an out-of-core sort within budgets. */
command add_sort_command(CLI::App& parent);

/** @brief `spillway shuffle INPUT -o OUTPUT --by ... --partitions P`: hash partitioning. */
command add_shuffle_command(CLI::App& parent);

/** @brief `spillway verify OUTPUT --by ... [--against INPUT]`: order, count and checksum. */
command add_verify_command(CLI::App& parent);

}  // namespace spillway::cli
