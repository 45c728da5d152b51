/**
 * @file nested_encoding_test.cpp
 * @brief The encoding of nested values (src/io/arrow/nested_encoding.hpp): it decodes to the
 * exact array, and its bytes order the values as DuckDB's ORDER BY does.
 */
#include "io/io_test_support.hpp"

#include <spillway/core/error.hpp>
#include <spillway/table/column.hpp>
#include <spillway/table/table_view.hpp>

#include <gtest/gtest.h>

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)
#include "io/arrow/nested_encoding.hpp"
#include "io/nested_arrays.hpp"

#include <arrow/api.h>
#include <arrow/array/concatenate.h>
#include <arrow/io/file.h>
#include <arrow/ipc/reader.h>
#include <arrow/ipc/writer.h>
#include <arrow/json/from_string.h>
#endif

#include <algorithm>
#include <cstdlib>
#include <numeric>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <vector>

namespace spillway {
namespace {

#if defined(SPILLWAY_IO_TEST_HAS_ARROW)

class NestedEncodingTest : public testing::arrow_io_test {
 protected:
  /** @return the encodings of `chunks`' rows (nullopt for a null row) */
  std::vector<std::optional<std::string>> encodings(arrow::ArrayVector const& chunks) {
    auto const encoded = detail::encode_nested_chunks(chunks, default_stream(), host_);
    EXPECT_EQ(encoded->type().id(), type_id::BINARY);
    std::vector<std::optional<std::string>> result;
    auto const view = encoded->view();
    for (std::size_t row = 0; row < view.size(); ++row) {
      result.push_back(view.is_null(row) ? std::nullopt
                                         : std::optional<std::string>{view.string_at(row)});
    }
    return result;
  }

  /** @return the encodings of `values` parsed by Arrow from JSON as `type` */
  std::vector<std::optional<std::string>> encodings(std::shared_ptr<arrow::DataType> const& type,
                                                    std::string const& json) {
    return encodings({arrow::json::ArrayFromJSONString(type, json).ValueOrDie()});
  }

