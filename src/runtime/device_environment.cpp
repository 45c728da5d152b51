#include <spillway/runtime/device_environment.hpp>

#include <algorithm>

namespace spillway {
namespace {

spill_store_options store_options(resource_ref device,
                                  resource_ref host_tier,
                                  device_environment_options const& options) {
  spill_store_options out{device, host_tier};
  out.host_budget = options.host_memory;
  out.spill_root  = options.spill_root;
  out.disk_codec  = options.disk_codec;
  out.events      = options.events;
  return out;
}

}  // namespace

device_environment::device_environment(device_environment_options const& options)
  : device_memory_(options.device_memory),
    host_memory_(options.host_memory),
    // Freed host-tier blocks stay mapped for the next spill, up to the tier's budget.
    host_(std::min(options.host_memory, emulated_device_memory_resource::MAX_CACHED_BYTES)),
    device_(options.device_memory),
    coordinator_(options.events),
    device_with_spill_(device_, coordinator_, options.device_memory, options.events),
    arbiter_(options.device_memory, options.events),
    store_(store_options(device_with_spill_, host_tier_, options)) {
  coordinator_.set_spill_function(
    [this](std::size_t bytes) -> std::size_t { return store_.spill(bytes, spill_tier::DEVICE); });
}

device_environment::~device_environment() {
  // The store goes first (members in reverse): nothing may ask it to spill from then on.
  coordinator_.set_spill_function([](std::size_t) -> std::size_t { return 0; });
}

device_task::device_task(device_environment& environment, task_id id, int priority)
  : task_(environment.arbiter(), id, priority), registration_(environment.coordinator(), task_) {
  task_.set_spill_hook(environment.store().make_spill_hook(id));
}

}  // namespace spillway
