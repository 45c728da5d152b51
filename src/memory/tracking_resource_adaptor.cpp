#include <spillway/core/logging.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/tracking_resource_adaptor.hpp>

#include <algorithm>
#include <sstream>

namespace spillway {
namespace {

std::string const empty_tag;
thread_local std::string const* current_tag = &empty_tag;

}  // namespace

scoped_allocation_tag::scoped_allocation_tag(std::string tag)
  : tag_(std::move(tag)), previous_(current_tag) {
  current_tag = &tag_;
}

scoped_allocation_tag::~scoped_allocation_tag() { current_tag = previous_; }

std::string const& scoped_allocation_tag::current() { return *current_tag; }

tracking_resource_adaptor::tracking_resource_adaptor(resource_ref upstream, std::string name)
  : upstream_(upstream), name_(std::move(name)) {}

tracking_resource_adaptor::~tracking_resource_adaptor() {
  std::string const report = leak_report();
  if (!report.empty()) {
    log(log_level::WARN, report);
  }
}

void* tracking_resource_adaptor::do_allocate(std::size_t bytes,
                                             std::size_t alignment,
                                             stream_view stream) {
  void* pointer = upstream_.allocate(bytes, alignment, stream);
  if (pointer == nullptr) {
    return pointer;
  }
  try {
    scoped_lock lock{mutex_};
    allocations_.emplace(
      pointer,
      tracked_allocation{
        pointer, bytes, alignment, next_sequence_++, scoped_allocation_tag::current()});
    outstanding_bytes_ += bytes;
  } catch (...) {
    upstream_.deallocate(pointer, bytes, alignment, stream);
    throw;
  }
  return pointer;
}

void tracking_resource_adaptor::do_deallocate(void* pointer,
                                              std::size_t bytes,
                                              std::size_t alignment,
                                              stream_view stream) noexcept {
  if (pointer != nullptr) {
    scoped_lock lock{mutex_};
    auto const found = allocations_.find(pointer);
    if (found == allocations_.end()) {
      ++unknown_frees_;
    } else {
      outstanding_bytes_ -= found->second.bytes;
      allocations_.erase(found);
    }
  }
  upstream_.deallocate(pointer, bytes, alignment, stream);
}

std::vector<tracked_allocation> tracking_resource_adaptor::outstanding() const {
  std::vector<tracked_allocation> out;
  {
    scoped_lock lock{mutex_};
    out.reserve(allocations_.size());
    for (auto const& [pointer, record] : allocations_) {
      out.push_back(record);
    }
  }
  std::sort(
    out.begin(), out.end(), [](auto const& a, auto const& b) { return a.sequence < b.sequence; });
  return out;
}

std::size_t tracking_resource_adaptor::outstanding_bytes() const {
  scoped_lock lock{mutex_};
  return outstanding_bytes_;
}

std::size_t tracking_resource_adaptor::unknown_frees() const {
  scoped_lock lock{mutex_};
  return unknown_frees_;
}

std::string tracking_resource_adaptor::leak_report() const {
  auto records = outstanding();
  if (records.empty()) {
    return {};
  }
  std::stable_sort(
    records.begin(), records.end(), [](auto const& a, auto const& b) { return a.bytes > b.bytes; });
  std::size_t total = 0;
  for (auto const& record : records) {
    total += record.bytes;
  }
  std::ostringstream out;
  out << "memory leak in resource '" << name_ << "': " << records.size()
      << " allocation(s) never freed, " << total << " bytes (" << format_bytes(total) << ")";
  for (auto const& record : records) {
    out << "\n  #" << record.sequence << " " << record.bytes << " bytes at " << record.pointer
        << " tag '" << record.tag << "'";
  }
  return out.str();
}

}  // namespace spillway
