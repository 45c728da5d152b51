/**
 * @file spillable_buffer.hpp
 * @brief The move-only handle to an untyped buffer in the spill store, and its pinned view.
 */
#pragma once

#include <spillway/spill/spill_tier.hpp>

#include <cstddef>
#include <cstdint>

namespace spillway {

namespace detail {
class spill_store_impl;
}

/**
 * @brief Bytes pinned on the device: they cannot spill while this view lives.
 * @note Move-only; must not outlive the store.
 */
class pinned_buffer {
 public:
  pinned_buffer(pinned_buffer&& other) noexcept;
  pinned_buffer& operator=(pinned_buffer&& other) noexcept;
  pinned_buffer(pinned_buffer const&)            = delete;
  pinned_buffer& operator=(pinned_buffer const&) = delete;
  /** @brief Unpins. */
  ~pinned_buffer();

  /** @return the bytes, in device memory */
  [[nodiscard]] void const* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  /** @brief Unpins early. */
  void reset() noexcept;

 private:
  friend class spillable_buffer;
  pinned_buffer(detail::spill_store_impl* store,
                std::uint64_t id,
                void const* data,
                std::size_t size) noexcept
    : store_(store), id_(id), data_(data), size_(size) {}

  detail::spill_store_impl* store_ = nullptr;
  std::uint64_t id_                = 0;
  void const* data_                = nullptr;
  std::size_t size_                = 0;
};

/**
 * @brief Owns a buffer registered in the spill store, wherever its bytes are.
 * @note Move-only; must not outlive its store. Releasing frees the data on every tier.
 */
class spillable_buffer {
 public:
  spillable_buffer() noexcept = default;
  spillable_buffer(spillable_buffer&& other) noexcept;
  spillable_buffer& operator=(spillable_buffer&& other) noexcept;
  spillable_buffer(spillable_buffer const&)            = delete;
  spillable_buffer& operator=(spillable_buffer const&) = delete;
  ~spillable_buffer();

  /**
   * @brief Brings the bytes to the device and pins them while the result lives.
   * @throws as spillable_table::acquire
   */
  [[nodiscard]] pinned_buffer acquire() const;
  [[nodiscard]] spill_tier tier() const;
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool valid() const noexcept { return store_ != nullptr; }
  /** @brief Frees the data on every tier; the handle becomes empty. */
  void release() noexcept;
  /**
   * @brief Hands the bytes back without a copy when they are on the device, not pinned and not
   * being spilled: the store forgets them and the handle becomes empty. Otherwise nothing
   * changes and an empty buffer comes back; `acquire()` then gives the bytes.
   * @return the bytes (`size()` of them), whose memory stays allocated from the device resource
   * it came from and no longer counts as the store's; or an empty buffer
   * @throws spillway::logic_error on an empty handle
   * @note One thread per handle, and no `acquire` of it meanwhile.
   */
  [[nodiscard]] buffer take_if_resident();

 private:
  friend class detail::spill_store_impl;
  spillable_buffer(detail::spill_store_impl* store, std::uint64_t id, std::size_t size) noexcept
    : store_(store), id_(id), size_(size) {}

  detail::spill_store_impl* store_ = nullptr;
  std::uint64_t id_                = 0;
  std::size_t size_                = 0;
};

}  // namespace spillway
