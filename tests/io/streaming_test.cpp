#include "io/io_test_support.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/parameter_printers.hpp"

#include <spillway/io/arrow_ipc.hpp>
#include <spillway/io/batch_writer.hpp>
#include <spillway/io/csv.hpp>
#include <spillway/io/dataset.hpp>
#include <spillway/io/parquet.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>
#include <spillway/table/size_estimate.hpp>

#include <gtest/gtest.h>

#include <atomic>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

class StreamingTest : public testing::io_test, public ::testing::WithParamInterface<file_format> {
 protected:
  void SetUp() override {
    io_test::SetUp();
    if (GetParam() != file_format::CSV && !testing::arrow_tests_enabled()) {
      GTEST_SKIP() << testing::arrow_skip_reason();
    }
  }

  /** @return an open reader of `source` in the test's format */
  std::unique_ptr<batch_reader> open(std::string const& source,
                                     std::size_t target,
                                     std::vector<data_type> const& types) {
    switch (GetParam()) {
      case file_format::PARQUET:
        return open_parquet(
          source, {.columns = {}, .target_batch_bytes = target}, default_stream(), host_);
      case file_format::ARROW_IPC_FILE:
      case file_format::ARROW_IPC_STREAM:
        return open_arrow_ipc(source,
                              GetParam(),
                              {.columns = {}, .target_batch_bytes = target},
                              default_stream(),
                              host_);
      case file_format::CSV: {
        csv_read_options options;
        table_schema schema;
        auto const names = this->names(types.size());
        for (std::size_t i = 0; i < types.size(); ++i) {
          schema.push_back({names[i], types[i]});
        }
        options.schema             = schema;
        options.target_batch_bytes = target;
        return open_csv(source, options, default_stream(), host_);
      }
    }
    return nullptr;
  }
};

TEST_P(StreamingTest, MultiFileOutputOfTargetSizeReadsBackAsOneDatasetInBatches) {
  auto const column_types = GetParam() == file_format::PARQUET ? parquet_types() : types();
  auto const input        = every_type_table(20000, 11, column_types);
  auto const names        = this->names(input->num_columns());
  batch_writer_options options;
  options.directory         = path("out");
  options.format            = GetParam();
  options.target_file_bytes = 256U << 10U;
  batch_writer writer(options, names, default_stream(), host_);
  // Several writes, so files span writes and writes span files.
  for (std::size_t begin = 0; begin < input->num_rows(); begin += 3000) {
    writer.write(
      slice(input->view(), begin, std::min<std::size_t>(begin + 3000, input->num_rows())));
  }
  // Nothing visible before close.
  for (auto const& entry : std::filesystem::directory_iterator(path("out"))) {
    EXPECT_EQ(entry.path().filename().string().front(), '.') << entry.path();
  }
  auto const files = writer.close();
  ASSERT_GT(files.size(), 2U);
  for (std::size_t i = 0; i + 1 < files.size(); ++i) {
    auto const size = std::filesystem::file_size(files[i]);
    EXPECT_GE(size, options.target_file_bytes / 2) << files[i];
    EXPECT_LE(size, options.target_file_bytes * 2) << files[i];
  }
  EXPECT_EQ(expand_dataset(path("out")), files);

  // Read back the directory in batches of about 64 KiB.
  std::size_t const target = 64U << 10U;
  auto reader              = open(path("out"), target, column_types);
  std::vector<std::unique_ptr<table>> batches;
  while (auto batch = reader->next()) {
    batches.push_back(std::move(batch));
  }
  // About the target: none much larger, and few small ones (CSV ends a batch at a file's end).
  std::size_t const total = estimate_size(input->view());
  ASSERT_GT(batches.size(), 4U);
  EXPECT_LE(batches.size(), 2 * (total / target + 1) + files.size());
  std::vector<table_view> views;
  for (std::size_t i = 0; i < batches.size(); ++i) {
    views.push_back(batches[i]->view());
    EXPECT_LE(estimate_size(batches[i]->view()), target * 3) << "batch " << i;
  }
  auto const all = concatenate(views, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), all->view());
  EXPECT_EQ(reader->next(), nullptr);

  // A glob over the same files.
  auto const glob_pattern = path("out") + "/part-*." + std::string{extension(GetParam())};
  auto glob_reader        = open(glob_pattern, 1U << 30U, column_types);
  auto const whole        = read_all(*glob_reader, default_stream(), host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), whole->view());
}

TEST_P(StreamingTest, AbandonedWriterLeavesNoFiles) {
  auto const input = every_type_table(5000, 12);
  {
    batch_writer_options options;
    options.directory         = path("out");
    options.format            = GetParam();
    options.target_file_bytes = 32U << 10U;
    batch_writer writer(options, names(input->num_columns()), default_stream(), host_);
    writer.write(*input);
    // Destroyed without close(), as on an exception.
  }
  EXPECT_TRUE(std::filesystem::is_empty(path("out")));
}

