#include "parquet_footer.hpp"

#include <spillway/core/error.hpp>

#include <cstddef>
#include <string>

namespace spillway::detail {
namespace {

/// Thrift compact protocol type codes.
enum compact_type : std::uint8_t {
  STOP          = 0,
  BOOLEAN_TRUE  = 1,
  BOOLEAN_FALSE = 2,
  BYTE          = 3,
  I16           = 4,
  I32           = 5,
  I64           = 6,
  DOUBLE        = 7,
  BINARY        = 8,
  LIST          = 9,
  SET           = 10,
  MAP           = 11,
  STRUCT        = 12,
};

/// The structs of parquet.thrift whose fields are rewritten; every other struct is copied.
enum class node : std::uint8_t {
  FILE_META_DATA,
  ROW_GROUP,
  COLUMN_CHUNK,
  COLUMN_META_DATA,
  OFFSET_INDEX,
  PAGE_LOCATION,
  OTHER,
};

[[nodiscard]] bool is_offset(node parent, std::int16_t field) noexcept {
  switch (parent) {
    case node::ROW_GROUP:
      return field == 5;  // file_offset
    case node::COLUMN_CHUNK:
      return field == 2 || field == 4 || field == 6;  // file_offset, offset/column index
    case node::COLUMN_META_DATA:
      // data_page_offset, index_page_offset, dictionary_page_offset, bloom_filter_offset
      return field == 9 || field == 10 || field == 11 || field == 14;
    case node::PAGE_LOCATION:
      return field == 1;  // offset
    default:
      return false;
  }
}

/// The struct a field of struct type (or the elements of a list of structs) holds.
[[nodiscard]] node child_of(node parent, std::int16_t field) noexcept {
  if (parent == node::FILE_META_DATA && field == 4) {
    return node::ROW_GROUP;  // row_groups
  }
  if (parent == node::ROW_GROUP && field == 1) {
    return node::COLUMN_CHUNK;  // columns
  }
  if (parent == node::COLUMN_CHUNK && field == 3) {
    return node::COLUMN_META_DATA;  // meta_data
  }
  if (parent == node::OFFSET_INDEX && field == 1) {
    return node::PAGE_LOCATION;  // page_locations
  }
  return node::OTHER;
}

[[nodiscard]] std::uint64_t zigzag(std::int64_t value) noexcept {
  return (static_cast<std::uint64_t>(value) << 1U) ^ static_cast<std::uint64_t>(value >> 63);
}

[[nodiscard]] std::int64_t unzigzag(std::uint64_t value) noexcept {
  return static_cast<std::int64_t>(value >> 1U) ^ -static_cast<std::int64_t>(value & 1U);
}

/// Nesting deeper than this is not a Parquet footer (it has five levels).
constexpr int MAX_DEPTH = 64;

class rebaser {
 public:
  rebaser(std::span<std::uint8_t const> in,
          std::int64_t delta,
          std::int16_t first_ordinal,
          std::span<page_index_location const> indexes)
    : in_(in), delta_(delta), next_ordinal_(first_ordinal), indexes_(indexes) {
    out_.reserve(in.size() + 64);
  }

  std::vector<std::uint8_t> run(node root) {
    read_struct(root, 0);
    if (at_ != in_.size()) {
      fail("it has bytes after its end");
    }
    return std::move(out_);
  }

 private:
  [[noreturn]] void fail(std::string const& why) const {
    throw corruption_error("Parquet footer (" + std::to_string(in_.size()) + " bytes): " + why +
                           " at byte " + std::to_string(at_));
  }

  std::uint8_t byte() {
    if (at_ >= in_.size()) {
      fail("it ends inside a value");
    }
    return in_[at_++];
  }

  std::uint64_t varint() {
    std::uint64_t value = 0;
    for (unsigned shift = 0;; shift += 7) {
      if (shift > 63) {
        fail("a varint is longer than 10 bytes");
      }
      std::uint8_t const next = byte();
      value |= static_cast<std::uint64_t>(next & 0x7FU) << shift;
      if ((next & 0x80U) == 0) {
        return value;
      }
    }
  }

  void put_varint(std::uint64_t value) {
    while (value >= 0x80U) {
      out_.push_back(static_cast<std::uint8_t>(value | 0x80U));
      value >>= 7U;
    }
    out_.push_back(static_cast<std::uint8_t>(value));
  }

  /// Copies the input bytes from `start` to the current position.
  void copy_from(std::size_t start) {
    out_.insert(out_.end(),
                in_.begin() + static_cast<std::ptrdiff_t>(start),
                in_.begin() + static_cast<std::ptrdiff_t>(at_));
  }

  void skip(std::size_t bytes) {
    if (bytes > in_.size() - at_) {
      fail("a value runs past its end");
    }
    at_ += bytes;
  }

  void read_struct(node kind, int depth) {
    if (depth > MAX_DEPTH) {
      fail("it nests deeper than " + std::to_string(MAX_DEPTH) + " levels");
    }
    std::int16_t last = 0;
    while (true) {
      std::size_t const start  = at_;
      std::uint8_t const first = byte();
      if (first == STOP) {
        copy_from(start);
        return;
      }
      auto const type       = static_cast<std::uint8_t>(first & 0x0FU);
      auto const id_delta   = static_cast<std::uint8_t>(first >> 4U);
      std::int16_t const id = id_delta != 0 ? static_cast<std::int16_t>(last + id_delta)
                                            : static_cast<std::int16_t>(unzigzag(varint()));
      last                  = id;
      copy_from(start);  // the field header as it is
      field(type, kind, id, depth);
    }
  }

