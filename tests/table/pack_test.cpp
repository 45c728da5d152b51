#include "testing/default_resource_guard.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/forwarding_resource.hpp"
#include "testing/table_generators.hpp"
#include "testing/worker_threads_guard.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/memory/statistics_resource_adaptor.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/gather.hpp>
#include <spillway/table/pack.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

using testing::all_types;
using testing::make_fixed_column;
using testing::make_string_column;
using testing::random_table;

// The packed metadata format, pinned here so that a change to it is a deliberate one.
constexpr std::size_t HEADER_BYTES      = 32;
constexpr std::size_t ENTRY_BYTES       = 48;
constexpr std::size_t MAGIC_AT          = 0;
constexpr std::size_t VERSION_AT        = 4;
constexpr std::size_t NUM_COLUMNS_AT    = 8;
constexpr std::size_t NUM_ROWS_AT       = 16;
constexpr std::size_t DATA_SIZE_AT      = 24;
constexpr std::size_t TYPE_AT           = 0;
constexpr std::size_t UNIT_AT           = 1;
constexpr std::size_t NULLABLE_AT       = 2;
constexpr std::size_t NULL_COUNT_AT     = 8;
constexpr std::size_t MASK_OFFSET_AT    = 16;
constexpr std::size_t OFFSETS_OFFSET_AT = 24;
constexpr std::size_t DATA_OFFSET_AT    = 32;
constexpr std::size_t DATA_BYTES_AT     = 40;
constexpr std::size_t PART_ALIGNMENT    = 64;

std::size_t entry_at(std::size_t column, std::size_t field) {
  return HEADER_BYTES + column * ENTRY_BYTES + field;
}

template <typename T>
T read_field(std::vector<std::uint8_t> const& metadata, std::size_t at) {
  T value{};
  std::memcpy(&value, metadata.data() + at, sizeof(T));
  return value;
}

template <typename T>
std::vector<std::uint8_t> with_field(std::vector<std::uint8_t> metadata, std::size_t at, T value) {
  std::memcpy(metadata.data() + at, &value, sizeof(T));
  return metadata;
}

std::uintptr_t address(void const* pointer) { return reinterpret_cast<std::uintptr_t>(pointer); }

/// Hands out memory filled with 0xA5, as reused memory may be: zero padding must be written.
class poisoning_resource final : public testing::forwarding_resource {
 public:
  using forwarding_resource::forwarding_resource;

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    void* const pointer = upstream().allocate(bytes, alignment, stream);
    if (bytes > 0) {
      std::memset(pointer, 0xA5, bytes);
    }
    return pointer;
  }
};

class Pack : public ::testing::Test {
 protected:
  /**
   * Packs `input` into `output` and checks everything a packed table promises: one allocation of
   * `packed_size` bytes from the output resource, a zero-copy unpack equal to the input with no
   * allocation, offset-0 columns with string offsets from 0, 64-byte aligned parts, zero padding,
   * and the same bytes when packed twice, into memory that held other bytes before.
   */
  void check_round_trip(table_view const& input, resource_ref output) {
    poisoning_resource poisoned{output};
    statistics_resource_adaptor stats{poisoned};
    packed_columns const packed = pack(input, default_stream(), stats);
    ASSERT_EQ(stats.statistics().total_count, 1U);
    EXPECT_EQ(stats.statistics().total_bytes, packed_size(input));
    EXPECT_EQ(packed.data.size(), packed_size(input));
    EXPECT_EQ(packed.data.resource(), &stats);
    EXPECT_EQ(packed.data.kind(), output.kind());
    EXPECT_EQ(packed.metadata.size(), HEADER_BYTES + input.num_columns() * ENTRY_BYTES);
    EXPECT_EQ(packed_num_rows(packed.metadata), input.num_rows());

    table_view const unpacked = unpack(packed);
    EXPECT_EQ(stats.statistics().total_count, 1U) << "unpack allocated";
    ASSERT_EQ(unpacked.num_columns(), input.num_columns());
    ASSERT_EQ(unpacked.num_rows(), input.num_rows());
    SPILLWAY_EXPECT_TABLES_EQUAL(input, unpacked);

    auto const* base = static_cast<std::uint8_t const*>(packed.data.data());
    std::vector<std::pair<std::size_t, std::size_t>> parts;  // [begin, end) within the buffer
    auto const mark = [&](
                        void const* part, std::size_t bytes, char const* what, std::size_t index) {
      std::size_t const at = address(part) - address(base);
      EXPECT_EQ(address(part) % PART_ALIGNMENT, 0U) << what << " of column " << index;
      ASSERT_LE(at + bytes, packed.data.size()) << what << " of column " << index;
      parts.emplace_back(at, at + bytes);
    };
    for (std::size_t index = 0; index < unpacked.num_columns(); ++index) {
      column_view const& in  = input.column(index);
      column_view const& out = unpacked.column(index);
      std::size_t const rows = out.size();
      EXPECT_EQ(out.offset(), 0U);
      EXPECT_EQ(out.kind(), output.kind());
      EXPECT_EQ(out.nullable(), in.nullable()) << index;
      if (out.nullable()) {
        mark(out.null_mask(), (rows + 7) / 8, "mask", index);
        for (std::size_t bit = rows; bit < (rows + 7) / 8 * 8; ++bit) {
          EXPECT_FALSE(bit_is_set(out.null_mask(), bit)) << "mask padding bit " << bit;
        }
      }
      if (is_fixed_width(out.type())) {
        EXPECT_EQ(out.offsets(), nullptr);
        mark(out.head(), rows * size_of(out.type()), "data", index);
      } else {
        ASSERT_NE(out.offsets(), nullptr);
        EXPECT_EQ(out.offsets()[0], 0) << "string offsets of column " << index;
        EXPECT_EQ(static_cast<std::size_t>(out.offsets()[rows]), in.chars_size());
        mark(out.offsets(), (rows + 1) * sizeof(std::int64_t), "offsets", index);
        mark(out.head(), in.chars_size(), "chars", index);
      }
    }
    // Parts do not overlap, and every byte between and after them is zero.
    std::sort(parts.begin(), parts.end());
    parts.emplace_back(packed.data.size(), packed.data.size());
    std::size_t cursor = 0;
    for (auto const& [begin, end] : parts) {
      ASSERT_LE(cursor, begin) << "parts overlap at byte " << begin;
      for (std::size_t byte = cursor; byte < begin; ++byte) {
        ASSERT_EQ(base[byte], 0) << "padding byte " << byte;
      }
      cursor = end;
    }

    packed_columns const again = pack(input, default_stream(), stats);
    EXPECT_EQ(again.metadata, packed.metadata);
    ASSERT_EQ(again.data.size(), packed.data.size());
    if (packed.data.size() > 0) {
      EXPECT_EQ(std::memcmp(again.data.data(), packed.data.data(), packed.data.size()), 0);
    }
  }

