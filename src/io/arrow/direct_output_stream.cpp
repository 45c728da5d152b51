#include "io/arrow/direct_output_stream.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>
#include <utility>

namespace spillway::detail {
namespace {

arrow::Status io_error(std::string const& what, std::string const& path, int error) {
  return arrow::Status::IOError(what, " '", path, "': ", std::strerror(error));
}

}  // namespace

arrow::Result<std::shared_ptr<direct_output_stream>> direct_output_stream::Open(
  std::string const& path, arrow::MemoryPool* pool, std::size_t buffer_bytes) {
  int constexpr FLAGS = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
  bool direct         = true;
  int descriptor      = ::open(path.c_str(), FLAGS | O_DIRECT, 0644);
  if (descriptor < 0 && errno == EINVAL) {
    direct     = false;  // the file system does not do direct I/O
    descriptor = ::open(path.c_str(), FLAGS, 0644);
  }
  if (descriptor < 0) {
    return io_error("cannot create", path, errno);
  }
  std::size_t const capacity =
    std::max<std::size_t>(1, (buffer_bytes + ALIGNMENT - 1) / ALIGNMENT) * ALIGNMENT;
  std::uint8_t* buffer = nullptr;
  if (auto status =
        pool->Allocate(static_cast<int64_t>(capacity), static_cast<int64_t>(ALIGNMENT), &buffer);
      !status.ok()) {
    ::close(descriptor);
    ::unlink(path.c_str());  // created above, empty
    return status;
  }
  return std::shared_ptr<direct_output_stream>(
    new direct_output_stream(path, descriptor, direct, pool, buffer, capacity));
}

direct_output_stream::direct_output_stream(std::string path,
                                           int descriptor,
                                           bool direct,
                                           arrow::MemoryPool* pool,
                                           std::uint8_t* buffer,
                                           std::size_t capacity) noexcept
  : path_(std::move(path)),
    descriptor_(descriptor),
    direct_(direct),
    pool_(pool),
    buffer_(buffer),
    capacity_(capacity) {}

direct_output_stream::~direct_output_stream() {
  if (descriptor_ >= 0) {
    (void)Close();
  }
  release_buffer();
}

void direct_output_stream::release_buffer() noexcept {
  if (buffer_ != nullptr) {
    pool_->Free(buffer_, static_cast<int64_t>(capacity_), static_cast<int64_t>(ALIGNMENT));
    buffer_ = nullptr;
  }
}

arrow::Status direct_output_stream::write_all(std::uint8_t const* data, std::size_t bytes) {
  while (bytes > 0) {
    ssize_t const wrote = ::write(descriptor_, data, bytes);
    if (wrote < 0) {
      if (errno == EINTR) {
        continue;
      }
      if (errno == EINVAL && direct_) {
        // Opened for direct I/O but the writes are refused (a larger logical block, some FUSE
        // and overlay file systems): the same bytes again through the page cache.
        int const flags = ::fcntl(descriptor_, F_GETFL);
        if (flags >= 0 && ::fcntl(descriptor_, F_SETFL, flags & ~O_DIRECT) == 0) {
          direct_ = false;
          continue;
        }
      }
      return io_error("cannot write", path_, errno);
    }
    if (wrote == 0) {
      return io_error("cannot write", path_, ENOSPC);
    }
    data += wrote;
    bytes -= static_cast<std::size_t>(wrote);
    written_ += static_cast<std::size_t>(wrote);
  }
  return arrow::Status::OK();
}

arrow::Status direct_output_stream::drain(std::size_t bytes) {
  if (auto status = write_all(buffer_, bytes); !status.ok()) {
    // Part of the buffer may be in the file already: nothing more is written.
    failure_ = status;
    return status;
  }
  std::memmove(buffer_, buffer_ + bytes, buffered_ - bytes);
  buffered_ -= bytes;
  return arrow::Status::OK();
}

arrow::Status direct_output_stream::Write(void const* data, int64_t nbytes) {
  if (closed()) {
    return arrow::Status::Invalid("write to closed file '", path_, "'");
  }
  ARROW_RETURN_NOT_OK(failure_);
  auto const* from = static_cast<std::uint8_t const*>(data);
  auto left        = static_cast<std::size_t>(nbytes);
  while (left > 0) {
    std::size_t const take = std::min(left, capacity_ - buffered_);
    std::memcpy(buffer_ + buffered_, from, take);
    buffered_ += take;
    from += take;
    left -= take;
    if (buffered_ == capacity_) {
      ARROW_RETURN_NOT_OK(drain(capacity_));
    }
  }
  return arrow::Status::OK();
}

arrow::Status direct_output_stream::Flush() {
  if (closed()) {
    return arrow::Status::Invalid("flush of closed file '", path_, "'");
  }
  ARROW_RETURN_NOT_OK(failure_);
  std::size_t const aligned = buffered_ / ALIGNMENT * ALIGNMENT;
  return aligned > 0 ? drain(aligned) : arrow::Status::OK();
}

arrow::Status direct_output_stream::Close() {
  if (closed()) {
    return arrow::Status::OK();
  }
  arrow::Status status = failure_.ok() ? Flush() : failure_;
  if (status.ok() && buffered_ > 0) {
    // The tail is not a whole unit: it goes through the page cache.
    if (direct_) {
      int const flags = ::fcntl(descriptor_, F_GETFL);
      if (flags < 0 || ::fcntl(descriptor_, F_SETFL, flags & ~O_DIRECT) < 0) {
        status = io_error("cannot finish", path_, errno);
      }
    }
    if (status.ok()) {
      status = drain(buffered_);
    }
  }
  if (::close(descriptor_) != 0 && status.ok()) {
    status = io_error("cannot close", path_, errno);
  }
  descriptor_ = -1;
  release_buffer();
  return status;
}

arrow::Result<int64_t> direct_output_stream::Tell() const {
  if (closed()) {
    return arrow::Status::Invalid("tell of closed file '", path_, "'");
  }
  return static_cast<int64_t>(written_ + buffered_);
}

}  // namespace spillway::detail
