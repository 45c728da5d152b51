#include "spill/spill_test_fixture.hpp"

#include <spillway/retry/split_policy.hpp>
#include <spillway/spill/spillable_table.hpp>

#include <gtest/gtest.h>

#include <testing/expect_tables_equal.hpp>

namespace spillway::testing {
namespace {

static_assert(retryable_input<spillable_table>, "with_retry's inputs include spillable tables");
static_assert(!std::is_copy_constructible_v<spillable_table>);
static_assert(!std::is_copy_constructible_v<pinned_table>);

class SpillableTableTest : public spill_fixture {};

TEST_F(SpillableTableTest, MaterializePinsUntilMakeSpillable) {
  spill_store store(options());
  auto [device_table, expected] = make_table(100, 1);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  (void)store.spill(1, spill_tier::DEVICE);
  ASSERT_EQ(handle.tier(), spill_tier::HOST);
  auto const& view = handle.materialize();
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), view);
  EXPECT_EQ(store.spill(1_GiB, spill_tier::DEVICE), 0U);  // pinned by materialize
  handle.make_spillable();
  EXPECT_GT(store.spill(1_GiB, spill_tier::DEVICE), 0U);
  EXPECT_EQ(handle.tier(), spill_tier::HOST);
}

TEST_F(SpillableTableTest, SplitAtGivesTwoHostHalvesInOrder) {
  spill_store store(options());
  auto [device_table, expected] = make_table(101, 2);
  auto handle                   = store.make_spillable(std::move(device_table), 4, task_id{7});
  EXPECT_EQ(handle.rows(), 101U);
  EXPECT_THROW((void)handle.split_at(0), invalid_argument);
  EXPECT_THROW((void)handle.split_at(101), invalid_argument);
  auto halves = split_in_half(handle);
  EXPECT_FALSE(handle.valid());
  EXPECT_EQ(halves.first.rows(), 50U);
  EXPECT_EQ(halves.second.rows(), 51U);
  EXPECT_EQ(halves.first.tier(), spill_tier::HOST);
  EXPECT_EQ(device_.used_bytes(), 0U);
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 0, 50), halves.first.acquire().view());
  SPILLWAY_EXPECT_TABLES_EQUAL(slice(expected->view(), 50, 101), halves.second.acquire().view());
  // The halves keep the owner: the task's hook spills them.
  EXPECT_GT(store.spill_task(task_id{7}, 1_GiB), 0U);
  EXPECT_EQ(halves.second.tier(), spill_tier::HOST);
}

TEST_F(SpillableTableTest, MovedFromHandleIsEmptyAndTheTargetOwnsTheData) {
  spill_store store(options());
  auto first               = store.make_spillable(make_table(10, 3).first, 0);
  auto second              = store.make_spillable(make_table(10, 4).first, 0);
  std::size_t const before = device_.used_bytes();
  second                   = std::move(first);  // frees second's data
  EXPECT_FALSE(first.valid());                  // NOLINT(bugprone-use-after-move)
  EXPECT_LT(device_.used_bytes(), before);
  EXPECT_EQ(second.rows(), 10U);
  EXPECT_THROW((void)first.acquire(), logic_error);
}

TEST_F(SpillableTableTest, ReleasingWhilePinnedFreesWhenTheViewGoes) {
  spill_store store(options());
  auto [device_table, expected] = make_table(50, 5);
  auto handle                   = store.make_spillable(std::move(device_table), 0);
  auto pinned                   = handle.acquire();
  handle.release();
  EXPECT_GT(device_.used_bytes(), 0U);
  SPILLWAY_EXPECT_TABLES_EQUAL(expected->view(), pinned.view());
  pinned.reset();
  EXPECT_EQ(device_.used_bytes(), 0U);
}

}  // namespace
}  // namespace spillway::testing