  /** @brief Expects the rows of `json` (of `type`) to encode in strictly increasing order. */
  void expect_increasing(std::shared_ptr<arrow::DataType> const& type, std::string const& json) {
    auto const keys = encodings(type, json);
    for (std::size_t row = 1; row < keys.size(); ++row) {
      ASSERT_TRUE(keys[row - 1] && keys[row]);
      EXPECT_LT(*keys[row - 1], *keys[row])
        << type->ToString() << ": row " << row - 1 << " of " << json << " is not below row " << row;
    }
  }
};

/// Equal as values, NaNs equal and -0.0 apart from 0.0.
arrow::EqualOptions const EXACT =
  arrow::EqualOptions::Defaults().nans_equal(true).signed_zeros_equal(false);

TEST_F(NestedEncodingTest, RoundTripsRandomArraysOfEveryShape) {
  testing::nested_generator generator{11};
  for (auto const& shape : testing::nested_shapes()) {
    SCOPED_TRACE(shape.name);
    ASSERT_TRUE(detail::is_nested_type(*shape.type));
    ASSERT_EQ(detail::unencodable_part(*shape.type), "");
    auto const values = generator.array(shape.type, 400);
    // Chunks that start inside the array: offsets at every level.
    arrow::ArrayVector const chunks{
      values->Slice(0, 150), values->Slice(150, 1), values->Slice(151)};
    auto const encoded = detail::encode_nested_chunks(chunks, default_stream(), host_);
    ASSERT_EQ(encoded->size(), 400U);
    std::size_t nulls = 0;  // a dictionary's: a null index or the index of a null value
    for (std::int64_t row = 0; row < values->length(); ++row) {
      auto const [holder, at] = testing::resolve(*values, row);
      nulls += holder->IsNull(at) ? 1U : 0U;
    }
    EXPECT_EQ(encoded->null_count(), nulls);
    for (auto const& [begin, end] : {std::pair<std::size_t, std::size_t>{0, 400}, {37, 211}}) {
      auto const view = slice(table_view{std::vector<column_view>{encoded->view()}}, begin, end);
      auto const decoded =
        detail::decode_nested(view.column(0), shape.type, arrow::default_memory_pool());
      ASSERT_TRUE(decoded->ValidateFull().ok()) << decoded->ValidateFull().ToString();
      EXPECT_TRUE(decoded->type()->Equals(*shape.type, true)) << decoded->type()->ToString();
      auto const want =
        values->Slice(static_cast<std::int64_t>(begin), static_cast<std::int64_t>(end - begin));
      // Dictionaries by value (their indices are the decoder's), the rest exactly.
      EXPECT_EQ(testing::value_difference(*decoded, *want), "");
      if (!testing::has_dictionaries_or_views(*shape.type)) {
        EXPECT_TRUE(decoded->Equals(*want, EXACT)) << "decoded:\n"
                                                   << decoded->ToString() << "\nand not:\n"
                                                   << want->ToString();
      }
    }
  }
}

TEST_F(NestedEncodingTest, OrdersListsAsDuckDBDoesNullElementsLast) {
  // DuckDB 1.x and 2.x, ORDER BY x ASC: a prefix first, a null element after every value.
  expect_increasing(arrow::list(arrow::int64()),
                    "[[], [-5], [1], [1, 2], [1, null], [2], [null], [null, 1]]");
  expect_increasing(arrow::list(arrow::int8()), "[[-128], [-1], [0], [127]]");
  expect_increasing(arrow::list(arrow::uint64()), "[[1], [9223372036854775813], [null]]");
  expect_increasing(arrow::list(arrow::boolean()), "[[false], [true], [null]]");
  expect_increasing(arrow::list(arrow::list(arrow::int32())),
                    "[[], [[]], [[], []], [[1]], [[1], null], [null]]");
  expect_increasing(arrow::large_list(arrow::int16()), "[[1, 2], [1, 3], [2]]");
  expect_increasing(arrow::fixed_size_list(arrow::int64(), 2),
                    "[[0, 5], [1, 2], [1, null], [null, 0]]");
  expect_increasing(arrow::list(arrow::null()), "[[], [null], [null, null]]");
}

TEST_F(NestedEncodingTest, OrdersDecimalsByValueOfEveryWidth) {
  expect_increasing(arrow::list(arrow::decimal32(9, 2)),
                    R"([["-9999999.99"], ["-1.00"], ["-0.01"], ["0.00"], ["0.01"], ["12.50"]])");
  expect_increasing(arrow::list(arrow::decimal64(18, 3)),
                    R"([["-999999999999999.999"], ["-1.500"], ["2.000"], ["2.000", "1.000"]])");
  // Beyond 64 bits: the upper words decide first.
  expect_increasing(arrow::list(arrow::decimal128(38, 0)),
                    R"([["-99999999999999999999999999999999999999"], ["-18446744073709551616"],
        ["-1"], ["0"], ["18446744073709551615"], ["18446744073709551616"], [null]])");
  expect_increasing(arrow::struct_({arrow::field("d", arrow::decimal256(76, 4))}),
                    R"([{"d": "-123456789012345678901234567890.0000"}, {"d": "-0.0001"},
                        {"d": "0.0000"}, {"d": "99999999999999999999999999999999999.9999"},
                        {"d": null}])");
}

TEST_F(NestedEncodingTest, OrdersFloatsAsDuckDBDoesNaNAfterInfinityZerosTied) {
  expect_increasing(
    arrow::list(arrow::float64()),
    "[[-Infinity], [-1e300], [-1.5], [0.0], [1e-300], [1.5], [Infinity], [NaN], [null]]");
  expect_increasing(arrow::list(arrow::float32()),
                    "[[-Infinity], [-2.5], [0.0], [2.5], [Infinity], [NaN], [null]]");
  // DuckDB ties -0.0 with 0.0 and every NaN with every other: what follows them decides.
  auto const keys = encodings(arrow::list(arrow::float64()),
                              "[[-0.0, 5.0], [0.0, 1.0], [NaN, 2.0], [NaN, 1.0], [0.0], [-0.0]]");
  EXPECT_LT(*keys[1], *keys[0]);
  EXPECT_LT(*keys[3], *keys[2]);
  // Tied, but not equal: the exact zeros come back (the round trip tests it).
  EXPECT_NE(*keys[4], *keys[5]);
  EXPECT_EQ(keys[4]->substr(0, 10), keys[5]->substr(0, 10));  // the marker, 8 bytes, the end
}

