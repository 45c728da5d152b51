#include "spill/spill_store_impl.hpp"

#include <spillway/core/error.hpp>
#include <spillway/spill/spillable_table.hpp>
#include <spillway/table/pack.hpp>

#include <string>

namespace spillway {

pinned_table::pinned_table(pinned_table&& other) noexcept
  : store_(std::exchange(other.store_, nullptr)), id_(other.id_), view_(std::move(other.view_)) {}

pinned_table& pinned_table::operator=(pinned_table&& other) noexcept {
  if (this != &other) {
    reset();
    store_ = std::exchange(other.store_, nullptr);
    id_    = other.id_;
    view_  = std::move(other.view_);
  }
  return *this;
}

pinned_table::~pinned_table() { reset(); }

void pinned_table::reset() noexcept {
  if (store_ != nullptr) {
    std::exchange(store_, nullptr)->unpin(id_);
    view_ = table_view{};
  }
}

spillable_table::spillable_table(spillable_table&& other) noexcept
  : store_(std::exchange(other.store_, nullptr)),
    id_(other.id_),
    rows_(other.rows_),
    materialized_(std::move(other.materialized_)) {
  other.materialized_.reset();
}

spillable_table& spillable_table::operator=(spillable_table&& other) noexcept {
  if (this != &other) {
    release();
    store_        = std::exchange(other.store_, nullptr);
    id_           = other.id_;
    rows_         = other.rows_;
    materialized_ = std::move(other.materialized_);
    other.materialized_.reset();
  }
  return *this;
}

spillable_table::~spillable_table() { release(); }

pinned_table spillable_table::acquire() const {
  SPILLWAY_EXPECTS(store_ != nullptr, "acquire of an empty spillable_table", logic_error);
  auto acquired = store_->acquire(id_);
  return pinned_table{store_, id_, std::move(acquired.view)};
}

spill_tier spillable_table::tier() const {
  SPILLWAY_EXPECTS(store_ != nullptr, "tier of an empty spillable_table", logic_error);
  return store_->tier_of(id_);
}

void spillable_table::release() noexcept {
  materialized_.reset();
  if (store_ != nullptr) {
    std::exchange(store_, nullptr)->release(id_);
  }
}

std::unique_ptr<table> spillable_table::take_if_resident() {
  SPILLWAY_EXPECTS(store_ != nullptr, "take_if_resident of an empty spillable_table", logic_error);
  if (materialized_) {
    return nullptr;  // pinned by materialize()
  }
  auto taken = store_->take_resident(id_);
  if (taken != nullptr) {
    store_ = nullptr;
  }
  return taken;
}

void spillable_table::make_spillable() noexcept { materialized_.reset(); }

table_view const& spillable_table::materialize() {
  if (!materialized_) {
    materialized_.emplace(acquire());
  }
  return materialized_->view();
}

std::pair<spillable_table, spillable_table> spillable_table::split_at(std::size_t row) {
  SPILLWAY_EXPECTS(store_ != nullptr, "split_at of an empty spillable_table", logic_error);
  SPILLWAY_EXPECTS(row > 0 && row < rows_,
                   "spillable_table::split_at(" + std::to_string(row) + ") of " +
                     std::to_string(rows_) + " rows must leave two non-empty pieces",
                   invalid_argument);
  auto* const store            = store_;
  auto const [priority, owner] = store->priority_and_owner(id_);
  std::pair<spillable_table, spillable_table> halves;
  {
    auto const pinned = acquire();
    // Both halves go to the host tier when it has room (no device memory needed).
    halves.first  = store->add_table_slice(slice(pinned.view(), 0, row), priority, owner);
    halves.second = store->add_table_slice(slice(pinned.view(), row, rows_), priority, owner);
  }
  release();
  return halves;
}

}  // namespace spillway
