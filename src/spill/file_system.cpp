#include <spillway/core/error.hpp>
#include <spillway/spill/file_system.hpp>

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <sys/statvfs.h>
#include <system_error>
#include <unistd.h>

namespace spillway {
namespace {

[[noreturn]] void throw_errno(std::string const& what, std::string const& path, int error) {
  throw io_error(what + " '" + path + "': " + std::strerror(error));
}

class posix_writable_file final : public writable_file {
 public:
  posix_writable_file(int descriptor, std::string path)
    : descriptor_(descriptor), path_(std::move(path)) {}
  ~posix_writable_file() override { ::close(descriptor_); }

  void write_at(std::uint64_t offset, void const* data, std::size_t bytes) override {
    auto const* cursor = static_cast<char const*>(data);
    while (bytes > 0) {
      ssize_t const written = ::pwrite(descriptor_, cursor, bytes, static_cast<off_t>(offset));
      if (written < 0) {
        if (errno == EINTR) {
          continue;
        }
        throw_errno("cannot write " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(offset) + " of",
                    path_,
                    errno);
      }
      if (written == 0) {
        throw_errno("cannot write to", path_, ENOSPC);
      }
      cursor += written;
      bytes -= static_cast<std::size_t>(written);
      offset += static_cast<std::uint64_t>(written);
    }
  }
  void sync() override {
    if (::fdatasync(descriptor_) != 0) {
      throw_errno("cannot sync", path_, errno);
    }
  }
  [[nodiscard]] std::string const& path() const noexcept override { return path_; }

 private:
  int descriptor_;
  std::string path_;
};

class posix_readable_file final : public readable_file {
 public:
  posix_readable_file(int descriptor, std::string path)
    : descriptor_(descriptor), path_(std::move(path)) {}
  ~posix_readable_file() override { ::close(descriptor_); }

  std::size_t read_at(std::uint64_t offset, void* data, std::size_t bytes) override {
    auto* cursor      = static_cast<char*>(data);
    std::size_t total = 0;
    while (total < bytes) {
      ssize_t const got =
        ::pread(descriptor_, cursor + total, bytes - total, static_cast<off_t>(offset + total));
      if (got < 0) {
        if (errno == EINTR) {
          continue;
        }
        throw_errno("cannot read " + std::to_string(bytes) + " bytes at offset " +
                      std::to_string(offset) + " of",
                    path_,
                    errno);
      }
      if (got == 0) {
        break;
      }
      total += static_cast<std::size_t>(got);
    }
    return total;
  }
  [[nodiscard]] std::string const& path() const noexcept override { return path_; }

 private:
  int descriptor_;
  std::string path_;
};

}  // namespace

std::unique_ptr<writable_file> posix_file_system::open_writable(std::string const& path) {
  int const descriptor = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (descriptor < 0) {
    throw_errno("cannot create spill file", path, errno);
  }
  return std::make_unique<posix_writable_file>(descriptor, path);
}

std::unique_ptr<readable_file> posix_file_system::open_readable(std::string const& path) {
  int const descriptor = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) {
    throw_errno("cannot open spill file", path, errno);
  }
  return std::make_unique<posix_readable_file>(descriptor, path);
}

bool posix_file_system::remove_file(std::string const& path) noexcept {
  return ::unlink(path.c_str()) == 0;
}

void posix_file_system::create_directories(std::string const& path) {
  std::error_code error;
  std::filesystem::create_directories(path, error);
  if (error) {
    throw io_error("cannot create directory '" + path + "': " + error.message());
  }
}

void posix_file_system::remove_all(std::string const& path) noexcept {
  std::error_code error;
  std::filesystem::remove_all(path, error);
}

std::vector<std::string> posix_file_system::list_directory(std::string const& path) {
  std::vector<std::string> names;
  std::error_code error;
  for (std::filesystem::directory_iterator it(path, error), end; !error && it != end;
       it.increment(error)) {
    names.push_back(it->path().filename().string());
  }
  return names;
}

std::uint64_t posix_file_system::free_space(std::string const& path) {
  struct statvfs info {};
  if (::statvfs(path.c_str(), &info) != 0) {
    throw_errno("cannot stat file system of", path, errno);
  }
  return static_cast<std::uint64_t>(info.f_bavail) * static_cast<std::uint64_t>(info.f_frsize);
}

file_system& default_file_system() noexcept {
  static posix_file_system instance;
  return instance;
}

}  // namespace spillway
