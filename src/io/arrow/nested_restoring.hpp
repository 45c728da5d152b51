/**
 * @file nested_restoring.hpp
 * @brief The types the decoder of nested values builds where a type holds dictionaries or list
 * views (their values, lists), and the arrays of the exact types made again from them.
 */
#pragma once

#include "io/arrow/nested_encoding.hpp"

#include <arrow/api.h>

#include <memory>

namespace spillway::detail {

/** @return whether `type` holds a dictionary or a list view at some level */
bool needs_restoring(arrow::DataType const& type);

/**
 * @return `type` with each dictionary replaced by its values' type and each list_view and
 * large_list_view by the list and large_list of its field, at every level (names, nullability and
 * metadata of the fields kept)
 */
std::shared_ptr<arrow::DataType> plain_type(std::shared_ptr<arrow::DataType> const& type);

/**
 * @return `plain` (of `plain_type(type)`) as an array of `type`, in memory from `pool`: its
 * values dictionary-encoded by value where `type` has a dictionary (null where the value is;
 * the dictionaries extend those of `dictionaries`, which they become), its lists viewed where it
 * has a list view
 * @throws spillway::not_supported when a dictionary's values outnumber what its index type
 * addresses
 */
std::shared_ptr<arrow::Array> restore_type(std::shared_ptr<arrow::Array> const& plain,
                                           std::shared_ptr<arrow::DataType> const& type,
                                           nested_dictionaries& dictionaries,
                                           arrow::MemoryPool* pool);

}  // namespace spillway::detail
