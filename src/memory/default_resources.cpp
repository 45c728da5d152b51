#include <spillway/core/error.hpp>
#include <spillway/core/units.hpp>
#include <spillway/memory/default_resources.hpp>
#include <spillway/memory/emulated_device_memory_resource.hpp>
#include <spillway/memory/host_memory_resource.hpp>

#include <atomic>
#include <cstdlib>
#include <limits>
#include <string>

namespace spillway {
namespace {

bool switch_from_environment() {
  char const* value = std::getenv("SPILLWAY_ERROR_ON_DEFAULT_RESOURCE");
  return value != nullptr && std::string{value} != "0" && std::string{value} != "";
}

std::atomic<bool>& validation_switch() {
  static std::atomic<bool> enabled{switch_from_environment()};
  return enabled;
}

[[noreturn]] void throw_default_use(char const* what, source_site site) {
  throw logic_error(std::string{"default memory resource used while the validation switch "
                                "(SPILLWAY_ERROR_ON_DEFAULT_RESOURCE) is on: "} +
                    what + " at " + site.to_string() + "; pass memory_resources explicitly");
}

/**
 * The process default: forwards to an upstream, but refuses to allocate while the validation
 * switch is on, so that a path which captured the default before the switch is caught too.
 */
class process_default_resource final : public memory_resource {
 public:
  process_default_resource(memory_resource& upstream, char const* name)
    : upstream_(upstream), name_(name) {}

 private:
  void* do_allocate(std::size_t bytes, std::size_t alignment, stream_view stream) override {
    if (validation_switch().load(std::memory_order_relaxed)) {
      throw logic_error(std::string{"allocation of "} + std::to_string(bytes) +
                        " bytes from the process default " + name_ +
                        " resource while the validation switch "
                        "(SPILLWAY_ERROR_ON_DEFAULT_RESOURCE) is on; a caller captured the "
                        "default instead of passing memory_resources");
    }
    return upstream_.allocate(bytes, alignment, stream);
  }
  void do_deallocate(void* pointer,
                     std::size_t bytes,
                     std::size_t alignment,
                     stream_view stream) noexcept override {
    upstream_.deallocate(pointer, bytes, alignment, stream);
  }
  [[nodiscard]] memory_kind do_kind() const noexcept override { return upstream_.kind(); }

  memory_resource& upstream_;
  char const* name_;
};

std::size_t device_capacity_from_environment() {
  char const* value = std::getenv("SPILLWAY_DEVICE_MEMORY");
  if (value == nullptr || *value == '\0') {
    return std::numeric_limits<std::size_t>::max();
  }
  return parse_bytes(value);
}

struct defaults {
  host_memory_resource host_upstream;
  emulated_device_memory_resource device_upstream{device_capacity_from_environment()};
  process_default_resource host{host_upstream, "host"};
  process_default_resource device{device_upstream, "device"};
  std::atomic<memory_resource*> current_device{&device};
  std::atomic<memory_resource*> current_host{&host};
};

defaults& process_defaults() {
  static defaults instance;
  return instance;
}

}  // namespace

resource_ref get_current_device_resource(source_site site) {
  if (validation_switch().load(std::memory_order_relaxed)) {
    throw_default_use("get_current_device_resource()", site);
  }
  return *process_defaults().current_device.load(std::memory_order_acquire);
}

resource_ref set_current_device_resource(resource_ref resource) {
  return *process_defaults().current_device.exchange(&resource.get(), std::memory_order_acq_rel);
}

resource_ref get_current_host_resource(source_site site) {
  if (validation_switch().load(std::memory_order_relaxed)) {
    throw_default_use("get_current_host_resource()", site);
  }
  return *process_defaults().current_host.load(std::memory_order_acquire);
}

resource_ref set_current_host_resource(resource_ref resource) {
  return *process_defaults().current_host.exchange(&resource.get(), std::memory_order_acq_rel);
}

memory_resources current_resources(source_site site) {
  if (validation_switch().load(std::memory_order_relaxed)) {
    throw_default_use("current_resources()", site);
  }
  return memory_resources{*process_defaults().current_device.load(std::memory_order_acquire)};
}

resource_ref process_default_device_resource() noexcept { return process_defaults().device; }
resource_ref process_default_host_resource() noexcept { return process_defaults().host; }

bool set_error_on_default_resource(bool enabled) noexcept {
  return validation_switch().exchange(enabled, std::memory_order_relaxed);
}

bool error_on_default_resource() noexcept {
  return validation_switch().load(std::memory_order_relaxed);
}

}  // namespace spillway