TEST_F(NestedEncodingTest, OrdersStringsBytewiseWithPrefixesFirstAndZeroBytesKept) {
  // ["a", "b"] before ["a\u0000"]: the first elements decide ("a" is a prefix of "a\0").
  expect_increasing(
    arrow::list(arrow::utf8()),
    R"([[], [""], ["a"], ["a", "b"], ["a\u0000"], ["a\u0000\u0000"], ["a\u0001"], ["a\u0002"], ["ab"], ["\u00e9"], [null]])");
  expect_increasing(arrow::list(arrow::binary_view()),
                    R"([["a"], ["aaaaaaaaaaaaaaaaaaaa"], ["b"]])");
  // Fixed-size binary: its bytes, unsigned.
  auto const keys = encodings(
    {arrow::json::ArrayFromJSONString(arrow::list(arrow::fixed_size_binary(1)), R"([["a"], ["b"]])")
       .ValueOrDie()});
  EXPECT_LT(*keys[0], *keys[1]);
}

TEST_F(NestedEncodingTest, OrdersStructsAndMapsFieldByFieldNullFieldsLast) {
  auto const pair =
    arrow::struct_({arrow::field("a", arrow::int32()), arrow::field("b", arrow::int32())});
  expect_increasing(
    pair, R"([{"a": 0, "b": 5}, {"a": 1, "b": 2}, {"a": 1, "b": null}, {"a": null, "b": 1}])");
  expect_increasing(arrow::list(arrow::struct_({arrow::field("a", arrow::int32())})),
                    R"([[], [{"a": 1}], [{"a": null}], [null]])");
  // A map is a list of key-item structs, in its entries' order.
  expect_increasing(
    arrow::map(arrow::utf8(), arrow::int64()),
    R"([[], [["a", 1]], [["a", 1], ["c", 0]], [["a", 2]], [["a", null]], [["b", 1]]])");
}

TEST_F(NestedEncodingTest, EqualValuesEncodeAlikeWhateverTheirLayout) {
  // The same values from offsets of int32 and int64, and from a sliced array: equal bytes, so
  // that hashing and equality see values.
  auto const small = encodings(arrow::list(arrow::utf8()), R"([["x", null], [], ["y"]])");
  auto const large =
    encodings(arrow::large_list(arrow::large_utf8()), R"([["x", null], [], ["y"]])");
  auto const views = encodings(arrow::list(arrow::utf8_view()), R"([["x", null], [], ["y"]])");
  EXPECT_EQ(small, large);
  EXPECT_EQ(small, views);
  auto const sliced = encodings({arrow::json::ArrayFromJSONString(
                                   arrow::list(arrow::utf8()), R"([["q"], ["x", null], [], ["y"]])")
                                   .ValueOrDie()
                                   ->Slice(1)});
  EXPECT_EQ(small, sliced);
}

TEST_F(NestedEncodingTest, NullTypeColumnsAreNullsInsideAndNullTypeOutside) {
  auto const nulls = arrow::MakeArrayOfNull(arrow::null(), 5).ValueOrDie();
  auto const encoded =
    detail::encode_nested_chunks({nulls->Slice(1), nulls}, default_stream(), host_);
  EXPECT_EQ(encoded->type().id(), type_id::INT8);
  EXPECT_EQ(encoded->size(), 9U);
  EXPECT_EQ(encoded->null_count(), 9U);
  auto const decoded =
    detail::decode_nested(encoded->view(), arrow::null(), arrow::default_memory_pool());
  EXPECT_TRUE(decoded->Equals(*arrow::MakeArrayOfNull(arrow::null(), 9).ValueOrDie()));
}