TEST_P(StreamingTest, WriterRejectsTablesOfAnotherSchema) {
  auto const input = every_type_table(10, 13);
  batch_writer_options options;
  options.directory = path("out");
  options.format    = GetParam();
  batch_writer writer(options, names(input->num_columns()), default_stream(), host_);
  writer.write(*input);
  auto const other = testing::random_table({type_id::INT32}, 10, 1, 0.0, host_);
  EXPECT_THROW(writer.write(*other), invalid_argument);
}

INSTANTIATE_TEST_SUITE_P(Formats,
                         StreamingTest,
                         ::testing::Values(file_format::PARQUET,
                                           file_format::ARROW_IPC_FILE,
                                           file_format::ARROW_IPC_STREAM,
                                           file_format::CSV),
                         [](auto const& param_info) {
                           return std::string{extension(param_info.param)};
                         });

class DatasetTest : public testing::io_test {};

TEST_F(DatasetTest, ExpandsFilesDirectoriesAndGlobs) {
  for (auto const* name : {"b.csv", "a.csv", ".hidden.tmp", "_SUCCESS", "c.txt"}) {
    std::FILE* file = std::fopen(path(name).c_str(), "w");
    ASSERT_NE(file, nullptr);
    std::fclose(file);
  }
  EXPECT_EQ(expand_dataset(path("a.csv")), std::vector<std::string>{path("a.csv")});
  EXPECT_EQ(expand_dataset(directory_.string()),
            (std::vector<std::string>{path("a.csv"), path("b.csv"), path("c.txt")}));
  EXPECT_EQ(expand_dataset(path("*.csv")),
            (std::vector<std::string>{path("a.csv"), path("b.csv")}));
  EXPECT_THROW((void)expand_dataset(path("nothing-*.parquet")), io_error);
  EXPECT_THROW((void)expand_dataset(path("missing.parquet")), io_error);
  std::filesystem::create_directories(path("empty"));
  EXPECT_THROW((void)expand_dataset(path("empty")), io_error);
}

TEST_F(DatasetTest, FilesWithDifferentSchemasAreAnError) {
  auto const a = testing::random_table({type_id::INT32}, 10, 1, 0.0, host_);
  auto const b = testing::random_table({type_id::FLOAT64}, 10, 1, 0.0, host_);
  write_csv(*a, {"x"}, path("a.csv"), {}, default_stream(), host_);
  write_csv(*b, {"y"}, path("b.csv"), {}, default_stream(), host_);
  EXPECT_THROW((void)read_csv(directory_.string(), {}, default_stream(), host_), io_error);
  if (testing::arrow_tests_enabled()) {
    write_parquet(*a, {"x"}, path("a.parquet"), {}, default_stream(), host_);
    write_parquet(*b, {"x"}, path("b.parquet"), {}, default_stream(), host_);
    EXPECT_THROW((void)read_parquet(path("*.parquet"), {}, default_stream(), host_),
                 invalid_argument);
  }
}

/// Reads every batch of `reader` into one table (an empty table when it has none).
std::unique_ptr<table> read_all(batch_reader& reader, resource_ref host) {
  std::vector<std::unique_ptr<table>> batches;
  std::vector<table_view> views;
  while (auto batch = reader.next()) {
    views.push_back(batch->view());
    batches.push_back(std::move(batch));
  }
  return concatenate(views, default_stream(), memory_resources{host});
}

TEST_F(DatasetTest, ReadersOfOneFileShareItsFooterUntilTheFileIsReplaced) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  auto const column_types = parquet_types();
  auto const names        = this->names(column_types.size());
  std::string const file  = path("shared.parquet");
  parquet_write_options options;
  options.row_group_rows = 500;
  auto const first       = every_type_table(2000, 11, column_types);
  write_parquet(*first, names, file, options, default_stream(), host_);
  // Two readers of its halves at once (as a sort's readers are), the second opened while the
  // first holds the footer; then the file is replaced while a reader of the old one is open, and
  // a new reader reads the new file's row groups, not the old footer's.
  auto front =
    open_parquet(std::vector<parquet_row_groups>{{file, 0, 2, 1000}}, {}, default_stream(), host_);
  auto back =
    open_parquet(std::vector<parquet_row_groups>{{file, 2, 4, 1000}}, {}, default_stream(), host_);
  auto const second      = every_type_table(3000, 12, column_types);
  options.row_group_rows = 1000;
  write_parquet(*second, names, path("next.parquet"), options, default_stream(), host_);
  std::filesystem::rename(path("next.parquet"), file);
  auto replaced =
    open_parquet(std::vector<parquet_row_groups>{{file, 1, 3, 2000}}, {}, default_stream(), host_);
  EXPECT_THROW((void)open_parquet(
                 std::vector<parquet_row_groups>{{file, 3, 4, 1000}}, {}, default_stream(), host_),
               invalid_argument);  // the new file has three row groups
  auto const read_front    = read_all(*front, host_);
  auto const read_back     = read_all(*back, host_);
  auto const read_replaced = read_all(*replaced, host_);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(first->view(), 0, 1000), read_front->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(first->view(), 1000, 2000), read_back->view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(second->view(), 1000, 3000), read_replaced->view());
}

