/**
 * @file fault_injection_file_system.hpp
 * @brief A `file_system` over the real one that fails on demand: a disk that fills after N bytes,
 * a directory that cannot be created, a reported free space; and a disk that writes slowly.
 */
#pragma once

#include <spillway/core/error.hpp>
#include <spillway/spill/file_system.hpp>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <limits>
#include <memory>
#include <string>
#include <thread>

namespace spillway::testing {

class fault_injection_file_system final : public file_system {
 public:
  /** @brief Writes fail with ENOSPC once `bytes` bytes in all have been written. */
  void fail_writes_after(std::uint64_t bytes) { write_allowance_ = bytes; }
  /** @brief Lets writes succeed again. */
  void heal() { write_allowance_ = std::numeric_limits<std::uint64_t>::max(); }
  void fail_create_directories(bool fail) { fail_directories_ = fail; }
  /** @brief Every write takes at least `per_byte` per byte written (a slow disk). */
  void slow_writes(std::chrono::nanoseconds per_byte) { write_delay_ = per_byte.count(); }
  [[nodiscard]] std::uint64_t failed_writes() const { return failed_writes_; }

  std::unique_ptr<writable_file> open_writable(std::string const& path) override {
    return std::make_unique<file>(real_.open_writable(path), *this);
  }
  std::unique_ptr<readable_file> open_readable(std::string const& path) override {
    return real_.open_readable(path);
  }
  bool remove_file(std::string const& path) noexcept override { return real_.remove_file(path); }
  void create_directories(std::string const& path) override {
    if (fail_directories_) {
      throw io_error("cannot create directory '" + path + "': Permission denied");
    }
    real_.create_directories(path);
  }
  void remove_all(std::string const& path) noexcept override { real_.remove_all(path); }
  std::vector<std::string> list_directory(std::string const& path) override {
    return real_.list_directory(path);
  }
  std::uint64_t free_space(std::string const&) override {
    return std::numeric_limits<std::uint64_t>::max();
  }

 private:
  class file final : public writable_file {
   public:
    file(std::unique_ptr<writable_file> real, fault_injection_file_system& owner)
      : real_(std::move(real)), owner_(owner) {}
    void write_at(std::uint64_t offset, void const* data, std::size_t bytes) override {
      std::uint64_t allowance = owner_.write_allowance_.load();
      while (true) {
        if (allowance < bytes) {
          // Write what fits, as a real full disk does, then fail.
          if (allowance > 0) {
            real_->write_at(offset, data, allowance);
          }
          owner_.write_allowance_ = 0;
          ++owner_.failed_writes_;
          throw io_error("cannot write " + std::to_string(bytes) + " bytes to '" + path() +
                         "': No space left on device");
        }
        if (owner_.write_allowance_.compare_exchange_weak(allowance, allowance - bytes)) {
          break;
        }
      }
      real_->write_at(offset, data, bytes);
      if (auto const delay = owner_.write_delay_.load(); delay > 0) {
        std::this_thread::sleep_for(
          std::chrono::nanoseconds{delay * static_cast<std::int64_t>(bytes)});
      }
    }
    void sync() override { real_->sync(); }
    [[nodiscard]] std::string const& path() const noexcept override { return real_->path(); }

   private:
    std::unique_ptr<writable_file> real_;
    fault_injection_file_system& owner_;
  };

  posix_file_system real_;
  std::atomic<std::uint64_t> write_allowance_{std::numeric_limits<std::uint64_t>::max()};
  std::atomic<std::uint64_t> failed_writes_{0};
  std::atomic<bool> fail_directories_{false};
  std::atomic<std::int64_t> write_delay_{0};
};

}  // namespace spillway::testing