  void field(std::uint8_t type, node parent, std::int16_t id, int depth) {
    if (parent == node::COLUMN_CHUNK && id >= 4 && id <= 7 && row_group_ == 0 &&
        chunk_ < indexes_.size()) {
      // offset_index_offset and _length, column_index_offset and _length
      auto const& location    = indexes_[chunk_];
      bool const offset_index = id <= 5;
      std::int64_t const at =
        offset_index ? location.offset_index_offset : location.column_index_offset;
      if (at >= 0) {
        bool const is_length = id == 5 || id == 7;
        if (type != (is_length ? I32 : I64)) {
          fail("page index field " + std::to_string(id) + " has type " + std::to_string(type));
        }
        (void)varint();
        put_varint(zigzag(!is_length     ? at
                          : offset_index ? location.offset_index_length
                                         : location.column_index_length));
        return;
      }
    }
    if (is_offset(parent, id)) {
      if (type != I64) {
        fail("offset field " + std::to_string(id) + " is not an i64");
      }
      std::int64_t value = unzigzag(varint());
      if (value > 0) {
        value += delta_;
      }
      put_varint(zigzag(value));
      return;
    }
    if (parent == node::ROW_GROUP && id == 7) {  // ordinal
      if (type != I16) {
        fail("the row group ordinal is not an i16");
      }
      (void)varint();
      put_varint(zigzag(ordinal_));
      return;
    }
    value(type, child_of(parent, id), depth);
  }

  /// A value of `type`; a struct is read as `kind`, and so are the elements of a list.
  void value(std::uint8_t type, node kind, int depth) {
    std::size_t const start = at_;
    switch (type) {
      case BOOLEAN_TRUE:
      case BOOLEAN_FALSE:
        return;  // in the field header
      case BYTE:
        skip(1);
        break;
      case I16:
      case I32:
      case I64:
        (void)varint();
        break;
      case DOUBLE:
        skip(8);
        break;
      case BINARY:
        skip(static_cast<std::size_t>(varint()));
        break;
      case LIST:
      case SET: {
        std::uint8_t const header = byte();
        std::uint64_t size        = header >> 4U;
        if (size == 15) {
          size = varint();
        }
        auto const element = static_cast<std::uint8_t>(header & 0x0FU);
        copy_from(start);
        for (std::uint64_t index = 0; index < size; ++index) {
          if (element != STRUCT) {
            element_of(element, depth);
            continue;
          }
          if (kind == node::ROW_GROUP) {
            ordinal_ = next_ordinal_++;
            ++row_group_;
            chunk_ = static_cast<std::size_t>(-1);
          } else if (kind == node::COLUMN_CHUNK) {
            ++chunk_;
          }
          read_struct(kind, depth + 1);
        }
        return;
      }
      case MAP: {
        std::uint64_t const size = varint();
        std::uint8_t types       = 0;
        if (size > 0) {
          types = byte();
        }
        copy_from(start);
        for (std::uint64_t index = 0; index < size; ++index) {
          element_of(static_cast<std::uint8_t>(types >> 4U), depth);
          element_of(static_cast<std::uint8_t>(types & 0x0FU), depth);
        }
        return;
      }
      case STRUCT:
        read_struct(kind, depth + 1);
        return;
      default:
        fail("unknown compact type " + std::to_string(type));
    }
    copy_from(start);
  }

  /// An element of a list, set or map (of no struct the rewrite looks into).
  void element_of(std::uint8_t type, int depth) {
    if (type == BOOLEAN_TRUE || type == BOOLEAN_FALSE) {
      std::size_t const at = at_;
      skip(1);  // one byte each in a container
      copy_from(at);
      return;
    }
    value(type, node::OTHER, depth + 1);
  }

  std::span<std::uint8_t const> in_;
  std::int64_t delta_;
  std::int16_t next_ordinal_;
  std::span<page_index_location const> indexes_;
  std::int16_t ordinal_ = 0;  ///< of the row group being read
  /// The row group (from 0) and its column chunk being read.
  std::size_t row_group_ = static_cast<std::size_t>(-1);
  std::size_t chunk_     = static_cast<std::size_t>(-1);
  std::size_t at_        = 0;
  std::vector<std::uint8_t> out_;
};

}  // namespace

std::vector<std::uint8_t> rebase_parquet_footer(std::span<std::uint8_t const> footer,
                                                std::int64_t delta,
                                                std::int16_t first_ordinal,
                                                std::span<page_index_location const> indexes) {
  return rebaser{footer, delta, first_ordinal, indexes}.run(node::FILE_META_DATA);
}

std::vector<std::uint8_t> rebase_offset_index(std::span<std::uint8_t const> offset_index,
                                              std::int64_t delta) {
  return rebaser{offset_index, delta, 0, {}}.run(node::OFFSET_INDEX);
}

}  // namespace spillway::detail