TEST_F(DatasetTest, ParquetRowGroupsSplitIntoSharesOfAboutEqualRowsThatReadBackAsTheDataset) {
  if (!testing::arrow_tests_enabled()) {
    GTEST_SKIP() << testing::arrow_skip_reason();
  }
  auto const column_types = parquet_types();
  // Three files of 7, 5 and 1 row groups of up to 1000 rows (the last of each shorter), and
  // one file of no rows between them.
  std::vector<std::string> files;
  std::vector<std::unique_ptr<table>> contents;
  std::uint64_t seed = 3;
  for (std::size_t const rows :
       {std::size_t{6500}, std::size_t{0}, std::size_t{4100}, std::size_t{900}}) {
    files.push_back(path("part-" + std::to_string(files.size()) + ".parquet"));
    contents.push_back(every_type_table(rows, seed++, column_types));
    parquet_write_options options;
    options.row_group_rows = 1000;
    write_parquet(
      *contents.back(), names(column_types.size()), files.back(), options, default_stream(), host_);
  }
  std::vector<table_view> views;
  for (auto const& content : contents) {
    views.push_back(content->view());
  }
  auto const whole          = concatenate(views, default_stream(), memory_resources{host_});
  std::uint64_t const total = whole->num_rows();

  for (std::size_t const parts : {1U, 2U, 3U, 4U, 7U, 13U, 40U}) {
    SCOPED_TRACE("parts " + std::to_string(parts));
    auto const shares = split_parquet(files, parts);
    ASSERT_EQ(shares.size(), parts);
    // Every row group once, in file order, and each share within a row group of an even share.
    std::vector<std::pair<std::string, std::size_t>> seen;
    std::vector<table_view> read_views;
    std::vector<std::unique_ptr<table>> read;
    for (std::size_t k = 0; k < parts; ++k) {
      std::uint64_t rows = 0;
      for (auto const& piece : shares[k]) {
        ASSERT_LT(piece.first, piece.end);
        for (std::size_t group = piece.first; group < piece.end; ++group) {
          seen.emplace_back(piece.path, group);
        }
        rows += piece.rows;
      }
      double const even = static_cast<double>(total) / static_cast<double>(parts);
      EXPECT_LE(std::abs(static_cast<double>(rows) - even), 1000.0) << "share " << k;
      if (shares[k].empty()) {
        EXPECT_THROW((void)open_parquet(shares[k], {}, default_stream(), host_), invalid_argument);
        continue;
      }
      auto reader = open_parquet(
        shares[k], {.columns = {}, .target_batch_bytes = 16U << 10U}, default_stream(), host_);
      read.push_back(read_all(*reader, host_));
      EXPECT_EQ(read.back()->num_rows(), rows) << "share " << k;
      read_views.push_back(read.back()->view());
    }
    std::vector<std::pair<std::string, std::size_t>> expected;
    for (std::size_t f = 0; f < files.size(); ++f) {
      for (std::size_t group = 0; group * 1000 < contents[f]->num_rows(); ++group) {
        expected.emplace_back(files[f], group);
      }
    }
    EXPECT_EQ(seen, expected);
    auto const again = concatenate(read_views, default_stream(), memory_resources{host_});
    SPILLWAY_EXPECT_TABLES_EQUAL(whole->view(), again->view());
  }

  // A row group whose middle row is exactly on a boundary goes to the later share.
  std::vector<std::string> exact;
  for (std::size_t const rows : {1000U, 2000U, 1000U}) {
    exact.push_back(path("exact-" + std::to_string(exact.size()) + ".parquet"));
    write_parquet(*every_type_table(rows, seed++, column_types),
                  names(column_types.size()),
                  exact.back(),
                  {},
                  default_stream(),
                  host_);
  }
  EXPECT_EQ(split_parquet(exact, 2),
            (std::vector<std::vector<parquet_row_groups>>{
              {{exact[0], 0, 1, 1000}}, {{exact[1], 0, 1, 2000}, {exact[2], 0, 1, 1000}}}));

  // Row groups a file lacks (in a later piece too: checked at open), a share of none, and a file
  // that is not Parquet.
  EXPECT_THROW(
    (void)open_parquet(std::vector<parquet_row_groups>{{files[0], 0, 2, 0}, {files[2], 1, 6, 0}},
                       {},
                       default_stream(),
                       host_),
    invalid_argument);
  EXPECT_THROW((void)open_parquet(
                 std::vector<parquet_row_groups>{{files[0], 5, 9, 0}}, {}, default_stream(), host_),
               invalid_argument);
  EXPECT_THROW((void)open_parquet(
                 std::vector<parquet_row_groups>{{files[0], 2, 2, 0}}, {}, default_stream(), host_),
               invalid_argument);
  EXPECT_THROW((void)split_parquet(files, 0), invalid_argument);
  EXPECT_THROW((void)split_row_groups(files, {{1000}}, 2), invalid_argument);
  std::FILE* text = std::fopen(path("not.parquet").c_str(), "w");
  ASSERT_NE(text, nullptr);
  std::fputs("not a parquet file at all", text);
  std::fclose(text);
  EXPECT_THROW((void)split_parquet({path("not.parquet")}, 2), corruption_error);
  EXPECT_THROW((void)split_parquet({path("missing.parquet")}, 2), io_error);
}

