/**
 * @file preflight.hpp
 * @brief What a subcommand checks before it reads its first row, so that a mistake in its command
 * line is reported at once rather than after the work it would have wasted: sizes, key lists and
 * the paths it will write to.
 */
#pragma once

#include "command_line.hpp"

#include <spillway/core/units.hpp>

#include <cstddef>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

namespace spillway::cli {

/// The smallest `--file-size` accepted: smaller targets write files that are mostly footer, a
/// file per few rows.
inline constexpr std::size_t MIN_FILE_SIZE = 64_KiB;

/**
 * @brief Parses `--file-size` (see `parse_size_flag`).
 * @throws usage_error when it is not a size or is below MIN_FILE_SIZE
 */
std::size_t parse_file_size_flag(std::string_view text);

/**
 * @brief Refuses a `--by` list that names a column more than once (its order would be given twice,
 * perhaps two ways).
 * @throws usage_error naming the column
 */
void refuse_repeated_keys(std::vector<key_spec> const& keys);

/**
 * @brief Checks that spill files can go under `spill_dir` (empty: `default_spill_root()`): creates
 * it when missing as the spill store would, then creates, writes and removes a probe file there.
 * A directory it created for the probe is removed again (the store makes it when it spills).
 * @throws usage_error naming --spill-dir, the directory and why
 */
void check_spill_directory(std::string const& spill_dir);

/**
 * @brief Checks that `--report`'s HTML file and the JSON beside it can be written (a file that
 * did not exist is created and removed again; one that exists is not changed).
 * @throws usage_error naming --report, the file and why
 */
void check_report_paths(std::string const& report, std::filesystem::path const& json);

}  // namespace spillway::cli
