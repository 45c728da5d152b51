#include "io/io_test_support.hpp"

#include <spillway/core/error.hpp>
#include <spillway/io/batch_reader.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <memory>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

namespace spillway {
namespace {

/// Rows [first, first + rows) of one INT64 column holding the row numbers, in `batches` batches;
/// then the end, or an io_error when `fail`. Counts the batches it made in `made`.
class numbered_reader final : public batch_reader {
 public:
  numbered_reader(std::int64_t first,
                  std::size_t rows,
                  std::size_t batches,
                  bool fail,
                  std::atomic<std::size_t>& made,
                  resource_ref host)
    : first_(first), rows_(rows), batches_(batches), fail_(fail), made_(made), host_(host) {}
  [[nodiscard]] table_schema const& schema() const noexcept override { return schema_; }
  [[nodiscard]] std::unique_ptr<table> next() override {
    if (index_ == batches_) {
      if (fail_) {
        throw io_error("numbered_reader: failure after " + std::to_string(batches_) + " batches");
      }
      return nullptr;
    }
    std::size_t const begin = index_ * rows_ / batches_;
    std::size_t const end   = (index_ + 1) * rows_ / batches_;
    ++index_;
    std::vector<std::int64_t> values(end - begin);
    std::iota(values.begin(), values.end(), first_ + static_cast<std::int64_t>(begin));
    std::vector<std::unique_ptr<column>> columns;
    columns.push_back(testing::make_fixed_column(data_type{type_id::INT64}, values, {}, host_));
    made_.fetch_add(1);
    return std::make_unique<table>(std::move(columns));
  }

 private:
  std::int64_t first_;
  std::size_t rows_;
  std::size_t batches_;
  bool fail_;
  std::atomic<std::size_t>& made_;
  resource_ref host_;
  table_schema schema_{{"x", data_type{type_id::INT64}}};
  std::size_t index_ = 0;
};

class ParallelReaderTest : public testing::io_test {
 protected:
  table_schema const schema_{{"x", data_type{type_id::INT64}}};
  std::atomic<std::size_t> made_{0};

  /// Piece p: rows [p * ROWS, (p + 1) * ROWS) in 1 + p % 5 batches; `failing` fails at its end.
  piece_opener pieces(std::size_t failing = SIZE_MAX) {
    return [this, failing](std::size_t piece) {
      return std::make_unique<numbered_reader>(static_cast<std::int64_t>(piece * ROWS),
                                               ROWS,
                                               1 + piece % 5,
                                               piece == failing,
                                               made_,
                                               host_);
    };
  }

  static constexpr std::size_t ROWS = 1000;
};

TEST_F(ParallelReaderTest, ConcurrentPiecesReadSideBySideGiveEveryRowOnceEachPieceInOrder) {
  constexpr std::size_t PIECES = 23;
  for (std::size_t const threads : {1U, 2U, 3U, 8U, 40U}) {
    for (std::size_t const max_ready : {1U, 4U}) {
      made_       = 0;
      auto reader = read_in_parallel(schema_, PIECES, pieces(), threads, max_ready);
      EXPECT_EQ(reader->schema(), schema_);
      std::vector<std::int64_t> last_of_piece(PIECES, -1);
      std::vector<std::int64_t> rows;
      std::size_t taken = 0;
      while (auto batch = reader->next()) {
        ++taken;
        // Never more batches made than taken, waiting, and being read.
        EXPECT_LE(made_.load(), taken + max_ready + std::min(threads, PIECES));
        auto const* values      = batch->view().column(0).data<std::int64_t>();
        std::size_t const count = batch->num_rows();
        ASSERT_GT(count, 0U);
        auto const piece = static_cast<std::size_t>(values[0]) / ROWS;
        EXPECT_GT(values[0], last_of_piece[piece]) << "piece " << piece << "'s batches in order";
        last_of_piece[piece] = values[count - 1];
        rows.insert(rows.end(), values, values + count);
      }
      EXPECT_EQ(reader->next(), nullptr) << "the end stays the end";
      std::sort(rows.begin(), rows.end());
      std::vector<std::int64_t> expected(PIECES * ROWS);
      std::iota(expected.begin(), expected.end(), 0);
      EXPECT_EQ(rows, expected) << threads << " threads, " << max_ready << " ready";
    }
  }
}

TEST_F(ParallelReaderTest, ConcurrentFailureOfAnyPieceIsThrownAndTheThreadsStop) {
  for (std::size_t const threads : {1U, 4U}) {
    auto reader = read_in_parallel(schema_, 12, pieces(7), threads, 2);
    bool failed = false;
    try {
      while (reader->next() != nullptr) {
      }
    } catch (io_error const& error) {
      failed = true;
      EXPECT_NE(std::string{error.what()}.find("failure after"), std::string::npos);
    }
    EXPECT_TRUE(failed) << threads << " threads";
    EXPECT_THROW((void)reader->next(), io_error) << "and at every later call";
  }
  // A piece that cannot be opened fails the same way.
  auto const refusing = [this](std::size_t piece) -> std::unique_ptr<batch_reader> {
    if (piece == 3) {
      throw invalid_argument("piece 3 has other columns");
    }
    return pieces()(piece);
  };
  auto reader = read_in_parallel(schema_, 6, refusing, 3, 1);
  EXPECT_THROW(
    {
      while (reader->next() != nullptr) {
      }
    },
    invalid_argument);
}

TEST_F(ParallelReaderTest, ConcurrentReaderDroppedWhileReadingWaitsForItsThreads) {
  auto reader = read_in_parallel(schema_, 50, pieces(), 6, 1);
  EXPECT_NE(reader->next(), nullptr);
  reader.reset();  // threads blocked on a full queue, or reading, stop and are joined
  auto none = read_in_parallel(schema_, 0, pieces(), 4, 1);
  EXPECT_EQ(none->next(), nullptr) << "no pieces: the end at once";
}

TEST_F(ParallelReaderTest, RefusesNoOpenerNoThreadsOrNoRoomForABatch) {
  EXPECT_THROW((void)read_in_parallel(schema_, 2, piece_opener{}, 1, 1), invalid_argument);
  EXPECT_THROW((void)read_in_parallel(schema_, 2, pieces(), 0, 1), invalid_argument);
  EXPECT_THROW((void)read_in_parallel(schema_, 2, pieces(), 1, 0), invalid_argument);
}

}  // namespace
}  // namespace spillway
