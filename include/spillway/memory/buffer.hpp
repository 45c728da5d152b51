/**
 * @file buffer.hpp
 * @brief An owning, untyped, move-only allocation that knows its resource and memory kind.
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/memory/memory_kind.hpp>
#include <spillway/memory/resource_ref.hpp>

#include <cstddef>
#include <memory>

namespace spillway {

/**
 * @brief `bytes` bytes from a resource, freed to it at destruction; or a slice of such an
 * allocation, shared with other slices, freed with the last of them.
 * @note Move-only. The resource must outlive the buffer. Not thread-safe.
 */
class buffer {
 public:
  /** @brief An empty buffer: no memory, no resource. */
  buffer() noexcept = default;

  /**
   * @brief Allocates `bytes` from `resource` on `stream`.
   * @throws spillway::out_of_memory from the resource
   */
  buffer(std::size_t bytes, stream_view stream, resource_ref resource);

  /** @brief Allocates and copies `bytes` from `source`, which lives in `source_kind` memory. */
  buffer(void const* source,
         memory_kind source_kind,
         std::size_t bytes,
         stream_view stream,
         resource_ref resource);

  /**
   * @brief Views `bytes` bytes at `data`, inside the allocation `owner` holds, without copying:
   * several such slices may share one allocation (the columns of one packed table), which is
   * freed with the last of them. Of `owner`'s kind and resource; frees nothing itself.
   * @throws spillway::invalid_argument when `owner` is null or the bytes are not inside it
   */
  buffer(std::shared_ptr<buffer const> owner, void* data, std::size_t bytes);

  ~buffer();
  buffer(buffer&& other) noexcept;
  buffer& operator=(buffer&& other) noexcept;
  buffer(buffer const&)            = delete;
  buffer& operator=(buffer const&) = delete;

  [[nodiscard]] void* data() noexcept { return data_; }
  [[nodiscard]] void const* data() const noexcept { return data_; }
  [[nodiscard]] std::size_t size() const noexcept { return size_; }
  [[nodiscard]] bool empty() const noexcept { return size_ == 0; }
  [[nodiscard]] stream_view stream() const noexcept { return stream_; }
  /** @return whether this is a slice of a shared allocation (which outlives it while other
   * slices of it live) */
  [[nodiscard]] bool is_slice() const noexcept { return owner_ != nullptr; }
  /** @return the allocation this buffer's bytes are in: its shared one for a slice, else itself */
  [[nodiscard]] buffer const* allocation() const noexcept {
    return owner_ != nullptr ? owner_.get() : this;
  }
  /** @return the kind of memory; HOST for an empty buffer */
  [[nodiscard]] memory_kind kind() const noexcept { return kind_; }
  /** @return the resource (a slice's: its allocation's), or null for a default-constructed
   * buffer */
  [[nodiscard]] memory_resource* resource() const noexcept { return resource_; }

 private:
  void release_memory() noexcept;

  void* data_                = nullptr;
  std::size_t size_          = 0;
  stream_view stream_        = {};
  memory_resource* resource_ = nullptr;
  memory_kind kind_          = memory_kind::HOST;
  std::shared_ptr<buffer const> owner_;  ///< a slice's allocation; null for an allocation
};

}  // namespace spillway