  testing::default_resource_guard guard_;
  host_memory_resource host_;
  emulated_device_memory_resource device_;
};

TEST_F(Pack, RoundTripEveryTypeWithoutNulls) {
  auto const input = random_table(all_types(), 517, 1, 0.0, host_);
  check_round_trip(*input, host_);
  check_round_trip(*input, device_);
}

TEST_F(Pack, RoundTripEveryTypeWithNulls) {
  auto const input = random_table(all_types(), 517, 2, 0.3, host_);
  for (std::size_t index = 0; index < input->num_columns(); ++index) {
    ASSERT_GT(input->view().column(index).null_count(), 0U) << index;
  }
  check_round_trip(*input, host_);
  check_round_trip(*input, device_);
}

TEST_F(Pack, RoundTripEachTypeAtRowCountsAroundByteAndBlockEdges) {
  std::vector<data_type> types = all_types();
  types.emplace_back(type_id::TIMESTAMP, time_unit::SECOND);
  types.emplace_back(type_id::TIMESTAMP, time_unit::NANOSECOND);
  std::uint64_t seed = 100;
  for (data_type const type : types) {
    for (std::size_t const rows : {1U, 7U, 8U, 9U, 63U, 64U, 65U, 511U, 512U, 513U}) {
      for (double const null_probability : {0.0, 0.3}) {
        SCOPED_TRACE(to_string(type) + ", " + std::to_string(rows) + " rows, null probability " +
                     std::to_string(null_probability));
        auto const input = random_table({type}, rows, ++seed, null_probability, host_);
        check_round_trip(*input, host_);
      }
    }
  }
}

TEST_F(Pack, RoundTripKeepsTimestampUnits) {
  auto const input =
    random_table({data_type{type_id::TIMESTAMP, time_unit::MICROSECOND}}, 5, 3, 0.0, host_);
  packed_columns const packed = pack(*input, default_stream(), host_);
  EXPECT_EQ(unpack(packed).column(0).type(),
            (data_type{type_id::TIMESTAMP, time_unit::MICROSECOND}));
}

TEST_F(Pack, RoundTripSlicedInputs) {
  auto const source     = random_table(all_types(), 1000, 4, 0.3, host_);
  table_view const view = *source;
  for (auto const& [begin, end] : {std::pair<std::size_t, std::size_t>{1, 998},
                                   {3, 500},
                                   {7, 8},
                                   {13, 13},
                                   {63, 130},
                                   {999, 1000},
                                   {0, 1000}}) {
    SCOPED_TRACE("rows [" + std::to_string(begin) + ", " + std::to_string(end) + ")");
    table_view const sliced = slice(view, begin, end);
    check_round_trip(sliced, host_);
    check_round_trip(slice(sliced, (end - begin) / 3, (end - begin) / 2), device_);
  }
}

TEST_F(Pack, SlicedStringOffsetsAreRebased) {
  auto const source       = make_string_column({"aaaa", "bb", std::nullopt, "ccc", "", "d"}, host_);
  table_view const sliced = slice(table_view{source->view()}, 1, 5);
  packed_columns const packed = pack(sliced, default_stream(), host_);
  column_view const out       = unpack(packed).column(0);
  std::vector<std::int64_t> const offsets(out.offsets(), out.offsets() + 5);
  EXPECT_EQ(offsets, (std::vector<std::int64_t>{0, 2, 2, 5, 5}));
  EXPECT_EQ(out.string_at(0), "bb");
  EXPECT_TRUE(out.is_null(1));
  EXPECT_EQ(out.string_at(2), "ccc");
  EXPECT_EQ(out.null_count(), 1U);
  EXPECT_FALSE(bit_is_set(out.null_mask(), 1));
  EXPECT_TRUE(bit_is_set(out.null_mask(), 0));
}

