#include "io/io_detail.hpp"
#include "io/io_test_support.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <string>
#include <unistd.h>

namespace spillway {
namespace {

using ::testing::HasSubstr;

class IoErrorsTest : public testing::io_test {
 protected:
  void write_text(std::string const& name, std::string const& text) {
    std::ofstream out(path(name), std::ios::binary);
    out << text;
  }

  template <typename Exception, typename Function>
  std::string message_of(Function&& function) {
    try {
      function();
    } catch (Exception const& error) {
      return error.what();
    }
    ADD_FAILURE() << "no exception of the expected type";
    return {};
  }
};

TEST_F(IoErrorsTest, MissingFileNamesThePath) {
  auto const missing = path("missing.parquet");
  EXPECT_THAT(
    message_of<io_error>([&] { (void)read_parquet(missing, {}, default_stream(), host_); }),
    HasSubstr(missing));
  EXPECT_THAT(message_of<io_error>([&] { (void)read_csv(missing, {}, default_stream(), host_); }),
              HasSubstr(missing));
}

TEST_F(IoErrorsTest, CorruptParquetAndIpcAreCorruptionErrors) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  write_text("bad.parquet", "this is not parquet at all, just some text that is long enough");
  EXPECT_THAT(message_of<corruption_error>(
                [&] { (void)read_parquet(path("bad.parquet"), {}, default_stream(), host_); }),
              HasSubstr("bad.parquet"));
  write_text("bad.arrow", "ARROW1 but not really an arrow file at all............");
  EXPECT_THAT(message_of<corruption_error>([&] {
                (void)read_arrow_ipc(
                  path("bad.arrow"), file_format::ARROW_IPC_FILE, {}, default_stream(), host_);
              }),
              HasSubstr("bad.arrow"));
  // A good file cut short.
  auto const input = every_type_table(2000, 21);
  write_parquet(
    *input, names(input->num_columns()), path("good.parquet"), {}, default_stream(), host_);
  auto const size = std::filesystem::file_size(path("good.parquet"));
  std::filesystem::resize_file(path("good.parquet"), size / 2);
  EXPECT_THROW((void)read_parquet(path("good.parquet"), {}, default_stream(), host_),
               corruption_error);
}

TEST_F(IoErrorsTest, UnknownColumnNamesTheColumnAndFile) {
  auto const input = every_type_table(10, 22);
  write_csv(*input, names(input->num_columns()), path("t.csv"), {}, default_stream(), host_);
  csv_read_options options;
  options.columns    = {"nope"};
  auto const message = message_of<invalid_argument>(
    [&] { (void)read_csv(path("t.csv"), options, default_stream(), host_); });
  EXPECT_THAT(message, HasSubstr("nope"));
  EXPECT_THAT(message, HasSubstr("t.csv"));
  if (testing::arrow_tests_enabled()) {
    write_parquet(
      *input, names(input->num_columns()), path("t.parquet"), {}, default_stream(), host_);
    parquet_read_options parquet_options;
    parquet_options.columns = {"nope"};
    EXPECT_THAT(message_of<invalid_argument>([&] {
                  (void)read_parquet(path("t.parquet"), parquet_options, default_stream(), host_);
                }),
                HasSubstr("nope"));
  }
}

TEST_F(IoErrorsTest, BadCsvValueNamesFileRowAndColumn) {
  write_text("bad.csv", "a,b\n1,2\n3,x\n");
  csv_read_options options;
  options.schema     = table_schema{{"a", type_id::INT32}, {"b", type_id::INT32}};
  auto const message = message_of<io_error>(
    [&] { (void)read_csv(path("bad.csv"), options, default_stream(), host_); });
  EXPECT_THAT(message, HasSubstr("bad.csv"));
  EXPECT_THAT(message, HasSubstr("row 2"));
  EXPECT_THAT(message, HasSubstr("'b'"));
  write_text("ragged.csv", "a,b\n1,2\n3\n");
  EXPECT_THROW((void)read_csv(path("ragged.csv"), {}, default_stream(), host_), corruption_error);
  write_text("quote.csv", "a\n\"open\n");
  EXPECT_THROW((void)read_csv(path("quote.csv"), {}, default_stream(), host_), corruption_error);
}

TEST_F(IoErrorsTest, WritingToAMissingDirectoryIsAnIoErrorAndLeavesNothing) {
  auto const input  = every_type_table(10, 23);
  auto const target = path("no/such/dir/t.csv");
  EXPECT_THROW(write_csv(*input, names(input->num_columns()), target, {}, default_stream(), host_),
               io_error);
  if (testing::arrow_tests_enabled()) {
    EXPECT_THROW(
      write_parquet(
        *input, names(input->num_columns()), path("no/t.parquet"), {}, default_stream(), host_),
      io_error);
  }
}

TEST_F(IoErrorsTest, AValueLongerThanParquetHoldsNamesItsColumnBeforeAnyByteIsRead) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  // Offsets say the second value is 2 GiB long; its characters are never there. The writer must
  // refuse the column before it reads any of them (Arrow's encoder failed on it as corrupt data,
  // naming no column), whatever Arrow type the column is written as, on the writing thread or on
  // encode threads. The same columns with short values are written.
  std::int64_t const huge = std::int64_t{1} << 31U;
  std::vector<std::int64_t> const offsets{0, 3, 3 + huge, 6 + huge};
  std::vector<std::int64_t> const short_offsets{0, 3, 3, 6};
  std::vector<std::int64_t> const ids{1, 2, 3};
  char const chars[] = "abcdef";
  for (auto const type : {type_id::STRING, type_id::BINARY}) {
    for (auto const storage :
         {string_storage::LARGE_STRING, string_storage::STRING, string_storage::VIEW}) {
      for (bool const dictionary : {false, true}) {
        for (std::size_t const threads : {std::size_t{0}, std::size_t{2}}) {
          SCOPED_TRACE(std::to_string(static_cast<int>(storage)) + (dictionary ? " dict " : " ") +
                       std::to_string(threads));
          table_schema schema{{"id", type_id::INT64}, {"text", type}};
          schema[1].storage = storage;
          if (dictionary) {
            schema[1].dictionary = dictionary_encoding{};
          }
          parquet_write_options options;
          options.encode_threads = threads;
          auto const write = [&](std::vector<std::int64_t> const& text, std::string const& name) {
            table_view const input{column_view{type_id::INT64, 3, ids.data(), nullptr, 0},
                                   column_view{type, 3, chars, nullptr, 0, 0, text.data()}};
            auto writer =
              detail::make_parquet_writer(path(name), schema, options, default_stream(), host_);
            writer->write(input, nullptr);
            writer->close();
          };
          auto const message = message_of<not_supported>([&] { write(offsets, "long.parquet"); });
          EXPECT_THAT(message, HasSubstr("'text'"));
          EXPECT_THAT(message, HasSubstr(std::to_string(huge) + " bytes"));
          EXPECT_THAT(message, HasSubstr("long.parquet"));
          EXPECT_NO_THROW(write(short_offsets, "short.parquet"));
        }
      }
    }
  }
}

