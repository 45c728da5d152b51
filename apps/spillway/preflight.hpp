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

/** @brief Where `--report` writes: the HTML report, and the same data as JSON beside it. */
struct report_files {
  std::filesystem::path html;
  std::filesystem::path json;  ///< the HTML's path with the extension replaced by .json
};

/**
 * @brief The files of `--report <report>`, checked: both can be written (a file that did not
 * exist is created and removed again; one that exists is not changed). Of a run on `ranks` > 1
 * ranks, each rank reports its own device, rank r in `<stem>.rank-<r><extension>`.
 * @throws usage_error naming --report, the file and why; also when `report` ends in .json
 */
report_files check_report_files(std::string const& report, int rank = 0, int ranks = 1);

}  // namespace spillway::cli