TEST_F(NestedEncodingTest, BytesThatAreNoEncodingAreCorruption) {
  auto const type = arrow::list(arrow::int32());
  for (std::string const& bad : {std::string{"\x01\x80", 2},              // ends early
                                 std::string{"\x01\x80\x00\x00\x01", 5},  // no end marker
                                 std::string{"\x07", 1},                  // no such marker
                                 std::string{"\x00\x00", 2}}) {           // bytes after the end
    auto const column = testing::make_binary_column({bad}, host_);
    EXPECT_THROW((void)detail::decode_nested(column->view(), type, arrow::default_memory_pool()),
                 corruption_error);
  }
}

TEST_F(NestedEncodingTest, TypesWithoutAnEncodingAreNamed) {
  EXPECT_EQ(detail::unencodable_part(*arrow::list(arrow::decimal128(5, 2))), "");
  auto const either = arrow::dense_union({arrow::field("a", arrow::int8())});
  EXPECT_EQ(detail::unencodable_part(*arrow::list(either)), either->ToString());
  EXPECT_EQ(detail::unencodable_part(
              *arrow::struct_({arrow::field("a", arrow::int8()),
                               arrow::field("d", arrow::dictionary(arrow::int32(), either))})),
            either->ToString());
  EXPECT_EQ(detail::unencodable_part(*arrow::list_view(either)), either->ToString());
  EXPECT_FALSE(detail::is_nested_type(*arrow::int64()));
  // A dictionary of plain values is a column of its values; of nested ones, a nested column.
  EXPECT_FALSE(detail::is_nested_type(*arrow::dictionary(arrow::int32(), arrow::utf8())));
  EXPECT_TRUE(
    detail::is_nested_type(*arrow::dictionary(arrow::int32(), arrow::list(arrow::utf8()))));
}

TEST_F(NestedEncodingTest, OrdersIntervalsAsDuckDBDoesByTheirLength) {
  // DuckDB 2.x: a month is 30 days, nanoseconds are cut toward zero to microseconds; a month and
  // 30 days tie (and then their exact fields, after the whole row, decide: not DuckDB's order,
  // only spillway's).
  expect_increasing(arrow::list(arrow::month_day_nano_interval()),
                    "[[[-2147483648, 0, 0]], [[0, -1, 0]], [[0, 0, -1000]], [[0, 0, 0]], "
                    "[[0, 0, 1000]], [[0, 0, 2000]], [[0, 1, -1000]], [[0, 1, 0]], [[0, 29, 0]], "
                    "[[1, 1, 0]], [[2147483647, 0, 0]], [null]]");
  expect_increasing(arrow::list(arrow::day_time_interval()),
                    "[[[-1, 0]], [[0, -1]], [[0, 0]], [[0, 86399999]], [[1, 1]], [[0, "
                    "2147483647]], [[2147483647, 0]], [null]]");
  expect_increasing(arrow::list(arrow::month_interval()), "[[-5], [0], [1], [null]]");
  // Tied as DuckDB ties them, then by what follows; apart as bytes.
  auto const keys = encodings(arrow::list(arrow::month_day_nano_interval()),
                              "[[[1, 0, 0], [0, 0, 5]], [[0, 30, 0], [0, 0, 1000]], [[0, 0, 1], "
                              "[0, 0, 5]], [[0, 0, 999], [0, 0, 5]], [[1, 0, 0]], [[0, 30, 0]]]");
  EXPECT_LT(*keys[0], *keys[1]);
  EXPECT_NE(*keys[2], *keys[3]);
  EXPECT_EQ(keys[2]->substr(0, 23), keys[3]->substr(0, 23));  // 1 ns and 999 ns: 0 µs
  EXPECT_NE(*keys[4], *keys[5]);
  EXPECT_EQ(keys[4]->substr(0, 12), keys[5]->substr(0, 12));  // the marker, 10 bytes, the end
  EXPECT_EQ(encodings(arrow::day_time_interval(), "[[1, 0]]")[0]->substr(0, 8),
            encodings(arrow::day_time_interval(), "[[0, 86400000]]")[0]->substr(0, 8));
}