TEST_F(Pack, PackedSizeAndLayoutAreExact) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(make_fixed_column<std::int32_t>(
    type_id::INT32, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, std::vector<bool>(10, true), host_));
  columns.push_back(
    make_string_column({"aaaaa", "bbbbb", "ccccc", "ddddd", "eeeee", "", "", "", "", ""}, host_));
  table const input{std::move(columns)};
  // int32: mask [0, 64), values [64, 104) -> 128; strings: offsets [128, 216) -> 256,
  // characters [256, 281) -> 320.
  EXPECT_EQ(packed_size(input), 320U);
  packed_columns const packed = pack(input, default_stream(), host_);
  ASSERT_EQ(packed.data.size(), 320U);
  table_view const out = unpack(packed);
  auto const base      = address(packed.data.data());
  EXPECT_EQ(address(out.column(0).null_mask()) - base, 0U);
  EXPECT_EQ(address(out.column(0).head()) - base, 64U);
  EXPECT_EQ(address(out.column(1).offsets()) - base, 128U);
  EXPECT_EQ(address(out.column(1).head()) - base, 256U);

  EXPECT_EQ(read_field<std::uint32_t>(packed.metadata, MAGIC_AT), 0x4B575053U);
  EXPECT_EQ(std::string(packed.metadata.begin(), packed.metadata.begin() + 4), "SPWK");
  EXPECT_EQ(read_field<std::uint16_t>(packed.metadata, VERSION_AT), 1U);
  EXPECT_EQ(read_field<std::uint32_t>(packed.metadata, NUM_COLUMNS_AT), 2U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, NUM_ROWS_AT), 10U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, DATA_SIZE_AT), 320U);
  EXPECT_EQ(read_field<std::uint8_t>(packed.metadata, entry_at(0, TYPE_AT)),
            static_cast<std::uint8_t>(type_id::INT32));
  EXPECT_EQ(read_field<std::uint8_t>(packed.metadata, entry_at(0, NULLABLE_AT)), 1U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, entry_at(0, DATA_OFFSET_AT)), 64U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, entry_at(0, DATA_BYTES_AT)), 40U);
  EXPECT_EQ(read_field<std::uint8_t>(packed.metadata, entry_at(1, NULLABLE_AT)), 0U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, entry_at(1, OFFSETS_OFFSET_AT)), 128U);
  EXPECT_EQ(read_field<std::uint64_t>(packed.metadata, entry_at(1, DATA_BYTES_AT)), 25U);
}

TEST_F(Pack, EmptyTableWithColumns) {
  auto const input = random_table(all_types(), 0, 5, 0.3, host_);
  ASSERT_EQ(input->num_columns(), all_types().size());
  check_round_trip(*input, host_);
  packed_columns const packed = pack(*input, default_stream(), host_);
  table_view const out        = unpack(packed);
  EXPECT_EQ(out.num_rows(), 0U);
  EXPECT_EQ(out.num_columns(), all_types().size());
  // The empty slice of a table with rows and masks packs too.
  auto const full = random_table(all_types(), 40, 6, 0.3, host_);
  check_round_trip(slice(*full, 17, 17), host_);
}

TEST_F(Pack, ZeroColumnTable) {
  table_view const input;
  EXPECT_EQ(packed_size(input), 0U);
  check_round_trip(input, host_);
  packed_columns const packed = pack(input, default_stream(), host_);
  EXPECT_EQ(packed.data.size(), 0U);
  EXPECT_EQ(packed.metadata.size(), HEADER_BYTES);
  table_view const out = unpack(packed);
  EXPECT_EQ(out.num_columns(), 0U);
  EXPECT_EQ(out.num_rows(), 0U);
  EXPECT_EQ(packed_num_rows(packed.metadata), 0U);
}

TEST_F(Pack, StringsThatAreAllEmpty) {
  auto const no_nulls   = make_string_column({"", "", "", "", ""}, host_);
  auto const with_nulls = make_string_column({"", std::nullopt, "", std::nullopt}, host_);
  check_round_trip(table_view{no_nulls->view()}, host_);
  check_round_trip(table_view{with_nulls->view()}, host_);
  check_round_trip(table_view{slice(with_nulls->view(), 1, 3)}, device_);
  packed_columns const packed = pack(table_view{no_nulls->view()}, default_stream(), host_);
  table_view const out        = unpack(packed);
  EXPECT_EQ(out.column(0).chars_size(), 0U);
  EXPECT_EQ(out.column(0).string_at(4), "");
}

TEST_F(Pack, MultiMegabyteStrings) {
  auto const big = [](char first) {
    std::string value(3_MiB, ' ');
    for (std::size_t index = 0; index < value.size(); ++index) {
      value[index] = static_cast<char>(first + static_cast<char>(index % 23));
    }
    return value;
  };
  auto const source =
    make_string_column({"small", big('a'), std::nullopt, big('A'), "", big('0'), "tail"}, host_);
  table_view const whole{source->view()};
  check_round_trip(whole, host_);
  check_round_trip(slice(whole, 1, 6), device_);  // characters rebased by 5 bytes
  packed_columns const packed = pack(slice(whole, 3, 7), default_stream(), host_);
  table_view const out        = unpack(packed);
  EXPECT_EQ(out.column(0).string_at(0), big('A'));
  EXPECT_EQ(out.column(0).string_at(2), big('0'));
  EXPECT_EQ(out.column(0).string_at(3), "tail");
  EXPECT_EQ(out.column(0).chars_size(), 6_MiB + 4);
}

TEST_F(Pack, PackIsDeterministicAcrossEqualTables) {
  // A deep copy has the same values but different buffers, and mask bits past its rows that were
  // never written; both pack to the same bytes.
  auto const source           = random_table(all_types(), 300, 7, 0.3, host_);
  table_view const part       = slice(*source, 5, 250);
  auto const copied           = copy(part, default_stream(), host_);
  packed_columns const first  = pack(part, default_stream(), host_);
  packed_columns const second = pack(*copied, default_stream(), device_);
  EXPECT_EQ(first.metadata, second.metadata);
  ASSERT_EQ(first.data.size(), second.data.size());
  EXPECT_EQ(std::memcmp(first.data.data(), second.data.data(), first.data.size()), 0);
}

TEST_F(Pack, UnpackFromRawPointerAndKind) {
  auto const input            = random_table(all_types(), 33, 8, 0.3, host_);
  packed_columns const packed = pack(*input, default_stream(), device_);
  table_view const out =
    unpack(packed.metadata, packed.data.data(), packed.data.size(), memory_kind::DEVICE);
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), out);
  for (auto const& column : out) {
    EXPECT_EQ(column.kind(), memory_kind::DEVICE);
  }
}

