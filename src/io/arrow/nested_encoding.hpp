/**
 * @file nested_encoding.hpp
 * @brief Nested Arrow values (list, large_list, list_view, large_list_view, fixed_size_list,
 * struct, map, and dictionaries of them), intervals, and dictionaries inside these, as bytes that
 * order as DuckDB orders the values, and back; and columns of Arrow's null type.
 *
 * Spillway's columns have no children. A nested column is read as a BINARY column whose row is
 * the encoding of the row's value, so that sorting, merging, hashing and comparing need nothing
 * new: comparing two encodings bytewise (unsigned, a prefix first) orders the values as DuckDB's
 * ORDER BY does, ascending, and equal values have equal bytes (floats aside: see below). Writers
 * decode the bytes into the exact Arrow type the file had (kept in `column_schema::nested`).
 *
 * A value's encoding is a marker byte, then its body:
 * - the markers: 0x01 a value, 0x02 a NaN (float or double), 0x03 null. A null element or field
 *   orders after every value, whatever the direction's nulls, as in DuckDB (descending reverses
 *   the whole comparison, nulls inside included, as DuckDB does); 0x00 ends a list.
 * - bool: one byte, 0 or 1; integers, dates, times, timestamps and durations: their integer
 *   big-endian, the sign bit flipped for the signed ones; float and double: the IEEE bits
 *   big-endian, all flipped for a negative number and the sign bit flipped for a positive one,
 *   every zero as +0.0 and every NaN as its marker alone (DuckDB ties -0.0 with 0.0 and NaN
 *   with NaN, and what follows them in a list or struct decides).
 * - string and binary (any offsets or views): the bytes with 0x00 written 0x01 0x01 and 0x01
 *   written 0x01 0x02, then 0x00, so that a prefix orders first; fixed_size_binary: its bytes.
 * - list, large_list, list_view, large_list_view (the elements it views, in order) and map (a
 *   list of key-value structs): each element's encoding, then 0x00; fixed_size_list: its
 *   elements' encodings; struct: its fields' encodings, in order.
 * - a dictionary: its value's encoding (never its index), null where the index or the value it
 *   points to is null. Decoded, the values are dictionary-encoded again (indices of the type's
 *   width, the dictionary of the values in the order they came).
 * - intervals, as DuckDB orders them: by their length in microseconds, a month being 30 days
 *   and nanoseconds cut toward zero (so a month ties with 30 days). month_interval: its months
 *   as an int32; day_time_interval: the length in milliseconds, 8 bytes; month_day_nano_interval:
 *   the length in microseconds, 10 bytes; both big-endian with the sign bit flipped, and the
 *   fields themselves kept as exact bits (below).
 * - the null type: always null.
 * The row itself is a body without a marker (a null row is the column's null). For a type with
 * floats or day_time or month_day_nano intervals, the body is followed by the exact bits of its
 * zeros and NaNs (8 bytes each) and of its intervals (day_time: days and milliseconds, 8 bytes;
 * month_day_nano: months and days, 8 bytes, then nanoseconds, 8 bytes), in the order of the
 * values, and their count in 4 bytes: they break ties only, and the value comes back bit for
 * bit. (So -0.0 and 0.0 in a list are tied in order but not equal bytes: they hash apart; a
 * month and 30 days likewise.)
 */
#pragma once

#include <spillway/core/stream_view.hpp>
#include <spillway/io/schema.hpp>
#include <spillway/memory/resource_ref.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/column_view.hpp>

#include <arrow/api.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace spillway::detail {

/**
 * @return whether spillway holds a column of Arrow `type` encoded: list, large_list, list_view,
 * large_list_view, fixed_size_list, struct, map, an interval, a dictionary of one of these (as
 * BINARY) or null (as INT8 nulls)
 */
bool is_nested_type(arrow::DataType const& type) noexcept;

/**
 * @return the text of the first type inside the nested `type` that has no encoding (a union, a
 * run-end encoded array, an extension type, ...), or "" when every part of it has one
 */
std::string unencodable_part(arrow::DataType const& type);

/** @return how a file holds a column of the nested (or null) `type` */
nested_storage make_nested_storage(std::shared_ptr<arrow::DataType> const& type);

/** @return the Arrow type that `storage` holds */
std::shared_ptr<arrow::DataType> arrow_type_of(nested_storage const& storage);

/**
 * @return whether every column of `lhs` agrees with the column of `rhs` at its index on being
 * nested and, if so, on its encoding's layout (the schemas have as many columns)
 */
bool same_nested_layouts(table_schema const& lhs, table_schema const& rhs) noexcept;

/**
 * @return the encodings of the rows of `array` (of any type with an encoding), as a column's rows
 * are (body and exact bits), nullopt where a row holds no value
 */
std::vector<std::optional<std::string>> encode_rows(arrow::Array const& array);

/**
 * @brief The dictionaries a writer has given the dictionaries inside one nested column so far,
 * in the order they come in its type (depth first, a dictionary before those in its values).
 * Each only grows: a batch's dictionary extends the one before (as `arrow_dictionaries`).
 */
struct nested_dictionaries {
  /// One dictionary so far.
  struct values_so_far {
    std::unordered_map<std::string, std::uint64_t> index;  ///< a value's encoding to its index
    std::shared_ptr<arrow::Array> values;                  ///< the dictionary
    std::uint64_t reserved = 0;  ///< the indices before the values' (a null that `never_empty` put)
  };
  std::vector<values_so_far> dictionaries;  ///< in the type's order
  /// A dictionary that a batch leaves empty holds one null instead (its indices then count
  /// from 1): an Arrow IPC file takes no dictionary after an empty one (see arrow_dictionaries).
  bool never_empty = false;
};

/**
 * @return `chunks` (arrays of one nested type, in order) as one column from `resource`: BINARY
 * of the rows' encodings, null where a row is null; for the null type, INT8 and all null
 */
std::unique_ptr<column> encode_nested_chunks(
  std::vector<std::shared_ptr<arrow::Array>> const& chunks,
  stream_view stream,
  resource_ref resource);

/**
 * @return the Arrow array of the nested (or null) `type` whose rows `view` holds encoded (for
 * the null type, any column of nulls), in memory from `pool`; the dictionaries inside it extend
 * those of `dictionaries` (fresh ones when null), which they become
 * @throws spillway::corruption_error when a row is not an encoding of a value of `type`;
 * spillway::not_supported when a dictionary's values outnumber what its index type addresses
 */
std::shared_ptr<arrow::Array> decode_nested(column_view const& view,
                                            std::shared_ptr<arrow::DataType> const& type,
                                            arrow::MemoryPool* pool,
                                            nested_dictionaries* dictionaries = nullptr);

/** @return about the bytes the nested `chunk` takes encoded (values, offsets, mask) */
std::size_t nested_spillway_size(arrow::Array const& chunk);

}  // namespace spillway::detail
