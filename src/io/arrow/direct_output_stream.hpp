/**
 * @file direct_output_stream.hpp
 * @brief Internal: an Arrow output stream that writes a new file around the kernel's page cache.
 */
#pragma once

#include <arrow/io/interfaces.h>
#include <arrow/memory_pool.h>
#include <arrow/result.h>
#include <arrow/status.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace spillway::detail {

/**
 * @brief An `arrow::io::OutputStream` over a new file opened with `O_DIRECT`: writes gather in an
 * aligned buffer from `pool` and go to the disk a whole buffer at a time, without the kernel
 * copying them into its page cache first. On a machine whose page cache is full of other files,
 * every buffered write first reclaims cached pages (the sort of 50M string keys: system time
 * 5.4-5.6 -> 3.3-3.4 s, wall 10.68-11.04 -> 9.39-9.41 s with this stream; 7843efc:
 * docs/BENCHMARKS.md, "Seventh run"). The last bytes (less than an
 * alignment unit) go through the page cache at `Close`. A file system without `O_DIRECT` (tmpfs),
 * or one that refuses the direct writes it accepted at `open`, gets plain buffered writes.
 * @note Not thread-safe, like Arrow's own file streams.
 */
class direct_output_stream final : public arrow::io::OutputStream {
 public:
  /// Alignment of the buffer, of every direct write's size and of its file offset.
  static constexpr std::size_t ALIGNMENT = 4096;

  /**
   * @brief Creates (or truncates) `path`.
   * @param buffer_bytes bytes gathered per direct write (rounded up to `ALIGNMENT`)
   */
  static arrow::Result<std::shared_ptr<direct_output_stream>> Open(std::string const& path,
                                                                   arrow::MemoryPool* pool,
                                                                   std::size_t buffer_bytes);

  ~direct_output_stream() override;
  direct_output_stream(direct_output_stream const&)            = delete;
  direct_output_stream& operator=(direct_output_stream const&) = delete;
  direct_output_stream(direct_output_stream&&)                 = delete;
  direct_output_stream& operator=(direct_output_stream&&)      = delete;

  using arrow::io::OutputStream::Write;
  arrow::Status Write(void const* data, int64_t nbytes) override;
  /// Writes the whole aligned units gathered so far; the rest (under ALIGNMENT bytes) waits for
  /// more bytes or `Close`. `Tell` counts it either way.
  arrow::Status Flush() override;
  /// Writes what is left, closes the file and frees the buffer. After a failed write it only
  /// closes the file and returns that failure.
  arrow::Status Close() override;
  [[nodiscard]] bool closed() const override { return descriptor_ < 0; }
  [[nodiscard]] arrow::Result<int64_t> Tell() const override;

  /// @return whether the file was opened for direct writes (false: the file system refused)
  [[nodiscard]] bool direct() const noexcept { return direct_; }

 private:
  direct_output_stream(std::string path,
                       int descriptor,
                       bool direct,
                       arrow::MemoryPool* pool,
                       std::uint8_t* buffer,
                       std::size_t capacity) noexcept;

  /// Writes `bytes` from `data` at the end of the file, all of them.
  arrow::Status write_all(std::uint8_t const* data, std::size_t bytes);
  /// Writes the first `bytes` (a multiple of ALIGNMENT) of the buffer and moves the rest down;
  /// a failure is kept in `failure_`, and no write follows it.
  arrow::Status drain(std::size_t bytes);
  void release_buffer() noexcept;

  std::string path_;
  int descriptor_;
  bool direct_;
  arrow::MemoryPool* pool_;
  std::uint8_t* buffer_;
  std::size_t capacity_;
  std::size_t buffered_ = 0;  ///< bytes in the buffer
  std::size_t written_  = 0;  ///< bytes in the file
  arrow::Status failure_;     ///< the first failed write
};

}  // namespace spillway::detail
