#include "report_gauges.hpp"

#include <utility>

namespace spillway::cli {

run_gauges environment_gauges(std::function<device_environment&()> environment,
                              std::function<std::size_t()> rows_done,
                              std::function<std::size_t()> bytes_done) {
  run_gauges gauges;
  gauges.device_bytes = [environment] { return environment().device_used_bytes(); };
  gauges.host_bytes   = [environment] { return environment().store().bytes_on(spill_tier::HOST); };
  gauges.disk_bytes   = [environment] { return environment().store().bytes_on(spill_tier::DISK); };
  gauges.rows_done    = std::move(rows_done);
  gauges.bytes_done   = std::move(bytes_done);
  return gauges;
}

}  // namespace spillway::cli
