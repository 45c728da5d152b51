#include "retry_guards.hpp"

#include <spillway/retry/retry_coverage.hpp>

#include <cstdio>
#include <string>

namespace spillway::cli {
namespace {

/// Call sites written out in full; the rest are counted.
constexpr std::size_t SHOWN_CALL_SITES = 8;

}  // namespace

void report_retry_coverage(std::string_view command, nlohmann::ordered_json& summary) {
  if (!retry_coverage_enabled()) {
    return;
  }
  auto const records = unprotected_allocations();
  std::fprintf(stderr,
               "%.*s: %zu device allocation(s) outside a retry block\n",
               static_cast<int>(command.size()),
               command.data(),
               records.size());
  for (std::size_t index = 0; index < records.size() && index < SHOWN_CALL_SITES; ++index) {
    auto const& record = records[index];
    std::fprintf(stderr,
                 "  %s, %zu bytes, at:\n%s\n",
                 to_string(record.task).c_str(),
                 record.bytes,
                 record.call_site.c_str());
  }
  if (records.size() > SHOWN_CALL_SITES) {
    std::fprintf(stderr, "  ... and %zu more\n", records.size() - SHOWN_CALL_SITES);
  }
  summary["unprotected_allocations"] = records.size();
}

}  // namespace spillway::cli
