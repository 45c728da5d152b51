/**
 * @file spillable_table.hpp
 * @brief The move-only handle to a table in the spill store, and the pinned view `acquire` gives.
 */
#pragma once

#include <spillway/spill/spill_tier.hpp>
#include <spillway/table/table.hpp>
#include <spillway/table/table_view.hpp>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>

namespace spillway {

namespace detail {
class spill_store_impl;
}

/**
 * @brief A table pinned on the device: it cannot spill while this view lives.
 * @note Move-only; must not outlive the store. Not thread-safe (one owner).
 */
class pinned_table {
 public:
  pinned_table(pinned_table&& other) noexcept;
  pinned_table& operator=(pinned_table&& other) noexcept;
  pinned_table(pinned_table const&)            = delete;
  pinned_table& operator=(pinned_table const&) = delete;
  /** @brief Unpins. */
  ~pinned_table();

  /** @return the table, in device memory */
  [[nodiscard]] table_view const& view() const noexcept { return view_; }
  operator table_view const&() const noexcept { return view_; }  // NOLINT
  /** @brief Unpins early; the view must not be used afterwards. */
  void reset() noexcept;

 private:
  friend class spillable_table;
  pinned_table(detail::spill_store_impl* store, std::uint64_t id, table_view view) noexcept
    : store_(store), id_(id), view_(std::move(view)) {}

  detail::spill_store_impl* store_ = nullptr;
  std::uint64_t id_                = 0;
  table_view view_;
};

/**
 * @brief Owns a table registered in the spill store, wherever its bytes are.
 *
 * Destroying (or `release()`-ing) the handle frees the data on whatever tier it is; a disk file
 * whose last block goes is removed at once. Models `retryable_input` (split_policy.hpp):
 * `make_spillable()` drops the pin `materialize()` took, `split_at(row)` packs both halves to the
 * host tier (no device memory needed, within the host budget) and releases this handle's data.
 * @note Move-only; must not outlive its store. The const members (`acquire`, `tier`, `id`,
 * `valid`, `rows`) may be called on one handle from several threads at once (the store serializes
 * an entry's moves: an `acquire` waits for another one's unspill); the others, one thread at a
 * time. Different handles of one store may be used concurrently.
 */
class spillable_table {
 public:
  /** @brief An empty handle. */
  spillable_table() noexcept = default;
  spillable_table(spillable_table&& other) noexcept;
  spillable_table& operator=(spillable_table&& other) noexcept;
  spillable_table(spillable_table const&)            = delete;
  spillable_table& operator=(spillable_table const&) = delete;
  ~spillable_table();

  /**
   * @brief Brings the table to the device (from host or disk, allocating through the device
   * resource, which may spill other buffers) and pins it while the result lives.
   * @throws spillway::out_of_memory when the device cannot hold it
   * @throws spillway::io_error or corruption_error naming the buffer and file when its spill
   * block is missing, truncated or fails its checksum (the data is then unrecoverable)
   */
  [[nodiscard]] pinned_table acquire() const;
  /** @return where the bytes are now */
  [[nodiscard]] spill_tier tier() const;
  /** @return the store's id of this table */
  [[nodiscard]] std::uint64_t id() const noexcept { return id_; }
  /** @return true unless empty, moved from or released */
  [[nodiscard]] bool valid() const noexcept { return store_ != nullptr; }
  /** @brief Frees the data on every tier; the handle becomes empty. */
  void release() noexcept;
  /**
   * @brief Hands the table back without a copy when it is on the device as the table it was
   * registered as (not packed by an unspill, not pinned, not being spilled): the store forgets
   * it and the handle becomes empty. Otherwise nothing changes and null comes back; `acquire()`
   * then gives the rows (and a copy of them owns them).
   * @return the table, whose memory stays allocated from the device resource it came from and
   * no longer counts as the store's; or null
   * @throws spillway::logic_error on an empty handle
   * @note One thread per handle, and no `acquire` of it meanwhile.
   */
  [[nodiscard]] std::unique_ptr<table> take_if_resident();

  /** @return the number of rows (retryable_input) */
  [[nodiscard]] std::size_t rows() const noexcept { return rows_; }
  /** @brief Drops the pin taken by `materialize()` (retryable_input). */
  void make_spillable() noexcept;
  /** @brief Acquires and keeps the pin until `make_spillable()` (retryable_input). */
  table_view const& materialize();
  /**
   * @brief Rows [0, row) and [row, rows()) as two new handles on the host tier, same priority
   * and owner; this handle is released. A half the host budget cannot hold is packed on the
   * device instead (and spills from there).
   * @throws spillway::invalid_argument unless 0 < row < rows()
   */
  [[nodiscard]] std::pair<spillable_table, spillable_table> split_at(std::size_t row);

 private:
  friend class detail::spill_store_impl;
  spillable_table(detail::spill_store_impl* store, std::uint64_t id, std::size_t rows) noexcept
    : store_(store), id_(id), rows_(rows) {}

  detail::spill_store_impl* store_ = nullptr;
  std::uint64_t id_                = 0;
  std::size_t rows_                = 0;
  std::optional<pinned_table> materialized_;
};

}  // namespace spillway
