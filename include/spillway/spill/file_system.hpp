/**
 * @file file_system.hpp
 * @brief The seam between the spill store and the operating system's files (leveldb's `Env`):
 * the store reaches disk only through a `file_system`, so tests inject full disks, failing
 * directories and short reads.
 */
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace spillway {

/**
 * @brief A file open for writing at explicit offsets.
 * @note `write_at` at disjoint offsets may be called from several threads at once.
 */
class writable_file {
 public:
  writable_file()                                = default;
  virtual ~writable_file()                       = default;
  writable_file(writable_file const&)            = delete;
  writable_file& operator=(writable_file const&) = delete;
  writable_file(writable_file&&)                 = delete;
  writable_file& operator=(writable_file&&)      = delete;

  /**
   * @brief Writes all `bytes` bytes of `data` at `offset`.
   * @throws spillway::io_error naming the file and the system error (e.g. "No space left on
   * device") when not every byte could be written
   */
  virtual void write_at(std::uint64_t offset, void const* data, std::size_t bytes) = 0;
  /** @brief Flushes written data to the device. @throws spillway::io_error */
  virtual void sync() = 0;
  /** @return the path the file was opened with */
  [[nodiscard]] virtual std::string const& path() const noexcept = 0;
};

/**
 * @brief A file open for reading at explicit offsets.
 * @note `read_at` may be called from several threads at once.
 */
class readable_file {
 public:
  readable_file()                                = default;
  virtual ~readable_file()                       = default;
  readable_file(readable_file const&)            = delete;
  readable_file& operator=(readable_file const&) = delete;
  readable_file(readable_file&&)                 = delete;
  readable_file& operator=(readable_file&&)      = delete;

  /**
   * @brief Reads up to `bytes` bytes at `offset` into `data`.
   * @return the bytes read: fewer than `bytes` only at the end of the file
   * @throws spillway::io_error on a system error
   */
  virtual std::size_t read_at(std::uint64_t offset, void* data, std::size_t bytes) = 0;
  /** @return the path the file was opened with */
  [[nodiscard]] virtual std::string const& path() const noexcept = 0;
};

/**
 * @brief Files and directories, as the spill store uses them.
 * @note Implementations are thread-safe. Every failure is a `spillway::io_error` whose message
 * names the path and the system error.
 */
class file_system {
 public:
  file_system()                              = default;
  virtual ~file_system()                     = default;
  file_system(file_system const&)            = delete;
  file_system& operator=(file_system const&) = delete;
  file_system(file_system&&)                 = delete;
  file_system& operator=(file_system&&)      = delete;

  /** @brief Creates (or truncates) `path` for writing. @throws spillway::io_error */
  [[nodiscard]] virtual std::unique_ptr<writable_file> open_writable(std::string const& path) = 0;
  /** @brief Opens an existing `path` for reading. @throws spillway::io_error when it is missing */
  [[nodiscard]] virtual std::unique_ptr<readable_file> open_readable(std::string const& path) = 0;
  /** @brief Removes the file `path`. @return false when it did not exist or could not go */
  virtual bool remove_file(std::string const& path) noexcept = 0;
  /** @brief Creates `path` and its missing parents. @throws spillway::io_error */
  virtual void create_directories(std::string const& path) = 0;
  /** @brief Removes `path` and everything under it; a missing path is fine. Never throws. */
  virtual void remove_all(std::string const& path) noexcept = 0;
  /** @return the names (not paths) of the entries of directory `path`; empty when missing */
  [[nodiscard]] virtual std::vector<std::string> list_directory(std::string const& path) = 0;
  /** @return the bytes an unprivileged writer can still write under `path` @throws io_error */
  [[nodiscard]] virtual std::uint64_t free_space(std::string const& path) = 0;
};

/** @brief The operating system's files through POSIX calls (pwrite, pread, statvfs). */
class posix_file_system final : public file_system {
 public:
  [[nodiscard]] std::unique_ptr<writable_file> open_writable(std::string const& path) override;
  [[nodiscard]] std::unique_ptr<readable_file> open_readable(std::string const& path) override;
  bool remove_file(std::string const& path) noexcept override;
  void create_directories(std::string const& path) override;
  void remove_all(std::string const& path) noexcept override;
  [[nodiscard]] std::vector<std::string> list_directory(std::string const& path) override;
  [[nodiscard]] std::uint64_t free_space(std::string const& path) override;
};

/** @return the process-wide `posix_file_system` */
file_system& default_file_system() noexcept;

}  // namespace spillway