TEST_F(NestedEncodingTest, DictionariesAndListViewsEncodeAsTheirValuesAndLists) {
  // By value, never by index: a dictionary's rows encode as its values do, wherever it lies.
  auto const strings =
    arrow::json::ArrayFromJSONString(arrow::utf8(), R"(["b", null, "a"])").ValueOrDie();
  auto const indices =
    arrow::json::ArrayFromJSONString(arrow::int8(), "[0, 2, null, 1, 0]").ValueOrDie();
  auto const dictionary = std::make_shared<arrow::DictionaryArray>(
    arrow::dictionary(arrow::int8(), arrow::utf8()), indices, strings);
  auto const as_values =
    arrow::json::ArrayFromJSONString(arrow::utf8(), R"(["b", "a", null, null, "b"])").ValueOrDie();
  auto const offsets =
    arrow::json::ArrayFromJSONString(arrow::int32(), "[0, 2, 2, 5]").ValueOrDie();
  auto const lists = arrow::ListArray::FromArrays(*offsets, *dictionary).ValueOrDie();
  auto const plain = arrow::ListArray::FromArrays(*offsets, *as_values).ValueOrDie();
  EXPECT_EQ(encodings({lists}), encodings({plain}));
  // "a" orders before "b", though its index is the larger.
  auto const single = arrow::ListArray::FromArrays(
                        *arrow::json::ArrayFromJSONString(arrow::int32(), "[0, 1, 2]").ValueOrDie(),
                        *dictionary->Slice(0, 2))
                        .ValueOrDie();
  auto const keys = encodings({single});
  EXPECT_LT(*keys[1], *keys[0]);
  // A list view, its offsets out of order: the list it views.
  auto const views =
    arrow::ListViewArray::FromArrays(
      *arrow::json::ArrayFromJSONString(arrow::int32(), "[3, 0, 2]").ValueOrDie(),
      *arrow::json::ArrayFromJSONString(arrow::int32(), "[2, 2, 0]").ValueOrDie(),
      *arrow::json::ArrayFromJSONString(arrow::int64(), "[1, 2, 3, 4, 5]").ValueOrDie())
      .ValueOrDie();
  EXPECT_EQ(encodings({views}), encodings(arrow::list(arrow::int64()), "[[4, 5], [1, 2], []]"));
  // A dictionary of nested values, at the top: null where its value is.
  auto const nested_dictionary = std::make_shared<arrow::DictionaryArray>(
    arrow::dictionary(arrow::int8(), arrow::list(arrow::utf8())), indices, plain);
  EXPECT_EQ(encodings({nested_dictionary}),
            encodings(arrow::list(arrow::utf8()),
                      R"([["b", "a"], [null, null, "b"], null, [], ["b", "a"]])"));
}

// --- Against DuckDB -----------------------------------------------------------------------------

/// The exit status of nested_order.py when python3, pyarrow or duckdb is missing.
constexpr int MISSING_MODULE = 77;

/// Whether DuckDB ties values of `type` that spillway keeps apart: floats' zeros, and intervals
/// of one length (a month and 30 days; nanoseconds within a microsecond).
bool has_ties(arrow::DataType const& type) {
  if (type.id() == arrow::Type::FLOAT || type.id() == arrow::Type::DOUBLE ||
      type.id() == arrow::Type::INTERVAL_MONTH_DAY_NANO) {
    return true;
  }
  if (type.id() == arrow::Type::DICTIONARY) {
    return has_ties(*static_cast<arrow::DictionaryType const&>(type).value_type());
  }
  return std::any_of(type.fields().begin(), type.fields().end(), [](auto const& field) {
    return has_ties(*field->type());
  });
}

