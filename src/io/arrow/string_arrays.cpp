/**
 * @file string_arrays.cpp
 * @brief Arrow arrays of STRING and BINARY columns (see string_arrays.hpp).
 */
#include "io/arrow/string_arrays.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/null_mask.hpp>

#include <arrow/ipc/api.h>
#include <arrow/util/base64.h>

#include <cstring>
#include <limits>
#include <string>
#include <string_view>

namespace spillway::detail {

std::shared_ptr<arrow::Array> to_string_array(column_view const& view,
                                              bool masked,
                                              arrow::MemoryPool* pool,
                                              std::shared_ptr<arrow::DataType> type) {
  auto const rows = static_cast<int64_t>(view.size());
  auto offsets    = value_or_throw(
    arrow::AllocateBuffer(static_cast<int64_t>((view.size() + 1) * sizeof(std::int32_t)), pool),
    "narrowing the offsets of a string column");
  auto* narrow             = reinterpret_cast<std::int32_t*>(offsets->mutable_data());
  char const* chars        = NO_CHARS;
  std::int64_t first       = 0;
  std::int64_t const* wide = view.offsets();
  if (wide != nullptr) {
    wide += view.offset();
    first = wide[0];
    SPILLWAY_EXPECTS(wide[view.size()] - first <= MAX_STRING_ARRAY_CHARS,
                     "to_string_array: " + std::to_string(wide[view.size()] - first) +
                       " characters do not fit int32 offsets",
                     logic_error);
    if (view.chars() != nullptr) {
      chars = view.chars() + first;
    }
  }
  narrow[0] = 0;
  for (std::size_t row = 0; row < view.size(); ++row) {
    narrow[row + 1] = static_cast<std::int32_t>(wide[row + 1] - first);
  }
  auto const bytes = static_cast<std::size_t>(narrow[view.size()]);
  // The array starts at row 0 of its offsets, so the mask is copied to start at bit 0 too.
  std::shared_ptr<arrow::Buffer> mask;
  if (masked) {
    auto packed = value_or_throw(arrow::AllocateBitmap(rows, pool), "copying a string mask");
    copy_bits(packed->mutable_data(), 0, view.null_mask(), view.offset(), view.size());
    mask = std::move(packed);
  }
  return arrow::MakeArray(arrow::ArrayData::Make(
    std::move(type),
    rows,
    {std::move(mask), std::shared_ptr<arrow::Buffer>(std::move(offsets)), wrap(chars, bytes)},
    static_cast<int64_t>(view.null_count()),
    0));
}

std::shared_ptr<arrow::Array> to_view_array(column_view const& view,
                                            std::shared_ptr<arrow::Buffer> const& validity,
                                            std::shared_ptr<arrow::DataType> const& type,
                                            arrow::MemoryPool* pool) {
  using view_type             = arrow::BinaryViewType::c_type;
  std::size_t const first     = view.offset();
  std::size_t const end       = first + view.size();
  std::int64_t const* offsets = view.offsets() != nullptr ? view.offsets() : EMPTY_OFFSETS;
  char const* chars           = view.chars() != nullptr ? view.chars() : NO_CHARS;
  std::int64_t const base     = view.offsets() != nullptr ? offsets[first] : 0;
  std::int64_t const bytes    = view.offsets() != nullptr ? offsets[end] - base : 0;
  if (bytes > std::numeric_limits<std::int32_t>::max()) {
    return nullptr;
  }
  // One view per row of the storage from row 0, so that the array's offset is the column's and
  // its mask is shared as it is; the rows before `first` stay empty values.
  auto views =
    value_or_throw(arrow::AllocateBuffer(static_cast<std::int64_t>(end * sizeof(view_type)), pool),
                   "building the views of a " + type->ToString() + " array");
  auto* out = reinterpret_cast<view_type*>(views->mutable_data());
  std::memset(static_cast<void*>(out), 0, end * sizeof(view_type));
  for (std::size_t row = first; row < end && view.offsets() != nullptr; ++row) {
    if (view.is_null(row - first)) {
      continue;  // a null's view is all zeros: no bytes
    }
    auto const size    = static_cast<std::int32_t>(offsets[row + 1] - offsets[row]);
    char const* value  = chars + offsets[row];
    view_type& written = out[row];
    if (size <= arrow::BinaryViewType::kInlineSize) {
      written.inlined.size = size;
      std::memcpy(written.inlined.data.data(), value, static_cast<std::size_t>(size));
    } else {
      written.ref.size = size;
      std::memcpy(written.ref.prefix.data(),
                  value,
                  static_cast<std::size_t>(arrow::BinaryViewType::kPrefixSize));
      written.ref.buffer_index = 0;
      written.ref.offset       = static_cast<std::int32_t>(offsets[row] - base);
    }
  }
  return arrow::MakeArray(
    arrow::ArrayData::Make(type,
                           static_cast<std::int64_t>(view.size()),
                           {validity,
                            std::shared_ptr<arrow::Buffer>(std::move(views)),
                            wrap(chars + base, static_cast<std::size_t>(bytes))},
                           static_cast<std::int64_t>(view.null_count()),
                           static_cast<std::int64_t>(first)));
}

std::shared_ptr<arrow::Array> to_built_binary_array(column_view const& view,
                                                    arrow::MemoryPool* pool,
                                                    std::shared_ptr<arrow::DataType> const& type) {
  std::unique_ptr<arrow::ArrayBuilder> builder;
  check_arrow(arrow::MakeBuilder(pool, type, &builder),
              "making a " + type->ToString() + " builder");
  int32_t const width = type->id() == arrow::Type::FIXED_SIZE_BINARY
                          ? static_cast<arrow::FixedSizeBinaryType const&>(*type).byte_width()
                          : -1;
  check_arrow(builder->Reserve(static_cast<std::int64_t>(view.size())),
              "building a " + type->ToString() + " array");
  for (std::size_t row = 0; row < view.size(); ++row) {
    if (view.is_null(row)) {
      check_arrow(builder->AppendNull(), "building a " + type->ToString() + " array");
      continue;
    }
    // An empty value of a column without characters points nowhere; Arrow's builders copy it
    // with memcpy, which must not be given a null pointer even for no bytes.
    std::string_view value = view.string_at(row);
    if (value.data() == nullptr) {
      value = std::string_view{NO_CHARS, 0};
    }
    arrow::Status status;
    if (width >= 0) {
      SPILLWAY_EXPECTS(value.size() == static_cast<std::size_t>(width),
                       "a value of " + std::to_string(value.size()) +
                         " bytes cannot be written as " + type->ToString(),
                       invalid_argument);
      status = static_cast<arrow::FixedSizeBinaryBuilder&>(*builder).Append(value);
    } else {
      status = static_cast<arrow::BinaryViewBuilder&>(*builder).Append(value);
    }
    check_arrow(status, "building a " + type->ToString() + " array");
  }
  return value_or_throw(builder->Finish(), "building a " + type->ToString() + " array");
}

std::shared_ptr<arrow::Schema> with_large_strings(arrow::Schema const& schema, bool views_only) {
  bool changed = false;
  arrow::FieldVector fields;
  fields.reserve(static_cast<std::size_t>(schema.num_fields()));
  for (auto const& field : schema.fields()) {
    std::shared_ptr<arrow::DataType> large;
    switch (field->type()->id()) {
      case arrow::Type::STRING_VIEW:
        large = arrow::large_utf8();
        break;
      case arrow::Type::BINARY_VIEW:
        large = arrow::large_binary();
        break;
      case arrow::Type::STRING:
        large = views_only ? nullptr : arrow::large_utf8();
        break;
      case arrow::Type::BINARY:
        large = views_only ? nullptr : arrow::large_binary();
        break;
      case arrow::Type::DICTIONARY: {
        // Dictionaries of views too: Arrow's Parquet writer casts a dictionary to its values'
        // type, and has no cast from a dictionary of views to views.
        auto const& dictionary = static_cast<arrow::DictionaryType const&>(*field->type());
        auto const values      = dictionary.value_type()->id();
        if (values == arrow::Type::STRING_VIEW || values == arrow::Type::BINARY_VIEW) {
          large = arrow::dictionary(
            dictionary.index_type(),
            values == arrow::Type::STRING_VIEW ? arrow::large_utf8() : arrow::large_binary(),
            dictionary.ordered());
        }
        break;
      }
      default:
        break;
    }
    changed = changed || large != nullptr;
    fields.push_back(large != nullptr ? field->WithType(std::move(large)) : field);
  }
  return changed ? arrow::schema(std::move(fields), schema.metadata()) : nullptr;
}

std::string stored_arrow_schema(arrow::Schema const& schema) {
  auto const serialized =
    value_or_throw(arrow::ipc::SerializeSchema(schema), "serializing an Arrow schema");
  return arrow::util::base64_encode(
    std::string_view(reinterpret_cast<char const*>(serialized->data()),
                     static_cast<std::size_t>(serialized->size())));
}

}  // namespace spillway::detail
