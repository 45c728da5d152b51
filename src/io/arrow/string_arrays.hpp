/**
 * @file string_arrays.hpp
 * @brief Arrow arrays of spillway's STRING and BINARY columns (characters and 64-bit offsets):
 * string and binary arrays with 32-bit offsets, views built in bulk, and fixed-size binaries.
 */
#pragma once

#include <spillway/table/column_view.hpp>

#include <arrow/api.h>
#include <arrow/util/bit_util.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

namespace spillway::detail {

/** @brief Wraps memory that Arrow must not free. */
inline std::shared_ptr<arrow::Buffer> wrap(void const* data, std::size_t bytes) {
  return std::make_shared<arrow::Buffer>(static_cast<uint8_t const*>(data),
                                         static_cast<int64_t>(bytes));
}

/// The offsets of an empty STRING column that has no offsets buffer.
alignas(8) inline constexpr std::int64_t EMPTY_OFFSETS[1] = {0};
/// The characters of a STRING column without any (all null or empty): an allocation of no bytes
/// has no address, but Arrow requires a value buffer, of no bytes, with one.
alignas(8) inline constexpr char NO_CHARS[1] = {0};

/**
 * @return an Arrow string (utf8) array of `view`, or a binary one for `type` binary: its
 * characters shared, its offsets rebased to 0 and narrowed to int32, and its mask when `masked`,
 * copied into memory from `pool`
 */
std::shared_ptr<arrow::Array> to_string_array(column_view const& view,
                                              bool masked,
                                              arrow::MemoryPool* pool,
                                              std::shared_ptr<arrow::DataType> type);

/**
 * @return a string_view or binary_view array (`type`) of `view`: its views built in one pass
 * into memory from `pool` (values of up to 12 bytes inline), the longer ones pointing into the
 * column's characters, shared as the array's one data buffer; `validity` is the column's mask
 * (bit 0 at row 0 of its storage, as `view.offset()` counts), or null. Null when the characters
 * are more than a view's int32 offset reaches (build them with `to_built_binary_array`).
 */
std::shared_ptr<arrow::Array> to_view_array(column_view const& view,
                                            std::shared_ptr<arrow::Buffer> const& validity,
                                            std::shared_ptr<arrow::DataType> const& type,
                                            arrow::MemoryPool* pool);

/**
 * @return an array of `type` (fixed_size_binary, string_view or binary_view) built value by
 * value from `view` by Arrow's builder
 * @throws invalid_argument when a value's size is not a fixed_size_binary's width
 */
std::shared_ptr<arrow::Array> to_built_binary_array(column_view const& view,
                                                    arrow::MemoryPool* pool,
                                                    std::shared_ptr<arrow::DataType> const& type);

/**
 * @return `schema` with its top-level string, binary, string_view and binary_view fields (names,
 * nullability and metadata kept) made large_string and large_binary when `views_only` is false,
 * only the view fields when it is true; null when no field changes. Parquet stores all of them
 * alike (BYTE_ARRAY, with or without the STRING annotation); the type is what Arrow's Parquet
 * encoder is handed and its decoder builds, and large ones are spillway's own layout (characters
 * and 64-bit offsets): encoding takes the column's buffers as they are, and decoding builds no
 * views that are then copied out one by one.
 */
std::shared_ptr<arrow::Schema> with_large_strings(arrow::Schema const& schema, bool views_only);

/// The key under which Parquet files keep the Arrow schema they were written from.
inline constexpr char const* ARROW_SCHEMA_KEY = "ARROW:schema";

/**
 * @return the value Arrow's Parquet writer stores under ARROW_SCHEMA_KEY for `schema` (its IPC
 * serialization, base64-encoded), so that a file encoded from large strings reads back as
 * `schema` says
 */
std::string stored_arrow_schema(arrow::Schema const& schema);

/**
 * @brief Calls `visit(row, value)` for every row of a string_view or binary_view `chunk`, in
 * order, straight from its views (a null row's value is empty): the bulk path of reading views
 * (Parquet decodes strings into views when the file's Arrow schema says so).
 */
template <typename Visit>
void for_each_view_value(arrow::Array const& chunk, Visit&& visit) {
  auto const& data        = *chunk.data();
  auto const* views       = data.GetValues<arrow::BinaryViewType::c_type>(1);
  std::uint8_t const* set = data.buffers[0] != nullptr ? data.buffers[0]->data() : nullptr;
  for (std::int64_t row = 0; row < data.length; ++row) {
    if (set != nullptr &&
        !arrow::bit_util::GetBit(set, static_cast<std::uint64_t>(data.offset + row))) {
      visit(row, std::string_view{});
      continue;
    }
    auto const& view = views[row];
    auto const size  = static_cast<std::size_t>(view.size());
    std::uint8_t const* at =
      view.is_inline() ? view.inline_data()
                       : data.buffers[static_cast<std::size_t>(2 + view.ref.buffer_index)]->data() +
                           view.ref.offset;
    visit(row, std::string_view{reinterpret_cast<char const*>(at), size});
  }
}

}  // namespace spillway::detail
