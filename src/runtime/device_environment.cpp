#include <spillway/core/error.hpp>
#include <spillway/memory/cuda_memory_resource.hpp>
#include <spillway/memory/limiting_resource_adaptor.hpp>
#include <spillway/memory/pool_memory_resource.hpp>
#include <spillway/runtime/device_environment.hpp>

#include <algorithm>

namespace spillway {

/// The CUDA device: its limit over stream-ordered memory, a pinned pool for the host tier (the
/// store keeps it within the host budget; the pool's rounding and chunks need room beyond it),
/// and the stream everything is ordered on.
struct device_environment::cuda_parts {
  explicit cuda_parts(std::size_t device_memory)
    : limited(device, device_memory), pinned_pool(pinned) {}

  cuda_stream stream;
  cuda_async_memory_resource device;
  limiting_resource_adaptor limited;
  pinned_host_memory_resource pinned;
  pool_memory_resource pinned_pool;
};

namespace {

spill_store_options store_options(resource_ref device,
                                  resource_ref host_tier,
                                  stream_view stream,
                                  device_environment_options const& options) {
  spill_store_options out{device, host_tier};
  out.host_budget = options.host_memory;
  out.spill_root  = options.spill_root;
  out.disk_codec  = options.disk_codec;
  out.events      = options.events;
  out.stream      = stream;
  return out;
}

/// The most the host resource's cache keeps mapped, live and freed blocks together: the device's
/// bytes (on the emulated device, host memory sharing the cache) and the host's.
std::size_t mapped_ceiling(device_environment_options const& options, bool cuda) {
  return cuda ? options.host_memory : options.device_memory + options.host_memory;
}

}  // namespace

std::unique_ptr<device_environment::cuda_parts> device_environment::make_cuda_parts(
  device_environment_options const& options) {
  if (options.backend != device_backend::CUDA) {
    return nullptr;
  }
  // Constructing the resources first names why CUDA cannot be used, if it cannot.
  auto parts      = std::make_unique<device_environment::cuda_parts>(options.device_memory);
  auto const info = cuda_device_memory();
  if (options.device_memory > info.free_bytes) {
    throw invalid_argument("a CUDA device of " + format_bytes(options.device_memory) +
                           " does not fit: the GPU has " + format_bytes(info.free_bytes) +
                           " free of " + format_bytes(info.total_bytes));
  }
  return parts;
}

std::string_view to_string(device_backend backend) noexcept {
  return backend == device_backend::CUDA ? "cuda" : "cpu";
}

device_backend resolve_device_backend(std::string_view name) {
  if (name == "cpu") {
    return device_backend::EMULATED;
  }
  if (name == "cuda") {
    if (cuda_device_count() == 0) {
      throw not_supported("--backend cuda: " + cuda_unavailable_reason());
    }
    return device_backend::CUDA;
  }
  if (name == "auto") {
    return cuda_device_count() > 0 ? device_backend::CUDA : device_backend::EMULATED;
  }
  throw invalid_argument("unknown backend '" + std::string{name} + "' (cpu, cuda or auto)");
}

device_environment::device_environment(device_environment_options const& options)
  : backend_(options.backend),
    device_memory_(options.device_memory),
    host_memory_(options.host_memory),
    // Freed host-tier blocks stay mapped for the next spill, up to the tier's budget (at least
    // a byte, so that the cache exists for the emulated device to share; a budget below the
    // store's minimum is refused by the store).
    host_(std::clamp(
      options.host_memory, std::size_t{1}, emulated_device_memory_resource::MAX_CACHED_BYTES)),
    cuda_(make_cuda_parts(options)),
    // The emulated device is host memory too: its freed blocks and the host's share one cache.
    emulated_(cuda_
                ? nullptr
                : std::make_unique<emulated_device_memory_resource>(options.device_memory, host_)),
    stream_(cuda_ ? cuda_->stream.view() : default_stream()),
    host_tier_(cuda_ ? resource_ref{cuda_->pinned_pool} : resource_ref{host_}),
    device_(cuda_ ? resource_ref{cuda_->limited} : resource_ref{*emulated_}),
    coordinator_(options.events),
    device_with_spill_(device_, coordinator_, options.device_memory, options.events),
    arbiter_(options.device_memory, options.events),
    store_([&] {
      auto out = store_options(device_with_spill_, host_tier_, stream_, options);
      // The store's bookkeeping is counted in the host budget but lives on the heap, beside the
      // cache: the cache keeps that much less mapped.
      out.bookkeeping_changed =
        [this, ceiling = mapped_ceiling(options, cuda_ != nullptr)](std::size_t bytes) {
          host_.set_mapped_ceiling(ceiling - std::min(ceiling, bytes));
        };
      return out;
    }()),
    budgeted_host_(store_, host_) {
  // The cache of freed blocks takes no memory beyond the budgets, live and cached together.
  host_.set_mapped_ceiling(mapped_ceiling(options, cuda_ != nullptr));
  coordinator_.set_spill_function(
    [this](std::size_t bytes) -> std::size_t { return store_.spill(bytes, spill_tier::DEVICE); });
}

device_environment::~device_environment() {
  // The store goes first (members in reverse): nothing may ask it to spill from then on.
  coordinator_.set_spill_function([](std::size_t) -> std::size_t { return 0; });
}

std::size_t device_environment::device_used_bytes() const noexcept {
  return device_.statistics().current_bytes;
}

std::size_t device_environment::device_peak_bytes() const noexcept {
  return device_.statistics().peak_bytes;
}

device_task::device_task(device_environment& environment, task_id id, int priority)
  : task_(environment.arbiter(), id, priority), registration_(environment.coordinator(), task_) {
  task_.set_spill_hook(environment.store().make_spill_hook(id));
}

}  // namespace spillway