TEST_F(IoErrorsTest, ArrowAllocationsCountAgainstTheResource) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  auto const input = every_type_table(20000, 24);
  write_parquet(
    *input, names(input->num_columns()), path("t.parquet"), {}, default_stream(), host_);
  // Too little memory for Arrow's decoding scratch: the reader fails with out_of_memory from our
  // resource, not by allocating elsewhere.
  limiting_resource_adaptor tiny(host_, 4096);
  EXPECT_THROW(
    (void)read_parquet(path("t.parquet"), {}, default_stream(), memory_resources{host_, tiny}),
    out_of_memory);
}

}  // namespace
}  // namespace spillway

namespace spillway {
namespace {

TEST(IoWithoutArrowTest, ParquetAndIpcSayWhyInABuildWithoutArrow) {
  if (arrow_io_available()) {
    GTEST_SKIP() << "this build has Arrow C++; the no-Arrow errors are not reachable";
  }
  host_memory_resource host;
  auto const input = testing::random_table({type_id::INT32}, 3, 1, 0.0, host);
  auto const file  = (std::filesystem::temp_directory_path() /
                     ("spillway_no_arrow_" + std::to_string(::getpid()) + ".parquet"))
                      .string();
  EXPECT_THROW(write_parquet(*input, {"x"}, file, {}, default_stream(), host), not_supported);
  EXPECT_THROW(
    write_arrow_ipc(*input, {"x"}, file, file_format::ARROW_IPC_FILE, default_stream(), host),
    not_supported);
  EXPECT_FALSE(std::filesystem::exists(file));
}

}  // namespace
}  // namespace spillway