TEST_F(NestedEncodingTest, SortingByTheBytesSortsAsDuckDBInEveryDirection) {
  std::int64_t const rows = 300;
  testing::nested_generator generator{29};
  arrow::FieldVector fields;
  arrow::ArrayVector columns;
  for (auto const& shape : testing::nested_shapes()) {
    if (shape.duckdb) {
      fields.push_back(arrow::field(shape.name, shape.type));
      columns.push_back(generator.array(shape.type, rows));
    }
  }
  auto const values = arrow::RecordBatch::Make(arrow::schema(fields), rows, columns);
  {
    auto sink   = *arrow::io::FileOutputStream::Open(path("values.arrow"));
    auto writer = *arrow::ipc::MakeFileWriter(sink, values->schema());
    ASSERT_TRUE(writer->WriteRecordBatch(*values).ok());
    ASSERT_TRUE(writer->Close().ok());
    ASSERT_TRUE(sink->Close().ok());
  }
  std::string python = SPILLWAY_IO_TEST_PYTHON;
  if (python.empty()) {
    python = "python3";
  }
  std::string const script = SPILLWAY_IO_TEST_SCRIPT;
  std::string const order_script =
    script.substr(0, script.find_last_of('/') + 1) + "nested_order.py";
  std::string const line = python + " " + order_script + " '" + directory_.string() + "' 2>&1";
  int const status       = std::system(line.c_str());  // NOLINT(cert-env33-c): a test driver
  ASSERT_TRUE(status != -1 && WIFEXITED(status));
  if (WEXITSTATUS(status) == MISSING_MODULE) {
    GTEST_SKIP() << "python3 with pyarrow and duckdb is missing";
  }
  ASSERT_EQ(WEXITSTATUS(status), 0) << line;
  auto reader =
    *arrow::ipc::RecordBatchFileReader::Open(*arrow::io::ReadableFile::Open(path("ranks.arrow")));
  auto const ranks = *reader->ToTable();

  struct direction {
    std::string name;
    bool descending;
    bool nulls_first;
  };
  std::vector<direction> const directions{{"ASC NULLS FIRST", false, true},
                                          {"ASC NULLS LAST", false, false},
                                          {"DESC NULLS FIRST", true, true},
                                          {"DESC NULLS LAST", true, false}};
  for (int c = 0; c < values->num_columns(); ++c) {
    auto const& name = fields[static_cast<std::size_t>(c)]->name();
    auto const keys  = encodings({values->column(c)});
    for (auto const& order : directions) {
      SCOPED_TRACE(name + " " + order.name);
      auto const rank_column = ranks->GetColumnByName(name + "|" + order.name);
      ASSERT_NE(rank_column, nullptr);
      auto const rank = std::static_pointer_cast<arrow::Int64Array>(
        arrow::Concatenate(rank_column->chunks()).ValueOrDie());
      // Top-level nulls are the key machinery's: first or last; the bytes, reversed for DESC.
      auto const compare = [&](std::size_t a, std::size_t b) {
        if (!keys[a] || !keys[b]) {
          if (!keys[a] && !keys[b]) {
            return 0;
          }
          return (!keys[a] ? -1 : 1) * (order.nulls_first ? 1 : -1);
        }
        int const bytes = std::string_view{*keys[a]}.compare(*keys[b]);
        int const sign  = bytes < 0 ? -1 : (bytes > 0 ? 1 : 0);
        return order.descending ? -sign : sign;
      };
      std::vector<std::size_t> sorted(static_cast<std::size_t>(rows));
      std::iota(sorted.begin(), sorted.end(), 0);
      std::stable_sort(sorted.begin(), sorted.end(), [&](std::size_t a, std::size_t b) {
        return compare(a, b) < 0;
      });
      std::size_t split_ties = 0;
      for (std::size_t i = 1; i < sorted.size(); ++i) {
        auto const previous = rank->Value(static_cast<std::int64_t>(sorted[i - 1]));
        auto const current  = rank->Value(static_cast<std::int64_t>(sorted[i]));
        auto const row_text = [&](std::size_t at) {
          return values->column(c)
            ->GetScalar(static_cast<std::int64_t>(sorted[at]))
            .ValueOrDie()
            ->ToString();
        };
        ASSERT_LE(previous, current)
          << row_text(i - 1) << " sorts before " << row_text(i) << ", which DuckDB puts first";
        if (compare(sorted[i - 1], sorted[i]) == 0) {
          ASSERT_EQ(previous, current)
            << "equal bytes of " << row_text(i - 1) << " and " << row_text(i);
        } else if (previous == current) {
          ++split_ties;  // DuckDB ties them: -0.0 and 0.0, intervals of one length
        }
      }
      if (!has_ties(*values->column(c)->type())) {
        EXPECT_EQ(split_ties, 0U);
      }
    }
  }
}

#endif

}  // namespace
}  // namespace spillway
