/**
 * @file with_retry_test.cpp
 * @brief `with_retry` rolls back and retries on retry_oom, splits on split_and_retry_oom (pieces
 * and results in order), gives up on one row with a final out_of_memory naming the sizes, and
 * binds the task; `with_retry_no_split` refuses to split; `copy_to_device` copies under it.
 *
 * Most tests use a task that is not registered with the coordinator: then a roll back is
 * followed by a retry at once (the protocol, tested in oom_coordinator_test.cpp, is not engaged).
 */
#include "lease/watchdog.hpp"
#include "retry/oom_test_device.hpp"
#include "testing/expect_tables_equal.hpp"
#include "testing/table_generators.hpp"

#include <spillway/core/error.hpp>
#include <spillway/lease/task_context.hpp>
#include <spillway/memory/host_memory_resource.hpp>
#include <spillway/retry/copy_to_device.hpp>
#include <spillway/retry/oom_errors.hpp>
#include <spillway/retry/oom_injection.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/retry/table_input.hpp>
#include <spillway/retry/with_retry.hpp>
#include <spillway/table/concatenate.hpp>
#include <spillway/table/copy.hpp>

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace spillway {
namespace {

constexpr std::size_t CAPACITY = 1 << 20;

retry_oom make_retry_oom(task_id task) {
  return retry_oom{"test: roll back", task, 4096, 1024, 8192, 1};
}

split_and_retry_oom make_split_oom(task_id task) {
  return split_and_retry_oom{"test: split", task, 4096, 1024, 8192, 1};
}

class WithRetry : public ::testing::Test {
 protected:
  WithRetry()
    : source_(testing::random_table(
        {data_type{type_id::INT32}, data_type{type_id::STRING}, data_type{type_id::FLOAT64}},
        ROWS,
        42,
        0.2,
        host_)) {}

  /// A copy of the piece's rows, in host memory.
  std::unique_ptr<table> copy_of(table_input const& piece) {
    return copy(piece.materialize(), default_stream(), host_);
  }

  /// The concatenation of `pieces`, in host memory.
  std::unique_ptr<table> concatenated(std::vector<std::unique_ptr<table>> const& pieces) {
    std::vector<table_view> views;
    for (auto const& piece : pieces) {
      views.push_back(piece->view());
    }
    return concatenate(views, default_stream(), host_);
  }

  static constexpr std::size_t ROWS = 10;
  host_memory_resource host_;
  std::shared_ptr<table const> source_;
  test::oom_test_device device_{CAPACITY};
  task_context task_{device_.arbiter, task_id{1}};
};

TEST_F(WithRetry, StepThatFailsKTimesIsRetriedOnTheSameInputUntilItSucceeds) {
  std::size_t calls = 0;
  auto const results =
    with_retry(device_.coordinator, task_, table_input{source_}, [&](table_input& piece) {
      // Before each retry the input was made spillable: the roll-back point.
      EXPECT_EQ(piece.spillable_calls(), calls);
      EXPECT_EQ(piece.rows(), ROWS) << "a retry runs the same, whole input";
      if (++calls <= 3) {
        throw make_retry_oom(task_.id());
      }
      return copy_of(piece);
    });
  EXPECT_EQ(calls, 4U);
  ASSERT_EQ(results.size(), 1U);
  SPILLWAY_EXPECT_TABLES_EQUAL(source_->view(), results[0]->view());
}

TEST_F(WithRetry, SplitRequestsProcessPiecesAndReturnResultsInOrder) {
  std::vector<std::pair<std::size_t, std::size_t>> attempts;
  auto const results =
    with_retry(device_.coordinator, task_, table_input{source_}, [&](table_input& piece) {
      attempts.emplace_back(piece.begin(), piece.end());
      if (piece.rows() > 3) {
        throw make_split_oom(task_.id());
      }
      return copy_of(piece);
    });
  // 10 -> 5 + 5; 5 -> 2 + 3; depth first, in row order.
  using range = std::pair<std::size_t, std::size_t>;
  EXPECT_EQ(attempts,
            (std::vector<range>{{0, 10}, {0, 5}, {0, 2}, {2, 5}, {5, 10}, {5, 7}, {7, 10}}));
  ASSERT_EQ(results.size(), 4U);
  EXPECT_EQ(results[0]->num_rows(), 2U);
  EXPECT_EQ(results[1]->num_rows(), 3U);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(source_->view(), 5, 7), results[2]->view());
  auto const whole = concatenated(results);
  SPILLWAY_EXPECT_TABLES_EQUAL(source_->view(), whole->view());
}

TEST_F(WithRetry, SplitsDownToSingleRows) {
  auto const results =
    with_retry(device_.coordinator, task_, table_input{source_}, [&](table_input& piece) {
      if (piece.rows() > 1) {
        throw make_split_oom(task_.id());
      }
      return copy_of(piece);
    });
  ASSERT_EQ(results.size(), ROWS);
  for (std::size_t row = 0; row < ROWS; ++row) {
    SPILLWAY_EXPECT_TABLES_EQUAL(slice(source_->view(), row, row + 1), results[row]->view());
  }
}

TEST_F(WithRetry, OneRowThatStillDoesNotFitIsAFinalOutOfMemoryNamingTheSizes) {
  table_input const one_row = table_input{source_}.split_at(1).first;
  std::size_t calls         = 0;
  try {
    static_cast<void>(with_retry(device_.coordinator, task_, one_row, [&](table_input&) -> int {
      ++calls;
      throw make_split_oom(task_.id());
    }));
    FAIL() << "a one-row input that cannot fit succeeded";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(typeid(error), typeid(out_of_memory)) << "final, not retryable";
    std::string const message = error.what();
    EXPECT_NE(message.find("task 1"), std::string::npos) << message;
    EXPECT_NE(message.find("1 row"), std::string::npos) << message;
    EXPECT_NE(message.find("4096"), std::string::npos) << message;
    EXPECT_NE(message.find("1024"), std::string::npos) << message;
    EXPECT_NE(message.find("8192"), std::string::npos) << message;
    EXPECT_EQ(error.requested_bytes(), 4096U);
    EXPECT_EQ(error.available_bytes(), 1024U);
    EXPECT_EQ(error.capacity_bytes(), 8192U);
  }
  EXPECT_EQ(calls, 1U);
}

TEST_F(WithRetry, VoidStepRunsEveryPieceAndReturnsNothing) {
  std::vector<std::size_t> rows_done;
  static_assert(std::is_void_v<decltype(with_retry(
                  device_.coordinator, task_, test::range_input{1}, [](test::range_input&) {}))>);
  with_retry(device_.coordinator, task_, test::range_input{6}, [&](test::range_input& piece) {
    if (piece.rows() > 2) {
      throw make_split_oom(task_.id());
    }
    rows_done.push_back(piece.begin());
  });
  EXPECT_EQ(rows_done, (std::vector<std::size_t>{0, 1, 3, 4}));
}

TEST_F(WithRetry, CustomSplitPolicyDecidesThePieces) {
  std::vector<std::size_t> sizes;
  split_policy<test::range_input> const peel_one = [](test::range_input& input) {
    return input.split_at(1);
  };
  auto const results = with_retry(
    device_.coordinator,
    task_,
    test::range_input{4},
    [&](test::range_input& piece) {
      sizes.push_back(piece.rows());
      if (piece.rows() > 2) {
        throw make_split_oom(task_.id());
      }
      return piece.rows();
    },
    peel_one);
  EXPECT_EQ(sizes, (std::vector<std::size_t>{4, 1, 3, 1, 2}));
  EXPECT_EQ(results, (std::vector<std::size_t>{1, 1, 2}));
}

TEST_F(WithRetry, EachAttemptRunsBoundToTheTaskInsideARetryBlock) {
  EXPECT_EQ(task_context::current(), nullptr);
  std::size_t calls = 0;
  with_retry(device_.coordinator, task_, test::range_input{2}, [&](test::range_input& piece) {
    EXPECT_EQ(task_context::current(), &task_);
    EXPECT_TRUE(in_retry_block());
    EXPECT_EQ(piece.materialize_calls(), calls + 1) << "materialized before every attempt";
    if (++calls == 1) {
      throw make_retry_oom(task_.id());
    }
  });
  EXPECT_EQ(calls, 2U);
  EXPECT_EQ(task_context::current(), nullptr);
  EXPECT_FALSE(in_retry_block());
}

TEST_F(WithRetry, OtherExceptionsPassThroughWithoutRetrying) {
  std::size_t calls = 0;
  EXPECT_THROW(with_retry(device_.coordinator,
                          task_,
                          test::range_input{2},
                          [&](test::range_input&) {
                            ++calls;
                            throw std::runtime_error("bad input");
                          }),
               std::runtime_error);
  EXPECT_EQ(calls, 1U);
  EXPECT_EQ(task_context::current(), nullptr) << "the binding ends on every exit";
  EXPECT_FALSE(in_retry_block());
}

TEST_F(WithRetry, NoSplitRetriesAndReturnsTheSingleResult) {
  std::size_t calls = 0;
  auto const result =
    with_retry_no_split(device_.coordinator, task_, table_input{source_}, [&](table_input& piece) {
      if (++calls <= 2) {
        throw make_retry_oom(task_.id());
      }
      return copy_of(piece);
    });
  static_assert(std::is_same_v<std::remove_cvref_t<decltype(result)>, std::unique_ptr<table>>);
  EXPECT_EQ(calls, 3U);
  SPILLWAY_EXPECT_TABLES_EQUAL(source_->view(), result->view());
}

TEST_F(WithRetry, NoSplitTurnsASplitRequestIntoAClearOutOfMemory) {
  try {
    with_retry_no_split(device_.coordinator, task_, test::range_input{8}, [&](test::range_input&) {
      throw make_split_oom(task_.id());
    });
    FAIL() << "with_retry_no_split split its input";
  } catch (out_of_memory const& error) {
    EXPECT_EQ(typeid(error), typeid(out_of_memory));
    std::string const message = error.what();
    EXPECT_NE(message.find("cannot split"), std::string::npos) << message;
    EXPECT_NE(message.find("8 row"), std::string::npos) << message;
    EXPECT_NE(message.find("4096"), std::string::npos) << message;
  }
}

TEST_F(WithRetry, CountsEachAttemptRolledBackAsARetryOrASplit) {
  // Of 10 rows: the whole input fails twice and is retried, then asks to split; the pieces of 5
  // fail once each and are retried, then split again; the pieces of 2 and 3 succeed.
  std::map<std::pair<std::size_t, std::size_t>, std::size_t> failures;
  retry_counts counted{1, 2};  // added to
  auto const results = with_retry(
    device_.coordinator,
    task_,
    table_input{source_},
    [&](table_input& piece) {
      auto& failed = failures[{piece.begin(), piece.end()}];
      ++failed;
      if (piece.rows() == ROWS && failed <= 2) {
        throw make_retry_oom(task_.id());
      }
      if (piece.rows() == ROWS / 2 && failed == 1) {
        throw make_retry_oom(task_.id());
      }
      if (piece.rows() > 3) {
        throw make_split_oom(task_.id());
      }
      return copy_of(piece);
    },
    split_in_half<table_input>,
    &counted);
  ASSERT_EQ(results.size(), 4U);
  EXPECT_EQ(counted.retries, 1U + 2U + 2U);
  EXPECT_EQ(counted.splits, 2U + 3U) << "10 -> 5 + 5, then each 5 -> 2 + 3 (2 counted before)";

  retry_counts alone;
  std::size_t calls = 0;
  with_retry_no_split(
    device_.coordinator,
    task_,
    table_input{source_},
    [&](table_input&) {
      if (++calls <= 3) {
        throw make_retry_oom(task_.id());
      }
    },
    &alone);
  EXPECT_EQ(alone.retries, 3U);
  EXPECT_EQ(alone.splits, 0U);

  // Counted up to the failure when the step fails for good.
  retry_counts failed;
  EXPECT_THROW(with_retry(
                 device_.coordinator,
                 task_,
                 test::range_input{2},
                 [&](test::range_input&) -> std::size_t { throw make_split_oom(task_.id()); },
                 split_in_half<test::range_input>,
                 &failed),
               out_of_memory);
  EXPECT_EQ(failed.splits, 1U) << "2 -> 1 + 1, then the first row cannot split";
}

TEST_F(WithRetry, RegisteredTaskAloneRetriesOnceAfterARollBackThenSplits) {
  // With the protocol engaged, a lone task that rolled back is in a deadlock by itself. Its roll
  // back freed what it held, and nothing has allocated since: it runs its input once more (a
  // passing failure is over), and splits only when that fails too.
  test::run_with_watchdog([&] {
    oom_coordinator::registration const registered{device_.coordinator, task_};
    for (std::size_t const failures : {1U, 2U}) {
      std::vector<std::size_t> sizes;
      std::size_t const splits_before = device_.coordinator.statistics().splits;
      auto const results =
        with_retry(device_.coordinator, task_, test::range_input{8}, [&](test::range_input& piece) {
          sizes.push_back(piece.rows());
          if (sizes.size() <= failures) {
            throw make_retry_oom(task_.id());
          }
          return piece.rows();
        });
      if (failures == 1) {
        EXPECT_EQ(sizes, (std::vector<std::size_t>{8, 8}));
        EXPECT_EQ(results, (std::vector<std::size_t>{8}));
      } else {
        EXPECT_EQ(sizes, (std::vector<std::size_t>{8, 8, 4, 4}));
        EXPECT_EQ(results, (std::vector<std::size_t>{4, 4}));
      }
      EXPECT_EQ(device_.coordinator.state(task_.id()), oom_state::RUNNING);
      EXPECT_EQ(device_.coordinator.statistics().splits - splits_before, failures - 1);
    }
  });
}

TEST_F(WithRetry, RegisteredTaskAloneRetriesAStepThatCannotSplitOnceAfterARollBack) {
  // A passing failure of a step that cannot split (one row, or with_retry_no_split) is not final.
  test::run_with_watchdog([&] {
    oom_coordinator::registration const registered{device_.coordinator, task_};
    std::size_t calls = 0;
    auto const rows =
      with_retry(device_.coordinator, task_, test::range_input{1}, [&](test::range_input& piece) {
        if (++calls == 1) {
          throw make_retry_oom(task_.id());
        }
        return piece.rows();
      });
    EXPECT_EQ(rows, (std::vector<std::size_t>{1}));
    calls             = 0;
    auto const result = with_retry_no_split(
      device_.coordinator, task_, test::range_input{8}, [&](test::range_input& piece) {
        if (++calls == 1) {
          throw make_retry_oom(task_.id());
        }
        return piece.rows();
      });
    EXPECT_EQ(result, 8U);
    EXPECT_EQ(calls, 2U);
  });
}

TEST_F(WithRetry, RegisteredTaskWithOneRowThatCannotRollBackFurtherFails) {
  test::run_with_watchdog([&] {
    oom_coordinator::registration const registered{device_.coordinator, task_};
    EXPECT_THROW(with_retry(device_.coordinator,
                            task_,
                            test::range_input{1},
                            [&](test::range_input&) { throw make_retry_oom(task_.id()); }),
                 out_of_memory);
  });
}

TEST_F(WithRetry, CopyToDeviceRetriesAndSplitsTheCopyOfRowsItDoesNotOwn) {
  // The first copy of the whole input asks to split; the next allocation (of the first half)
  // fails once and is retried; the rest copy.
  auto const rows = slice(source_->view(), 1, ROWS);
  retry_counts counted;
  device_.adaptor.testing_inject_oom(oom_injection{task_.id(), injected_oom_kind::SPLIT, 0, 1});
  auto pieces = copy_to_device(
    table_input{rows}, device_.coordinator, task_, default_stream(), device_.adaptor, &counted);
  EXPECT_EQ(device_.adaptor.injected_failures(), 1U);
  ASSERT_EQ(pieces.size(), 2U);
  EXPECT_EQ(pieces[0]->num_rows(), (ROWS - 1) / 2);
  SPILLWAY_EXPECT_TABLES_EQUAL(rows, concatenated(pieces)->view());
  EXPECT_EQ(counted.splits, 1U);
  EXPECT_EQ(counted.retries, 0U);
  pieces.clear();

  // An owned batch is taken over; a retry copies it again whole.
  device_.adaptor.testing_inject_oom(oom_injection{task_.id(), injected_oom_kind::RETRY, 0, 1});
  auto owned = copy_to_device(copy(source_->view(), default_stream(), host_),
                              device_.coordinator,
                              task_,
                              default_stream(),
                              device_.adaptor,
                              &counted);
  ASSERT_EQ(owned.size(), 1U);
  SPILLWAY_EXPECT_TABLES_EQUAL(source_->view(), owned[0]->view());
  EXPECT_EQ(counted.retries, 1U);
  EXPECT_EQ(device_.adaptor.injected_failures(), 2U);
}

}  // namespace
}  // namespace spillway