/// A packed table of INT64 (nullable), STRING (nullable) and INT32 (no mask), ten rows, and a
/// writable copy of its data to corrupt.
class PackCorruption : public Pack {
 protected:
  void SetUp() override {
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(make_fixed_column<std::int64_t>(
      type_id::INT64,
      {0, 1, 2, 3, 4, 5, 6, 7, 8, 9},
      {true, false, true, true, true, true, true, true, true, false},
      host_));
    columns.push_back(make_string_column(
      {"a", "bb", std::nullopt, "ccc", "", "dddd", "e", "ff", "ggg", "h"}, host_));
    columns.push_back(
      make_fixed_column<std::int32_t>(type_id::INT32, {9, 8, 7, 6, 5, 4, 3, 2, 1, 0}, {}, host_));
    source_               = std::make_unique<table>(std::move(columns));
    packed_columns packed = pack(*source_, default_stream(), host_);
    metadata_             = std::move(packed.metadata);
    data_                 = std::move(packed.data);
    ASSERT_NO_THROW((void)unpack_with(metadata_));
  }

  table_view unpack_with(std::vector<std::uint8_t> const& metadata) {
    return unpack(metadata, data_.data(), data_.size(), memory_kind::HOST);
  }

  void expect_corrupt(std::vector<std::uint8_t> const& metadata, std::string const& what) {
    EXPECT_THROW((void)unpack_with(metadata), corruption_error) << what;
  }

  std::uint64_t field(std::size_t at) const { return read_field<std::uint64_t>(metadata_, at); }

  std::unique_ptr<table> source_;
  std::vector<std::uint8_t> metadata_;
  buffer data_;
};

TEST_F(PackCorruption, BadMagicOrVersion) {
  expect_corrupt(with_field<std::uint32_t>(metadata_, MAGIC_AT, 0x4B575054U), "magic");
  expect_corrupt(with_field<std::uint8_t>(metadata_, MAGIC_AT, 0), "magic byte");
  expect_corrupt(with_field<std::uint16_t>(metadata_, VERSION_AT, 2), "version");
  EXPECT_THROW((void)packed_num_rows(with_field<std::uint32_t>(metadata_, MAGIC_AT, 0xFFFFFFFFU)),
               corruption_error);
}

TEST_F(PackCorruption, TruncatedOrExtendedMetadata) {
  for (std::size_t size = 0; size < metadata_.size(); ++size) {
    std::vector<std::uint8_t> const truncated(metadata_.begin(),
                                              metadata_.begin() + static_cast<long>(size));
    expect_corrupt(truncated, "truncated to " + std::to_string(size));
    if (size < HEADER_BYTES) {
      EXPECT_THROW((void)packed_num_rows(truncated), corruption_error) << size;
    }
  }
  std::vector<std::uint8_t> extended = metadata_;
  extended.push_back(0);
  expect_corrupt(extended, "one byte extra");
  expect_corrupt(with_field<std::uint32_t>(metadata_, NUM_COLUMNS_AT, 4), "4 columns");
  expect_corrupt(with_field<std::uint32_t>(metadata_, NUM_COLUMNS_AT, 2), "2 columns");
  expect_corrupt(with_field<std::uint32_t>(metadata_, NUM_COLUMNS_AT, 0xFFFFFFFFU), "2^32-1");
}

TEST_F(PackCorruption, WrongDataSize) {
  EXPECT_THROW((void)unpack(metadata_, data_.data(), data_.size() - 1, memory_kind::HOST),
               corruption_error);
  EXPECT_THROW((void)unpack(metadata_, data_.data(), data_.size() + 64, memory_kind::HOST),
               corruption_error);
  EXPECT_THROW((void)unpack(metadata_, data_.data(), 0, memory_kind::HOST), corruption_error);
  expect_corrupt(with_field<std::uint64_t>(metadata_, DATA_SIZE_AT, data_.size() + 64),
                 "header data size");
}

TEST_F(PackCorruption, PartOffsetsOutOfRange) {
  std::uint64_t const size = data_.size();
  std::uint64_t const huge = std::numeric_limits<std::uint64_t>::max();
  for (std::size_t const column : {0U, 1U, 2U}) {
    for (std::uint64_t const bad : {size, size + 64, huge, huge - 63, std::uint64_t{1} << 63}) {
      SCOPED_TRACE("column " + std::to_string(column) + ", offset " + std::to_string(bad));
      expect_corrupt(with_field(metadata_, entry_at(column, DATA_OFFSET_AT), bad), "data");
      if (column != 2) {
        expect_corrupt(with_field(metadata_, entry_at(column, MASK_OFFSET_AT), bad), "mask");
      }
    }
  }
  for (std::uint64_t const bad : {size, size - 64, huge, huge - 63}) {
    expect_corrupt(with_field(metadata_, entry_at(1, OFFSETS_OFFSET_AT), bad), "offsets");
  }
  // Parts that start inside the buffer but run past its end.
  expect_corrupt(with_field(metadata_, entry_at(2, DATA_OFFSET_AT), size - 32), "int32 tail");
  expect_corrupt(with_field(metadata_, entry_at(0, DATA_OFFSET_AT), size - 64), "int64 tail");
}

TEST_F(PackCorruption, MisalignedPartOffsets) {
  // Inside the buffer, but not where pack puts parts: a view there would read misaligned values.
  expect_corrupt(
    with_field(metadata_, entry_at(0, DATA_OFFSET_AT), field(entry_at(0, DATA_OFFSET_AT)) + 1),
    "int64 data");
  expect_corrupt(
    with_field(
      metadata_, entry_at(1, OFFSETS_OFFSET_AT), field(entry_at(1, OFFSETS_OFFSET_AT)) + 8),
    "string offsets");
  expect_corrupt(
    with_field(metadata_, entry_at(2, DATA_OFFSET_AT), field(entry_at(2, DATA_OFFSET_AT)) + 4),
    "int32 data");
}

