/**
 * @file nested_restoring.cpp
 * @brief Dictionaries and list views made again from the values and lists the decoder of nested
 * values builds (see nested_restoring.hpp).
 */
#include "io/arrow/nested_codec.hpp"
#include "io/arrow/nested_restoring.hpp"
#include "io/arrow/type_conversion.hpp"

#include <spillway/core/error.hpp>

#include <arrow/array/concatenate.h>
#include <arrow/util/bit_util.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <vector>

namespace spillway::detail {
namespace {

std::shared_ptr<arrow::Field> plain_field(arrow::Field const& field) {
  return field.WithType(plain_type(field.type()));
}

/// The index of the next dictionary of a type, depth first.
struct dictionary_position {
  std::size_t next = 0;
};

std::shared_ptr<arrow::Array> restore(std::shared_ptr<arrow::Array> const& plain,
                                      std::shared_ptr<arrow::DataType> const& type,
                                      nested_dictionaries& dictionaries,
                                      dictionary_position& position,
                                      arrow::MemoryPool* pool);

/**
 * @return `values` (of the dictionary `type`'s values) encoded as `type` by value: each value
 * the index of its first occurrence in `so_far`'s dictionary, which grows by the values new to it
 * (and, with `never_empty`, is one null rather than empty; see `nested_dictionaries`)
 */
std::shared_ptr<arrow::Array> encode_dictionary(std::shared_ptr<arrow::Array> const& values,
                                                std::shared_ptr<arrow::DataType> const& type,
                                                nested_dictionaries::values_so_far& so_far,
                                                bool never_empty,
                                                arrow::MemoryPool* pool) {
  auto const& dictionary  = static_cast<arrow::DictionaryType const&>(*type);
  std::string const what  = "dictionary-encoding values as " + type->ToString();
  auto const index_bytes  = static_cast<std::size_t>(dictionary.index_type()->byte_width());
  bool const index_signed = arrow::is_signed_integer(dictionary.index_type()->id());
  std::uint64_t const most =
    index_bytes >= 8 ? (index_signed ? static_cast<std::uint64_t>(INT64_MAX) : UINT64_MAX)
                     : (std::uint64_t{1} << (8 * index_bytes - (index_signed ? 1 : 0))) - 1;
  auto const rows = values->length();
  auto indices    = value_or_throw(
    arrow::AllocateBuffer(rows * static_cast<std::int64_t>(index_bytes), pool), what);
  std::shared_ptr<arrow::Buffer> mask;
  std::int64_t nulls = 0;
  std::vector<std::int64_t> fresh;  // rows whose values are new to the dictionary
  auto const keys = encode_rows(*values);
  for (std::int64_t row = 0; row < rows; ++row) {
    std::uint64_t index = 0;
    auto const& key     = keys[static_cast<std::size_t>(row)];
    if (key) {
      auto const [found, inserted] =
        so_far.index.try_emplace(*key, so_far.reserved + so_far.index.size());
      if (inserted) {
        SPILLWAY_EXPECTS(found->second <= most,
                         "a dictionary of " + dictionary.value_type()->ToString() +
                           " has more distinct values than its " +
                           dictionary.index_type()->ToString() + " indices address (" +
                           std::to_string(most + 1) + ")",
                         not_supported);
        fresh.push_back(row);
      }
      index = found->second;
    } else {
      if (!mask) {
        auto packed = value_or_throw(arrow::AllocateBitmap(rows, pool), what);
        std::memset(packed->mutable_data(), 0xFF, static_cast<std::size_t>(packed->size()));
        mask = std::move(packed);
      }
      arrow::bit_util::ClearBit(mask->mutable_data(), row);
      ++nulls;
    }
    std::memcpy(indices->mutable_data() + static_cast<std::size_t>(row) * index_bytes,
                &index,
                index_bytes);  // the low bytes: little-endian, as spillway is
  }
  if (!fresh.empty() || !so_far.values) {
    // The dictionary so far, then the new values, in runs of consecutive rows.
    arrow::ArrayVector pieces;
    if (so_far.values) {
      pieces.push_back(so_far.values);
    }
    for (std::size_t at = 0; at < fresh.size();) {
      std::size_t end = at + 1;
      while (end < fresh.size() && fresh[end] == fresh[end - 1] + 1) {
        ++end;
      }
      pieces.push_back(values->Slice(fresh[at], static_cast<std::int64_t>(end - at)));
      at = end;
    }
    so_far.values = pieces.empty()
                      ? value_or_throw(arrow::MakeEmptyArray(dictionary.value_type(), pool), what)
                      : value_or_throw(arrow::Concatenate(pieces, pool), what);
  }
  if (never_empty && so_far.values->length() == 0) {
    so_far.values = value_or_throw(arrow::MakeArrayOfNull(dictionary.value_type(), 1, pool), what);
    so_far.reserved = 1;
  }
  auto index_array = arrow::MakeArray(
    arrow::ArrayData::Make(dictionary.index_type(),
                           rows,
                           {std::move(mask), std::shared_ptr<arrow::Buffer>(std::move(indices))},
                           nulls,
                           0));
  return std::make_shared<arrow::DictionaryArray>(type, index_array, so_far.values);
}

/// `plain` (lists of int32 or int64 offsets) as the list views of `type` over the same elements.
template <typename OffsetType>
std::shared_ptr<arrow::ArrayData> view_lists(arrow::ArrayData const& plain,
                                             std::shared_ptr<arrow::DataType> const& type,
                                             std::shared_ptr<arrow::ArrayData> values,
                                             arrow::MemoryPool* pool) {
  auto const count = plain.offset + plain.length;  // the offsets cover the data's offset too
  auto sizes       = value_or_throw(
    arrow::AllocateBuffer(count * static_cast<std::int64_t>(sizeof(OffsetType)), pool),
    "viewing lists as " + type->ToString());
  auto const* offsets =
    plain.buffers[1] != nullptr ? plain.buffers[1]->data_as<OffsetType>() : nullptr;
  auto* size_values = sizes->mutable_data_as<OffsetType>();
  for (std::int64_t list = 0; list < count; ++list) {
    size_values[list] = offsets != nullptr ? offsets[list + 1] - offsets[list] : 0;
  }
  std::shared_ptr<arrow::Buffer> offset_buffer = plain.buffers[1];
  if (offset_buffer == nullptr) {
    offset_buffer = value_or_throw(arrow::AllocateBuffer(0, pool), "viewing lists");
  }
  return arrow::ArrayData::Make(type,
                                plain.length,
                                {plain.buffers[0], offset_buffer, std::move(sizes)},
                                {std::move(values)},
                                plain.null_count,
                                plain.offset);
}

std::shared_ptr<arrow::Array> restore(std::shared_ptr<arrow::Array> const& plain,
                                      std::shared_ptr<arrow::DataType> const& type,
                                      nested_dictionaries& dictionaries,
                                      dictionary_position& position,
                                      arrow::MemoryPool* pool) {
  if (!needs_restoring(*type)) {
    if (plain->type()->Equals(*type, /*check_metadata=*/true)) {
      return plain;
    }
    auto data  = plain->data()->Copy();
    data->type = type;
    return arrow::MakeArray(data);
  }
  auto const id = type->id();
  if (id == arrow::Type::DICTIONARY) {
    std::size_t const at = position.next++;
    if (dictionaries.dictionaries.size() <= at) {
      dictionaries.dictionaries.resize(at + 1);
    }
    auto const values = restore(plain,
                                static_cast<arrow::DictionaryType const&>(*type).value_type(),
                                dictionaries,
                                position,
                                pool);
    return encode_dictionary(
      values, type, dictionaries.dictionaries[at], dictionaries.never_empty, pool);
  }
  auto const& data = *plain->data();
  std::vector<std::shared_ptr<arrow::ArrayData>> children;
  for (std::size_t k = 0; k < data.child_data.size(); ++k) {
    children.push_back(restore(arrow::MakeArray(data.child_data[k]),
                               type->field(static_cast<int>(k))->type(),
                               dictionaries,
                               position,
                               pool)
                         ->data());
  }
  if (id == arrow::Type::LIST_VIEW) {
    return arrow::MakeArray(view_lists<std::int32_t>(data, type, children.at(0), pool));
  }
  if (id == arrow::Type::LARGE_LIST_VIEW) {
    return arrow::MakeArray(view_lists<std::int64_t>(data, type, children.at(0), pool));
  }
  auto restored        = data.Copy();
  restored->type       = type;
  restored->child_data = std::move(children);
  return arrow::MakeArray(restored);
}

}  // namespace

bool needs_restoring(arrow::DataType const& type) {
  if (type.id() == arrow::Type::DICTIONARY || nested_codec::is_list_view_type(type.id())) {
    return true;
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [](auto const& field) {
    return needs_restoring(*field->type());
  });
}

std::shared_ptr<arrow::DataType> plain_type(std::shared_ptr<arrow::DataType> const& type) {
  if (!needs_restoring(*type)) {
    return type;
  }
  switch (type->id()) {
    case arrow::Type::DICTIONARY:
      return plain_type(static_cast<arrow::DictionaryType const&>(*type).value_type());
    case arrow::Type::LIST:
    case arrow::Type::LIST_VIEW:
      return arrow::list(plain_field(*type->field(0)));
    case arrow::Type::LARGE_LIST:
    case arrow::Type::LARGE_LIST_VIEW:
      return arrow::large_list(plain_field(*type->field(0)));
    case arrow::Type::FIXED_SIZE_LIST:
      return arrow::fixed_size_list(
        plain_field(*type->field(0)),
        static_cast<arrow::FixedSizeListType const&>(*type).list_size());
    case arrow::Type::MAP:
      return value_or_throw(
        arrow::MapType::Make(plain_field(*type->field(0)),
                             static_cast<arrow::MapType const&>(*type).keys_sorted()),
        "the values of " + type->ToString());
    case arrow::Type::STRUCT: {
      arrow::FieldVector fields;
      for (auto const& field : type->fields()) {
        fields.push_back(plain_field(*field));
      }
      return arrow::struct_(std::move(fields));
    }
    default:
      break;
  }
  SPILLWAY_FAIL("plain_type: " + type->ToString() + " has no values to build", logic_error);
}

std::shared_ptr<arrow::Array> restore_type(std::shared_ptr<arrow::Array> const& plain,
                                           std::shared_ptr<arrow::DataType> const& type,
                                           nested_dictionaries& dictionaries,
                                           arrow::MemoryPool* pool) {
  dictionary_position position;
  return restore(plain, type, dictionaries, position, pool);
}

}  // namespace spillway::detail
