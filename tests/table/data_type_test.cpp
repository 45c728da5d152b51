#include <spillway/core/error.hpp>
#include <spillway/table/data_type.hpp>

#include <gtest/gtest.h>

#include <cstddef>
#include <cstdint>
#include <string>
#include <typeindex>
#include <typeinfo>
#include <vector>

namespace spillway {
namespace {

/// One row of expectations per type id, in `type_id` order.
struct type_facts {
  type_id id;
  std::size_t size;
  char const* name;
  std::type_index storage;
};

std::vector<type_facts> const& every_type_id() {
  static std::vector<type_facts> const facts{
    {type_id::BOOL8, 1, "bool8", typeid(std::uint8_t)},
    {type_id::INT8, 1, "int8", typeid(std::int8_t)},
    {type_id::INT16, 2, "int16", typeid(std::int16_t)},
    {type_id::INT32, 4, "int32", typeid(std::int32_t)},
    {type_id::INT64, 8, "int64", typeid(std::int64_t)},
    {type_id::UINT8, 1, "uint8", typeid(std::uint8_t)},
    {type_id::UINT16, 2, "uint16", typeid(std::uint16_t)},
    {type_id::UINT32, 4, "uint32", typeid(std::uint32_t)},
    {type_id::UINT64, 8, "uint64", typeid(std::uint64_t)},
    {type_id::FLOAT32, 4, "float32", typeid(float)},
    {type_id::FLOAT64, 8, "float64", typeid(double)},
    {type_id::TIMESTAMP, 8, "timestamp[ns]", typeid(std::int64_t)},
    {type_id::STRING, 0, "string", typeid(void)},
    {type_id::DATE32, 4, "date32", typeid(std::int32_t)},
    {type_id::DATE64, 8, "date64", typeid(std::int64_t)},
    {type_id::TIME32, 4, "time32[ns]", typeid(std::int32_t)},
    {type_id::TIME64, 8, "time64[ns]", typeid(std::int64_t)},
    {type_id::DURATION, 8, "duration[ns]", typeid(std::int64_t)},
    {type_id::BINARY, 0, "binary", typeid(void)},
    {type_id::DECIMAL32, 4, "decimal32(0, 0)", typeid(std::int32_t)},
    {type_id::DECIMAL64, 8, "decimal64(0, 0)", typeid(std::int64_t)},
    {type_id::DECIMAL128, 16, "decimal128(0, 0)", typeid(decimal128_storage)},
    {type_id::DECIMAL256, 32, "decimal256(0, 0)", typeid(decimal256_storage)},
  };
  return facts;
}

TEST(DataType, EveryTypeIdIsListedOnce) {
  ASSERT_EQ(every_type_id().size(), TYPE_ID_COUNT);
  for (std::size_t index = 0; index < TYPE_ID_COUNT; ++index) {
    EXPECT_EQ(static_cast<std::size_t>(every_type_id()[index].id), index);
  }
}

TEST(DataType, SizeOf) {
  for (auto const& facts : every_type_id()) {
    EXPECT_EQ(size_of(data_type{facts.id}), facts.size) << facts.name;
  }
  for (auto const unit : {time_unit::SECOND, time_unit::MILLISECOND, time_unit::NANOSECOND}) {
    EXPECT_EQ(size_of(data_type{type_id::TIMESTAMP, unit}), 8U);
  }
  static_assert(size_of(data_type{type_id::INT16}) == 2);
}

TEST(DataType, IsFixedWidthForEveryTypeButStringAndBinary) {
  for (auto const& facts : every_type_id()) {
    EXPECT_EQ(is_fixed_width(data_type{facts.id}),
              facts.id != type_id::STRING && facts.id != type_id::BINARY)
      << facts.name;
  }
}

TEST(DataType, ToStringNamesEveryType) {
  for (auto const& facts : every_type_id()) {
    EXPECT_EQ(to_string(data_type{facts.id}), facts.name);
  }
}

TEST(DataType, ToStringNamesTimestampUnits) {
  EXPECT_EQ(to_string(time_unit::SECOND), "s");
  EXPECT_EQ(to_string(time_unit::MILLISECOND), "ms");
  EXPECT_EQ(to_string(time_unit::MICROSECOND), "us");
  EXPECT_EQ(to_string(time_unit::NANOSECOND), "ns");
  EXPECT_EQ(to_string(data_type{type_id::TIMESTAMP, time_unit::SECOND}), "timestamp[s]");
  EXPECT_EQ(to_string(data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}), "timestamp[ms]");
  EXPECT_EQ(to_string(data_type{type_id::TIMESTAMP, time_unit::MICROSECOND}), "timestamp[us]");
  EXPECT_EQ(to_string(data_type{type_id::TIMESTAMP, time_unit::NANOSECOND}), "timestamp[ns]");
  // The unit of a non-timestamp type is not part of its name.
  EXPECT_EQ(to_string(data_type{type_id::INT64, time_unit::SECOND}), "int64");
}

TEST(DataType, DefaultIsInt8) {
  EXPECT_EQ(data_type{}.id(), type_id::INT8);
  EXPECT_EQ(data_type{}, data_type{type_id::INT8});
}

TEST(DataType, EqualityComparesIds) {
  for (auto const& lhs : every_type_id()) {
    for (auto const& rhs : every_type_id()) {
      EXPECT_EQ(data_type{lhs.id} == data_type{rhs.id}, lhs.id == rhs.id)
        << lhs.name << " vs " << rhs.name;
    }
  }
}

TEST(DataType, TimestampUnitsMatterOnlyForTimestamp) {
  EXPECT_EQ((data_type{type_id::TIMESTAMP, time_unit::SECOND}),
            (data_type{type_id::TIMESTAMP, time_unit::SECOND}));
  EXPECT_NE((data_type{type_id::TIMESTAMP, time_unit::SECOND}),
            (data_type{type_id::TIMESTAMP, time_unit::MILLISECOND}));
  EXPECT_NE((data_type{type_id::TIMESTAMP, time_unit::NANOSECOND}),
            (data_type{type_id::TIMESTAMP, time_unit::MICROSECOND}));
  EXPECT_NE(data_type{type_id::TIMESTAMP}, (data_type{type_id::TIMESTAMP, time_unit::SECOND}));
  EXPECT_EQ((data_type{type_id::INT64, time_unit::SECOND}),
            (data_type{type_id::INT64, time_unit::NANOSECOND}));
  EXPECT_EQ((data_type{type_id::STRING, time_unit::MILLISECOND}), data_type{type_id::STRING});
  EXPECT_NE((data_type{type_id::INT64, time_unit::SECOND}),
            (data_type{type_id::TIMESTAMP, time_unit::SECOND}));
}

TEST(DataType, TheUnitsOfTimesAndDurationsMatterAndNameThem) {
  for (auto const id : {type_id::TIME32, type_id::TIME64, type_id::DURATION}) {
    EXPECT_TRUE(has_time_unit(id));
    EXPECT_NE((data_type{id, time_unit::SECOND}), (data_type{id, time_unit::MILLISECOND}));
    EXPECT_EQ((data_type{id, time_unit::MICROSECOND}), (data_type{id, time_unit::MICROSECOND}));
  }
  EXPECT_FALSE(has_time_unit(type_id::DATE32));
  EXPECT_EQ((data_type{type_id::DATE64, time_unit::SECOND}), data_type{type_id::DATE64});
  EXPECT_EQ(to_string(data_type{type_id::TIME32, time_unit::MILLISECOND}), "time32[ms]");
  EXPECT_EQ(to_string(data_type{type_id::TIME64, time_unit::MICROSECOND}), "time64[us]");
  EXPECT_EQ(to_string(data_type{type_id::DURATION, time_unit::SECOND}), "duration[s]");
}

TEST(DataType, DecimalsCarryPrecisionAndScaleAndNameThem) {
  data_type const lineitem{type_id::DECIMAL128, 15, 2};
  EXPECT_EQ(lineitem.precision(), 15);
  EXPECT_EQ(lineitem.scale(), 2);
  EXPECT_EQ(to_string(lineitem), "decimal128(15, 2)");
  EXPECT_EQ(to_string(data_type{type_id::DECIMAL32, 9, -3}), "decimal32(9, -3)");
  EXPECT_EQ(to_string(data_type{type_id::DECIMAL256, 76, 40}), "decimal256(76, 40)");
  EXPECT_EQ(lineitem, (data_type{type_id::DECIMAL128, 15, 2}));
  EXPECT_NE(lineitem, (data_type{type_id::DECIMAL128, 15, 3}));
  EXPECT_NE(lineitem, (data_type{type_id::DECIMAL128, 16, 2}));
  EXPECT_NE(lineitem, (data_type{type_id::DECIMAL256, 15, 2}));
  EXPECT_NE((data_type{type_id::DECIMAL64, 15, 2}), (data_type{type_id::DECIMAL64, 15, -2}));
  // Precision and scale belong to decimals only, as units belong to the temporal types.
  EXPECT_EQ((data_type{type_id::INT64, 15, 2}), data_type{type_id::INT64});
  for (auto const& facts : every_type_id()) {
    EXPECT_EQ(is_decimal(facts.id), std::string{facts.name}.starts_with("decimal")) << facts.name;
    EXPECT_FALSE(is_decimal(facts.id) && has_time_unit(facts.id)) << facts.name;
  }
}

TEST(DataType, ValidDecimalsHaveAPrecisionTheirStorageHolds) {
  EXPECT_EQ(max_decimal_precision(type_id::DECIMAL32), 9);
  EXPECT_EQ(max_decimal_precision(type_id::DECIMAL64), 18);
  EXPECT_EQ(max_decimal_precision(type_id::DECIMAL128), 38);
  EXPECT_EQ(max_decimal_precision(type_id::DECIMAL256), 76);
  EXPECT_EQ(max_decimal_precision(type_id::INT64), 0);
  EXPECT_TRUE(is_valid_decimal(data_type{type_id::DECIMAL32, 1, 0}));
  EXPECT_TRUE(is_valid_decimal(data_type{type_id::DECIMAL32, 9, 9}));
  EXPECT_FALSE(is_valid_decimal(data_type{type_id::DECIMAL32, 10, 2}));
  EXPECT_FALSE(is_valid_decimal(data_type{type_id::DECIMAL64, 0, 0}));
  EXPECT_TRUE(is_valid_decimal(data_type{type_id::DECIMAL256, 76, -5}));
  EXPECT_FALSE(is_valid_decimal(data_type{type_id::DECIMAL256, 77, 0}));
  EXPECT_FALSE(is_valid_decimal(data_type{type_id::INT64, 5, 0}));
}

TEST(DataType, VisitFixedWidthPassesTheStorageType) {
  for (auto const& facts : every_type_id()) {
    if (!is_fixed_width(data_type{facts.id})) {
      continue;
    }
    std::type_index const visited = visit_fixed_width(
      data_type{facts.id}, []<typename T>() { return std::type_index{typeid(T)}; });
    EXPECT_EQ(visited, facts.storage) << facts.name;
    std::size_t const width =
      visit_fixed_width(data_type{facts.id}, []<typename T>() { return sizeof(T); });
    EXPECT_EQ(width, facts.size) << facts.name;
  }
  static_assert(std::is_same_v<storage_type<type_id::TIMESTAMP>::type, std::int64_t>);
  static_assert(std::is_same_v<storage_type<type_id::BOOL8>::type, std::uint8_t>);
  static_assert(std::is_same_v<storage_type<type_id::DECIMAL64>::type, std::int64_t>);
  static_assert(std::is_same_v<storage_type<type_id::DECIMAL256>::type, decimal256_storage>);
}

TEST(DataType, VisitFixedWidthOnStringThrowsInvalidArgument) {
  bool visited = false;
  try {
    visit_fixed_width(data_type{type_id::STRING}, [&]<typename T>() { visited = true; });
    FAIL() << "expected invalid_argument";
  } catch (invalid_argument const& error) {
    EXPECT_NE(std::string{error.what()}.find("string"), std::string::npos) << error.what();
  }
  EXPECT_FALSE(visited);
}

}  // namespace
}  // namespace spillway