TEST_F(PackCorruption, WrongDataBytes) {
  for (std::uint64_t const bad : {79U, 81U, 0U, 160U}) {
    expect_corrupt(with_field<std::uint64_t>(metadata_, entry_at(0, DATA_BYTES_AT), bad),
                   "int64 data bytes " + std::to_string(bad));
  }
  std::uint64_t const chars = field(entry_at(1, DATA_BYTES_AT));
  ASSERT_EQ(chars, 17U);
  expect_corrupt(with_field<std::uint64_t>(metadata_, entry_at(1, DATA_BYTES_AT), chars - 1),
                 "string characters");
  expect_corrupt(with_field<std::uint64_t>(metadata_, entry_at(1, DATA_BYTES_AT), chars + 1),
                 "string characters");
}

TEST_F(PackCorruption, StringOffsetsThatDescend) {
  // Offsets 0 1 3 3 6 6 10 11 13 16 17 ("a" "bb" null "ccc" "" "dddd" "e" "ff" "ggg" "h"); the
  // sixth is set below the fifth, below 0, and far below a fifth near 2^63 (a difference that
  // wraps past the sign bit).
  auto* offsets = reinterpret_cast<std::int64_t*>(static_cast<std::uint8_t*>(data_.data()) +
                                                  field(entry_at(1, OFFSETS_OFFSET_AT)));
  ASSERT_EQ(offsets[4], 6);
  ASSERT_EQ(offsets[10], 17);
  std::int64_t const fifth = offsets[4];
  std::int64_t const sixth = offsets[5];
  for (auto const& [at_four, at_five] : std::vector<std::pair<std::int64_t, std::int64_t>>{
         {6, 5},
         {6, -1},
         {(std::int64_t{3} << 61), -(std::int64_t{1} << 62)},
         {(std::int64_t{3} << 61), 0}}) {
    SCOPED_TRACE(std::to_string(at_four) + " then " + std::to_string(at_five));
    offsets[4] = at_four;
    offsets[5] = at_five;
    try {
      (void)unpack_with(metadata_);
      ADD_FAILURE() << "descending offsets unpacked";
    } catch (corruption_error const& error) {
      EXPECT_NE(std::string{error.what()}.find("descend at row 4"), std::string::npos)
        << error.what();
    }
  }
  offsets[4] = fifth;
  offsets[5] = sixth;
  EXPECT_NO_THROW((void)unpack_with(metadata_));
}

TEST_F(PackCorruption, NullCountAboveRowsOrWithoutMask) {
  for (std::size_t const column : {0U, 1U}) {
    expect_corrupt(with_field<std::uint64_t>(metadata_, entry_at(column, NULL_COUNT_AT), 11),
                   "null count 11");
    expect_corrupt(
      with_field<std::uint64_t>(
        metadata_, entry_at(column, NULL_COUNT_AT), std::numeric_limits<std::uint64_t>::max()),
      "null count 2^64-1");
  }
  expect_corrupt(with_field<std::uint64_t>(metadata_, entry_at(2, NULL_COUNT_AT), 1),
                 "nulls without a mask");
  expect_corrupt(with_field<std::uint8_t>(metadata_, entry_at(0, NULLABLE_AT), 0),
                 "nulls after the mask was dropped");
}

TEST_F(PackCorruption, UnknownTypeOrUnit) {
  expect_corrupt(with_field<std::uint8_t>(metadata_, entry_at(0, TYPE_AT), 13), "type 13");
  expect_corrupt(with_field<std::uint8_t>(metadata_, entry_at(0, TYPE_AT), 255), "type 255");
  expect_corrupt(with_field<std::uint8_t>(metadata_, entry_at(0, UNIT_AT), 4), "unit 4");
}

TEST_F(PackCorruption, RowCountThatDoesNotFit) {
  expect_corrupt(with_field<std::uint64_t>(metadata_, NUM_ROWS_AT, 11), "11 rows");
  expect_corrupt(with_field<std::uint64_t>(metadata_, NUM_ROWS_AT, 9), "9 rows");
  expect_corrupt(
    with_field<std::uint64_t>(metadata_, NUM_ROWS_AT, std::numeric_limits<std::uint64_t>::max()),
    "2^64-1 rows");
}

TEST_F(PackCorruption, RowCountsThatOverflowTheSizeArithmetic) {
  // A lone int64 column without mask whose rows * 8 wraps to 0 bytes.
  auto const numbers = make_fixed_column<std::int64_t>(type_id::INT64, {1, 2, 3}, {}, host_);
  packed_columns const fixed = pack(table_view{numbers->view()}, default_stream(), host_);
  auto metadata = with_field<std::uint64_t>(fixed.metadata, NUM_ROWS_AT, std::uint64_t{1} << 61);
  metadata      = with_field<std::uint64_t>(metadata, entry_at(0, DATA_BYTES_AT), 0);
  EXPECT_THROW((void)unpack(metadata, fixed.data.data(), fixed.data.size(), memory_kind::HOST),
               corruption_error);

  // A lone string column whose (rows + 1) * 8 offset bytes wrap to 0.
  auto const strings        = make_string_column({"x", "y"}, host_);
  packed_columns const text = pack(table_view{strings->view()}, default_stream(), host_);
  metadata = with_field<std::uint64_t>(text.metadata, NUM_ROWS_AT, (std::uint64_t{1} << 61) - 1);
  EXPECT_THROW((void)unpack(metadata, text.data.data(), text.data.size(), memory_kind::HOST),
               corruption_error);
}

