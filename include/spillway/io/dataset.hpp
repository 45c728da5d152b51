/**
 * @file dataset.hpp
 * @brief A file, a directory of files or a glob pattern, expanded to the list of files it names.
 */
#pragma once

#include <string>
#include <vector>

namespace spillway {

/**
 * @brief The files of a dataset, sorted by name.
 *
 * - a regular file: that file;
 * - a directory: its regular files (not recursive), skipping names that start with `.` or `_`
 *   (temporary files of an unfinished write, `_SUCCESS` markers);
 * - a pattern with `*`, `?` or `[`: the regular files it matches (POSIX `glob`).
 *
 * @throws spillway::io_error when the path does not exist, or the directory or pattern names no
 * file; the message names the source
 */
std::vector<std::string> expand_dataset(std::string const& source);

}  // namespace spillway