/// Hands out `batches` slices of `rows`, one per call, then throws io_error when `fail` is set
/// (else returns the end). Counts the calls, from whichever thread makes them.
class scripted_reader final : public batch_reader {
 public:
  scripted_reader(table_view rows, std::size_t batches, bool fail, resource_ref host)
    : rows_(rows),
      batches_(batches),
      fail_(fail),
      host_(host),
      schema_{{"x", rows.column(0).type()}} {}
  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }
  [[nodiscard]] std::unique_ptr<table> next() override {
    std::size_t const index = calls_++;
    if (index < batches_) {
      std::size_t const begin = index * rows_.num_rows() / batches_;
      std::size_t const end   = (index + 1) * rows_.num_rows() / batches_;
      return spillway::copy(slice(rows_, begin, end), default_stream(), host_);
    }
    if (fail_) {
      throw io_error("scripted failure after " + std::to_string(batches_) + " batches");
    }
    return nullptr;
  }
  std::atomic<std::size_t>& calls() noexcept { return calls_; }

 private:
  table_view rows_;
  std::size_t batches_;
  bool fail_;
  resource_ref host_;
  table_schema schema_;
  std::atomic<std::size_t> calls_{0};
};

class ReadAheadTest : public testing::io_test {};

TEST_F(ReadAheadTest, ConcurrentReadAheadGivesTheSameBatchesInOrder) {
  auto const input = testing::random_table({type_id::INT64}, 10000, 3, 0.1, host_);
  auto source      = std::make_unique<scripted_reader>(input->view(), 37, false, host_);
  auto* counted    = source.get();
  auto reader      = read_ahead(std::move(source));
  EXPECT_EQ(reader->schema(), counted->schema());
  std::vector<std::unique_ptr<table>> batches;
  while (auto batch = reader->next()) {
    // The reader is at most one batch ahead of what was taken.
    EXPECT_LE(counted->calls().load(), batches.size() + 2);
    batches.push_back(std::move(batch));
  }
  EXPECT_EQ(batches.size(), 37U);
  EXPECT_EQ(reader->next(), nullptr) << "the end stays the end";
  std::vector<table_view> views;
  for (auto const& batch : batches) {
    views.push_back(batch->view());
  }
  SPILLWAY_EXPECT_TABLES_EQUAL(input->view(), concatenate(views, default_stream(), host_)->view());
}

TEST_F(ReadAheadTest, ConcurrentReadAheadFailureIsThrownInItsPlace) {
  auto const input = testing::random_table({type_id::INT32}, 100, 4, 0.0, host_);
  auto reader      = read_ahead(std::make_unique<scripted_reader>(input->view(), 3, true, host_));
  for (int batch = 0; batch < 3; ++batch) {
    EXPECT_NE(reader->next(), nullptr) << batch;
  }
  EXPECT_THROW((void)reader->next(), io_error);
  EXPECT_THROW((void)reader->next(), io_error) << "and at every later call";
  // Dropped while reading ahead: the destructor waits for the read in progress.
  auto early = read_ahead(std::make_unique<scripted_reader>(input->view(), 50, false, host_));
  EXPECT_NE(early->next(), nullptr);
  early.reset();
  EXPECT_THROW((void)read_ahead(nullptr), invalid_argument);
}

}  // namespace
}  // namespace spillway