TEST_F(PackCorruption, StringOffsetsThatLeaveTheCharacters) {
  std::size_t const offsets_at = field(entry_at(1, OFFSETS_OFFSET_AT));
  auto* offsets =
    reinterpret_cast<std::int64_t*>(static_cast<std::uint8_t*>(data_.data()) + offsets_at);
  ASSERT_EQ(offsets[0], 0);
  ASSERT_EQ(offsets[10], 17);
  offsets[0] = 1;
  expect_corrupt(metadata_, "first offset 1");
  offsets[0]               = 0;
  std::int64_t const saved = offsets[4];
  for (std::int64_t const bad :
       {std::int64_t{-1}, std::int64_t{18}, std::int64_t{1} << 40, offsets[3] - 1}) {
    offsets[4] = bad;
    expect_corrupt(metadata_, "offset 4 = " + std::to_string(bad));
  }
  offsets[4] = saved;
  EXPECT_NO_THROW((void)unpack_with(metadata_));
}

// ---- pack_partitions and pack_at ----

/// The bytes of a packed partition's frame.
std::vector<std::uint8_t> frame_bytes(packed_partition const& part) {
  auto const* begin = static_cast<std::uint8_t const*>(part.frame.data());
  return part.frame.empty() ? std::vector<std::uint8_t>{}
                            : std::vector<std::uint8_t>(begin, begin + part.frame.size());
}

TEST_F(Pack, PackAtMatchesPackAfterZeroedRoom) {
  auto const input            = random_table(all_types(), 3000, 17, 0.2, host_);
  table_view const sliced     = slice(input->view(), 5, 2990);
  packed_columns const packed = pack(sliced, default_stream(), host_);
  packed_partition const at   = detail::pack_at(sliced, 192, default_stream(), host_);
  EXPECT_EQ(at.num_rows, sliced.num_rows());
  EXPECT_EQ(at.metadata, packed.metadata);
  auto const bytes = frame_bytes(at);
  ASSERT_EQ(bytes.size(), 192 + packed.data.size());
  EXPECT_TRUE(std::all_of(bytes.begin(), bytes.begin() + 192, [](auto b) { return b == 0; }));
  EXPECT_EQ(std::memcmp(bytes.data() + 192, packed.data.data(), packed.data.size()), 0);
  EXPECT_THROW((void)detail::pack_at(sliced, 100, default_stream(), host_), invalid_argument);
}

TEST_F(Pack, PartitionsScatteredByTwoThreadsMatchOneThread) {
  // Rows enough for two threads; a slice whose offset is not a multiple of 8, nulls and strings.
  auto const input        = random_table(all_types(), 50000, 23, 0.1, host_);
  table_view const sliced = slice(input->view(), 7, 49991);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{3}, std::size_t{1000}}) {
    std::vector<std::uint32_t> ids(sliced.num_rows());
    for (std::size_t row = 0; row < ids.size(); ++row) {
      ids[row] = static_cast<std::uint32_t>((row * 2654435761U + row / 7) % num_partitions);
    }
    auto const map = testing::make_fixed_column<std::uint32_t>(type_id::UINT32, ids, {}, host_);
    auto const one =
      detail::pack_partitions(sliced, map->view(), num_partitions, 64, 1, default_stream(), host_);
    auto const two =
      detail::pack_partitions(sliced, map->view(), num_partitions, 64, 2, default_stream(), host_);
    ASSERT_EQ(one.size(), num_partitions);
    ASSERT_EQ(two.size(), num_partitions);
    std::size_t rows = 0;
    for (std::size_t p = 0; p < num_partitions; ++p) {
      EXPECT_EQ(one[p].num_rows, two[p].num_rows);
      EXPECT_EQ(one[p].metadata, two[p].metadata);
      EXPECT_EQ(frame_bytes(one[p]), frame_bytes(two[p])) << "partition " << p;
      rows += one[p].num_rows;
    }
    EXPECT_EQ(rows, sliced.num_rows());
  }
}

TEST_F(Pack, PartitionsScatteredIntoMappedMemoryMatchFreshMemory) {
  // Frames in memory the process has touched (poisoned: every page written) take the
  // line-buffered scatter (streaming stores, partial first and last lines written by plain
  // stores); fresh frames take plain stores. Both must give the same bytes, with one thread or
  // two (the second starts inside a cache line), for every width, strings and nulls (buffers of
  // 8 lines a partition).
  auto const input        = random_table(all_types(), 300000, 29, 0.1, host_);
  table_view const sliced = slice(input->view(), 3, 299990);
  poisoning_resource poisoned{host_};
  for (std::size_t const num_partitions : {std::size_t{16}, std::size_t{61}}) {
    std::vector<std::uint16_t> ids(sliced.num_rows());
    for (std::size_t row = 0; row < ids.size(); ++row) {
      ids[row] = static_cast<std::uint16_t>((row * 2654435761U + row / 5) % num_partitions);
    }
    auto const map = testing::make_fixed_column<std::uint16_t>(type_id::UINT16, ids, {}, host_);
    for (std::size_t const threads : {std::size_t{1}, std::size_t{2}}) {
      SCOPED_TRACE(std::to_string(num_partitions) + " partitions, " + std::to_string(threads) +
                   " threads");
      auto const fresh = detail::pack_partitions(
        sliced, map->view(), num_partitions, 64, threads, default_stream(), host_);
      auto const mapped = detail::pack_partitions(
        sliced, map->view(), num_partitions, 64, threads, default_stream(), poisoned);
      for (std::size_t p = 0; p < num_partitions; ++p) {
        ASSERT_EQ(fresh[p].metadata, mapped[p].metadata);
        ASSERT_EQ(frame_bytes(fresh[p]), frame_bytes(mapped[p])) << "partition " << p;
      }
      std::size_t const middle = num_partitions / 2;
      std::vector<std::uint64_t> members;
      for (std::size_t row = 0; row < ids.size(); ++row) {
        if (ids[row] == middle) {
          members.push_back(row);
        }
      }
      auto const member_map =
        testing::make_fixed_column<std::uint64_t>(type_id::UINT64, members, {}, host_);
      auto const expected =
        gather(sliced, member_map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
      auto const* frame         = static_cast<std::uint8_t const*>(mapped[middle].frame.data());
      table_view const unpacked = unpack(
        mapped[middle].metadata, frame + 64, mapped[middle].frame.size() - 64, memory_kind::HOST);
      SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), unpacked);
    }
  }
}

TEST_F(Pack, StringsLongerThanALineBufferScatterIntoMappedMemoryAsIntoFreshMemory) {
  // Characters go through line buffers too (8 lines a partition up to 1024 partitions, 4 for
  // 1500): strings of up to 1200 bytes fill and cross several buffers at once, short ones take
  // the wide copy; one thread or two (the second's characters start inside a line of each
  // partition). Every partition is checked against a gather of its rows as well, so a fault
  // common to both paths shows too. The skewed map leaves partition 15 empty, gives partition 14
  // rows in the first thread's half only, partition 13 in the second's only, and partition 12 one
  // row in the first half and two in the second (its second part fits in its first line).
  std::size_t const rows = 40000;
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(testing::random_column(data_type{type_id::STRING}, rows, 41, 0.0, host_, 1200));
  columns.push_back(testing::random_column(data_type{type_id::STRING}, rows, 43, 0.1, host_, 20));
  columns.push_back(testing::random_column(data_type{type_id::INT32}, rows, 47, 0.0, host_));
  table const input(std::move(columns));
  poisoning_resource poisoned{host_};
  struct layout {
    std::size_t num_partitions;
    bool skewed;
  };
  for (auto const [num_partitions, skewed] :
       {layout{16, false}, layout{61, false}, layout{1500, false}, layout{16, true}}) {
    std::vector<std::uint16_t> ids(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      ids[row] = static_cast<std::uint16_t>((row * 2654435761U + row / 3) % num_partitions);
      if (skewed) {
        ids[row] = static_cast<std::uint16_t>(row % 12);
        if (row >= 200 && row < 300) {
          ids[row] = 14;
        } else if (row == 35000 || row == 35001) {
          ids[row] = 13;
        } else if (row == 100 || row == 30000 || row == 30001) {
          ids[row] = 12;
        }
      }
    }
    auto const map = testing::make_fixed_column<std::uint16_t>(type_id::UINT16, ids, {}, host_);
    std::vector<std::vector<std::uint64_t>> members(num_partitions);
    for (std::size_t row = 0; row < rows; ++row) {
      members[ids[row]].push_back(row);
    }
    for (std::size_t const threads : {std::size_t{1}, std::size_t{2}}) {
      SCOPED_TRACE(std::to_string(num_partitions) + " partitions" + (skewed ? ", skewed, " : ", ") +
                   std::to_string(threads) + " threads");
      auto const fresh = detail::pack_partitions(
        input.view(), map->view(), num_partitions, 64, threads, default_stream(), host_);
      auto const mapped = detail::pack_partitions(
        input.view(), map->view(), num_partitions, 64, threads, default_stream(), poisoned);
      for (std::size_t p = 0; p < num_partitions; ++p) {
        ASSERT_EQ(fresh[p].metadata, mapped[p].metadata);
        ASSERT_EQ(frame_bytes(fresh[p]), frame_bytes(mapped[p])) << "partition " << p;
        ASSERT_EQ(mapped[p].num_rows, members[p].size());
        auto const member_map =
          testing::make_fixed_column<std::uint64_t>(type_id::UINT64, members[p], {}, host_);
        auto const expected = gather(
          input.view(), member_map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
        auto const* frame = static_cast<std::uint8_t const*>(mapped[p].frame.data());
        SPILLWAY_EXPECT_TABLES_EQUAL(
          expected->view(),
          unpack(mapped[p].metadata, frame + 64, mapped[p].frame.size() - 64, memory_kind::HOST));
      }
    }
  }
}

TEST_F(Pack, ManyPartitionsScatteredIntoMappedMemoryMatchFreshMemory) {
  // 4096 and 8192 partitions scatter through buffers of 4 and 2 lines a partition (the string
  // column, with two buffers a partition, through 2 lines for both), and only
  // where a partition's largest column part takes two pages or more (below that, which memory
  // is mapped is not sampled): 1030 rows a partition, whose string characters (about 12 bytes a
  // row) take three pages, beside an INT64 column (8 bytes a row).
  poisoning_resource poisoned{host_};
  for (std::size_t const num_partitions : {std::size_t{4096}, std::size_t{8192}}) {
    SCOPED_TRACE(std::to_string(num_partitions) + " partitions");
    std::size_t const rows = 1030 * num_partitions;
    auto const input =
      random_table({data_type{type_id::INT64}, data_type{type_id::STRING}}, rows, 31, 0.0, host_);
    std::vector<std::uint16_t> ids(rows);
    for (std::size_t row = 0; row < rows; ++row) {
      ids[row] = static_cast<std::uint16_t>((row * 2654435761U + row / 7) % num_partitions);
    }
    auto const map   = testing::make_fixed_column<std::uint16_t>(type_id::UINT16, ids, {}, host_);
    auto const fresh = detail::pack_partitions(
      input->view(), map->view(), num_partitions, 64, 2, default_stream(), host_);
    auto const mapped = detail::pack_partitions(
      input->view(), map->view(), num_partitions, 64, 2, default_stream(), poisoned);
    for (std::size_t p = 0; p < num_partitions; ++p) {
      ASSERT_EQ(fresh[p].metadata, mapped[p].metadata);
      ASSERT_EQ(frame_bytes(fresh[p]), frame_bytes(mapped[p])) << "partition " << p;
    }
    std::size_t const last = num_partitions - 1;
    std::vector<std::uint64_t> members;
    for (std::size_t row = 0; row < rows; ++row) {
      if (ids[row] == last) {
        members.push_back(row);
      }
    }
    auto const member_map =
      testing::make_fixed_column<std::uint64_t>(type_id::UINT64, members, {}, host_);
    auto const expected = gather(
      input->view(), member_map->view(), out_of_bounds_policy::FAIL, default_stream(), host_);
    auto const* frame = static_cast<std::uint8_t const*>(mapped[last].frame.data());
    SPILLWAY_EXPECT_TABLES_EQUAL(
      expected->view(),
      unpack(mapped[last].metadata, frame + 64, mapped[last].frame.size() - 64, memory_kind::HOST));
  }
}

TEST_F(Pack, PartitionsScatteredInPartsMatchOneThreadForEveryPoolSize) {
  // Up to 16 parts (3 on a pool of 3): a slice whose offset is not a multiple of 8, nulls,
  // strings, and partitions few and many.
  auto const input        = random_table(all_types(), 200000, 29, 0.1, host_);
  table_view const sliced = slice(input->view(), 5, 199990);
  for (std::size_t const num_partitions : {std::size_t{1}, std::size_t{7}, std::size_t{1000}}) {
    std::vector<std::uint32_t> ids(sliced.num_rows());
    for (std::size_t row = 0; row < ids.size(); ++row) {
      ids[row] = static_cast<std::uint32_t>((row * 2654435761U + row / 5) % num_partitions);
    }
    auto const map = testing::make_fixed_column<std::uint32_t>(type_id::UINT32, ids, {}, host_);
    auto const one =
      detail::pack_partitions(sliced, map->view(), num_partitions, 64, 1, default_stream(), host_);
    for (std::size_t const threads : testing::POOL_SIZES) {
      SCOPED_TRACE(std::to_string(num_partitions) + " partitions, " + std::to_string(threads) +
                   " threads");
      testing::worker_threads_guard const pool{threads};
      auto const parts = detail::pack_partitions(
        sliced, map->view(), num_partitions, 64, threads, default_stream(), host_);
      ASSERT_EQ(parts.size(), num_partitions);
      for (std::size_t p = 0; p < num_partitions; ++p) {
        ASSERT_EQ(one[p].num_rows, parts[p].num_rows);
        ASSERT_EQ(one[p].metadata, parts[p].metadata);
        ASSERT_EQ(frame_bytes(one[p]), frame_bytes(parts[p])) << "partition " << p;
      }
    }
  }
}

/// Precision and scale of a decimal column sit in the entry's former padding.
constexpr std::size_t PRECISION_AT = 3;
constexpr std::size_t SCALE_AT     = 4;

TEST_F(Pack, RoundTripKeepsDecimalPrecisionAndScale) {
  std::vector<data_type> const types{data_type{type_id::DECIMAL32, 7, -2},
                                     data_type{type_id::DECIMAL64, 15, 2},
                                     data_type{type_id::DECIMAL128, 15, 2},
                                     data_type{type_id::DECIMAL256, 50, 49}};
  auto const input            = random_table(types, 77, 11, 0.2, host_);
  packed_columns const packed = pack(*input, default_stream(), host_);
  table_view const out        = unpack(packed);
  for (std::size_t index = 0; index < types.size(); ++index) {
    EXPECT_EQ(out.column(index).type(), types[index]) << to_string(out.column(index).type());
  }
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), out);
  EXPECT_EQ(read_field<std::uint8_t>(packed.metadata, entry_at(1, PRECISION_AT)), 15);
  EXPECT_EQ(read_field<std::int32_t>(packed.metadata, entry_at(0, SCALE_AT)), -2);
  EXPECT_EQ(read_field<std::int32_t>(packed.metadata, entry_at(3, SCALE_AT)), 49);
}

TEST_F(Pack, EntriesOfOtherTypesKeepTheirFormerPaddingZero) {
  // Tables packed before decimals had zeros where precision and scale now are; every other type
  // still writes them so, and reads the same.
  auto const input            = random_table(all_types(), 9, 12, 0.2, host_);
  packed_columns const packed = pack(*input, default_stream(), host_);
  for (std::size_t index = 0; index < input->num_columns(); ++index) {
    if (is_decimal(input->view().column(index).type().id())) {
      continue;
    }
    for (std::size_t at = PRECISION_AT; at < NULL_COUNT_AT; ++at) {
      EXPECT_EQ(read_field<std::uint8_t>(packed.metadata, entry_at(index, at)), 0) << index;
    }
  }
}

TEST_F(PackCorruption, DecimalPrecisionTheTypeCannotHold) {
  std::vector<std::unique_ptr<column>> columns;
  columns.push_back(
    testing::random_column(data_type{type_id::DECIMAL64, 18, 3}, 10, 1, 0.0, host_));
  table const decimals{std::move(columns)};
  packed_columns const packed = pack(decimals, default_stream(), host_);
  auto const unpack_decimals  = [&](std::vector<std::uint8_t> const& metadata) {
    return unpack(metadata, packed.data.data(), packed.data.size(), memory_kind::HOST);
  };
  ASSERT_EQ(unpack_decimals(packed.metadata).column(0).type(),
            (data_type{type_id::DECIMAL64, 18, 3}));
  EXPECT_THROW(
    (void)unpack_decimals(with_field<std::uint8_t>(packed.metadata, entry_at(0, PRECISION_AT), 19)),
    corruption_error);
  EXPECT_THROW(
    (void)unpack_decimals(with_field<std::uint8_t>(packed.metadata, entry_at(0, PRECISION_AT), 0)),
    corruption_error);
}

}  // namespace
}  // namespace spillway
