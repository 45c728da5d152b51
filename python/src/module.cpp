/**
 * @file module.cpp
 * @brief `spillway._spillway`, the native part of the Python package: environments, and the sort
 * and shuffle jobs of jobs.hpp over Arrow C streams (PyCapsules of the Arrow PyCapsule interface)
 * or dataset paths. The GIL is released while a job works; a pending signal (Ctrl-C) is checked
 * between batches and stops the job, whose spill files go with it.
 */
#include "jobs.hpp"

#include <spillway/core/error.hpp>
#include <spillway/core/error_message.hpp>
#include <spillway/core/units.hpp>
#include <spillway/core/worker_pool.hpp>
#include <spillway/io/arrow_c_stream.hpp>
#include <spillway/io/file_format.hpp>
#include <spillway/retry/retry_coverage.hpp>
#include <spillway/spill/spill_tier.hpp>

#include <arrow/c/abi.h>

#include <cstdlib>
#include <deque>
#include <exception>
#include <memory>
#include <nanobind/nanobind.h>
#include <nanobind/stl/map.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/tuple.h>
#include <nanobind/stl/vector.h>
#include <new>
#include <optional>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace nb = nanobind;

namespace spillway::python {
namespace {

/// The PyCapsule name of an `ArrowArrayStream` (the Arrow PyCapsule interface).
constexpr char const* STREAM_CAPSULE = "arrow_array_stream";

/** @brief A pending signal's Python exception is set on this thread; raise it. */
struct interrupted_error {};

/** @return a check that runs Python's signal handlers and throws when one raised */
interrupt_check signal_check() {
  return [] {
    nb::gil_scoped_acquire const gil;
    if (PyErr_CheckSignals() != 0) {
      throw interrupted_error{};  // the handler's exception (KeyboardInterrupt) stays set
    }
  };
}

/**
 * @brief Runs `work` with the GIL released; a signal's exception that stopped it is raised
 * once the GIL is back.
 */
template <typename Work>
decltype(auto) without_gil(Work&& work) {
  try {
    nb::gil_scoped_release const released;
    return work();
  } catch (interrupted_error const&) {
    throw nb::python_error();
  }
}

/** @brief What Python holds of an environment. */
struct environment_handle {
  std::shared_ptr<environment> env;
};

/** @return the environment of `handle` @throws invalid_argument once it is closed */
std::shared_ptr<environment> const& env_of(environment_handle const& handle) {
  if (!handle.env) {
    throw invalid_argument("the Environment is closed");
  }
  return handle.env;
}

/** @return the stream of a capsule of the Arrow PyCapsule interface */
ArrowArrayStream* stream_of(nb::handle capsule) {
  if (PyCapsule_IsValid(capsule.ptr(), STREAM_CAPSULE) == 0) {
    throw invalid_argument("the source's __arrow_c_stream__ did not return an '" +
                           std::string{STREAM_CAPSULE} + "' capsule");
  }
  return static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(capsule.ptr(), STREAM_CAPSULE));
}

void release_stream_capsule(PyObject* capsule) noexcept {
  auto* stream = static_cast<ArrowArrayStream*>(PyCapsule_GetPointer(capsule, STREAM_CAPSULE));
  if (stream == nullptr) {
    PyErr_Clear();
    return;
  }
  if (stream->release != nullptr) {
    stream->release(stream);
  }
  delete stream;
}

/**
 * @return a capsule of an Arrow C stream of `source`'s tables; each call of `source` runs with
 * the GIL released when the reading thread holds it
 */
nb::object export_capsule(table_schema const& schema,
                          std::function<std::unique_ptr<table>()> source) {
  auto stream     = std::make_unique<ArrowArrayStream>();
  stream->release = nullptr;
  export_arrow_stream(
    schema,
    [source = std::move(source)]() -> std::unique_ptr<table> {
      if (PyGILState_Check() != 0) {
        nb::gil_scoped_release const released;
        return source();
      }
      return source();
    },
    stream.get());
  PyObject* capsule = PyCapsule_New(stream.get(), STREAM_CAPSULE, release_stream_capsule);
  if (capsule == nullptr) {
    throw nb::python_error();
  }
  static_cast<void>(stream.release());
  return nb::steal(capsule);
}

/** @return the input of a sort or shuffle: a stream capsule, or a path (with its format) */
std::unique_ptr<input> open_input(nb::object const& stream,
                                  std::string const& name,
                                  std::optional<std::string> const& path,
                                  std::string const& format,
                                  std::size_t batch_bytes) {
  if (path) {
    return without_gil([&] { return std::make_unique<input>(*path, format, batch_bytes); });
  }
  return std::make_unique<input>(stream_of(stream), name);
}

using key_tuple = std::tuple<std::string, bool, bool>;

nb::object run_sort(environment_handle const& handle,
                    nb::object const& stream,
                    std::string const& name,
                    std::optional<std::string> const& path,
                    std::string const& format,
                    std::vector<key_tuple> const& keys,
                    std::size_t batch_bytes,
                    std::string const& strategy,
                    bool check_order,
                    std::optional<std::string> const& output,
                    std::string const& output_format,
                    std::size_t file_bytes) {
  auto source = open_input(stream, name, path, format, batch_bytes);
  std::vector<sort_key> sort_keys;
  for (auto const& [column, descending, nulls_first] : keys) {
    sort_keys.push_back({column, descending, nulls_first});
  }
  sort_options options;
  options.batch_bytes = batch_bytes;
  options.strategy    = strategy;
  options.check_order = check_order;
  auto const check    = signal_check();
  auto job            = without_gil([&] {
    auto made = std::make_shared<sort_job>(env_of(handle), *source, sort_keys, options, check);
    source.reset();  // the input's reader (and its thread) goes once read
    return made;
  });
  if (output) {
    auto written =
      without_gil([&] { return job->write(*output, output_format, file_bytes, check); });
    return nb::cast(written);
  }
  auto const schema = job->schema();
  return export_capsule(schema, [job] { return job->next(); });
}

nb::object run_shuffle(environment_handle const& handle,
                       nb::object const& stream,
                       std::string const& name,
                       std::optional<std::string> const& path,
                       std::string const& format,
                       std::vector<std::string> const& keys,
                       std::size_t partitions,
                       std::uint64_t seed,
                       std::size_t batch_bytes,
                       std::optional<std::string> const& output,
                       std::string const& output_format,
                       std::size_t file_bytes) {
  auto source      = open_input(stream, name, path, format, batch_bytes);
  auto const check = signal_check();
  auto job         = without_gil([&] {
    auto made =
      std::make_shared<shuffle_job>(env_of(handle), *source, keys, partitions, seed, check);
    source.reset();
    return made;
  });
  if (output) {
    auto written =
      without_gil([&] { return job->write(*output, output_format, file_bytes, check); });
    return nb::cast(written);
  }
  nb::list readers;
  auto const schema = job->schema();
  for (std::size_t partition = 0; partition < job->partitions(); ++partition) {
    // A partition is read from the shuffle when its stream is first read.
    auto pending = std::make_shared<std::optional<std::deque<std::unique_ptr<table>>>>();
    readers.append(export_capsule(schema, [job, partition, pending]() -> std::unique_ptr<table> {
      if (!pending->has_value()) {
        *pending = job->take_partition(partition);
      }
      auto& batches = **pending;
      if (batches.empty()) {
        return nullptr;
      }
      auto batch = std::move(batches.front());
      batches.pop_front();
      return batch;
    }));
  }
  return readers;
}

nb::dict transfer(spill_statistics const& spilled, spill_tier from, spill_tier to) {
  auto const& moved = spilled.between(from, to);
  nb::dict result;
  result["count"]        = moved.count;
  result["bytes"]        = moved.raw_bytes;
  result["stored_bytes"] = moved.stored_bytes;
  return result;
}

nb::dict statistics(environment_handle const& handle) {
  auto& env    = *env_of(handle);
  auto& device = env.device();
  nb::dict result;
  nb::dict device_stats;
  device_stats["backend"]        = std::string{to_string(device.backend())};
  device_stats["capacity"]       = device.device_memory();
  device_stats["used"]           = device.device_used_bytes();
  device_stats["peak"]           = device.device_peak_bytes();
  device_stats["host_budget"]    = device.host_memory();
  device_stats["host_peak"]      = device.host_tier().statistics().peak_bytes;
  device_stats["worker_threads"] = worker_threads();
  device_stats["oom_injected"]   = device.injected_failures();
  result["device"]               = device_stats;
  // Device allocations made outside every retry block (counted with SPILLWAY_RETRY_COVERAGE=1).
  result["unprotected_allocations"] = unprotected_allocations().size();

  auto const leases = device.arbiter().total_statistics();
  nb::dict lease_stats;
  lease_stats["granted_bytes"]   = leases.granted_bytes;
  lease_stats["grants"]          = leases.grants;
  lease_stats["waits"]           = leases.waits;
  lease_stats["wait_seconds"]    = std::chrono::duration<double>(leases.wait_time).count();
  lease_stats["lent_bytes"]      = leases.lent_bytes;
  lease_stats["borrowed_bytes"]  = leases.borrowed_bytes;
  lease_stats["whole_device"]    = leases.whole_device;
  lease_stats["cancelled"]       = leases.cancelled;
  lease_stats["timed_out"]       = leases.timed_out;
  lease_stats["spill_callbacks"] = device.coordinator().statistics().failures;
  result["leases"]               = lease_stats;

  auto const spilled = device.store().statistics();
  nb::dict spill_stats;
  nb::dict bytes_on;
  nb::dict transfers;
  for (auto from : {spill_tier::DEVICE, spill_tier::HOST, spill_tier::DISK}) {
    bytes_on[std::string{to_string(from)}.c_str()] = spilled.bytes_on[index_of(from)];
    for (auto to : {spill_tier::DEVICE, spill_tier::HOST, spill_tier::DISK}) {
      if (from != to) {
        auto const key         = std::string{to_string(from)} + "_to_" + std::string{to_string(to)};
        transfers[key.c_str()] = transfer(spilled, from, to);
      }
    }
  }
  spill_stats["bytes_on"]         = bytes_on;
  spill_stats["transfers"]        = transfers;
  spill_stats["write_errors"]     = spilled.write_errors;
  spill_stats["read_errors"]      = spilled.read_errors;
  spill_stats["disk_compression"] = spilled.disk_compression_ratio();
  spill_stats["last_error"]       = spilled.last_error;
  result["spill"]                 = spill_stats;

  nb::dict sort_stats;
  for (auto const& [key, value] : env.last_sort()) {
    sort_stats[key.c_str()] = value;
  }
  result["last_sort"] = sort_stats;
  return result;
}

/** @brief Raises the exception class `name` of `spillway._errors` with `message`. */
void raise(char const* name, char const* what) {
  auto const message = user_message(what);
  auto errors        = nb::module_::import_("spillway._errors");
  PyErr_SetString(errors.attr(name).ptr(), message.c_str());
}

void translate(std::exception_ptr const& failure, void* /*payload*/) {
  try {
    std::rethrow_exception(failure);
  } catch (nb::python_error const&) {
    throw;
  } catch (nb::builtin_exception const&) {
    throw;
  } catch (out_of_memory const& error) {
    raise("OutOfMemoryError", error.what());
  } catch (std::bad_alloc const&) {
    raise("OutOfMemoryError", "out of host memory");
  } catch (invalid_argument const& error) {
    raise("InvalidArgumentError", error.what());
  } catch (not_supported const& error) {
    raise("NotSupportedError", error.what());
  } catch (corruption_error const& error) {
    raise("CorruptionError", error.what());
  } catch (io_error const& error) {
    raise("SpillwayIOError", error.what());
  } catch (cancelled_error const& error) {
    raise("CancelledError", error.what());
  } catch (logic_error const& error) {
    raise("InternalError", error.what());
  } catch (std::exception const& error) {
    raise("SpillwayError", error.what());
  }
}

}  // namespace
}  // namespace spillway::python

NB_MODULE(_spillway, m) {
  using namespace spillway::python;
  m.doc() = "The native part of spillway: out-of-core sort and shuffle under memory budgets.";
  nb::register_exception_translator(translate);

  nb::class_<environment_handle>(m, "NativeEnvironment")
    .def(
      "__init__",
      [](environment_handle* self,
         std::size_t device_memory,
         std::size_t host_memory,
         std::string const& spill_dir,
         std::string const& backend,
         bool record) {
        environment_options options;
        options.device_memory = device_memory;
        options.host_memory   = host_memory;
        options.spill_dir     = spill_dir;
        options.backend       = backend;
        options.record        = record;
        new (self) environment_handle{std::make_shared<environment>(options)};
      },
      nb::arg("device_memory"),
      nb::arg("host_memory"),
      nb::arg("spill_dir"),
      nb::arg("backend"),
      nb::arg("record"))
    .def("statistics", &statistics)
    .def("report_json",
         [](environment_handle const& self) -> std::optional<std::string> {
           auto* recorder = env_of(self)->recorder();
           if (recorder == nullptr) {
             return std::nullopt;
           }
           recorder->sample_now();
           return recorder->to_json();
         })
    .def("write_report",
         [](environment_handle const& self, std::string const& html, std::string const& json) {
           auto* recorder = env_of(self)->recorder();
           if (recorder == nullptr) {
             throw spillway::invalid_argument(
               "the run report is recorded by an Environment(report=True) only");
           }
           recorder->sample_now();
           recorder->write_run_report(html, json);
         })
    .def("close", [](environment_handle& self) { self.env.reset(); });

  m.def("sort",
        &run_sort,
        nb::arg("env"),
        nb::arg("stream").none(),
        nb::arg("name"),
        nb::arg("path").none(),
        nb::arg("format"),
        nb::arg("keys"),
        nb::arg("batch_bytes"),
        nb::arg("strategy"),
        nb::arg("check_order"),
        nb::arg("output").none(),
        nb::arg("output_format"),
        nb::arg("file_bytes"));
  m.def("shuffle",
        &run_shuffle,
        nb::arg("env"),
        nb::arg("stream").none(),
        nb::arg("name"),
        nb::arg("path").none(),
        nb::arg("format"),
        nb::arg("keys"),
        nb::arg("partitions"),
        nb::arg("seed"),
        nb::arg("batch_bytes"),
        nb::arg("output").none(),
        nb::arg("output_format"),
        nb::arg("file_bytes"));
  m.def("parse_bytes", [](std::string const& text) { return spillway::parse_bytes(text); });
  m.def("use_threads", [](std::size_t threads) { use_threads(threads); });
  m.def("worker_threads", [] { return spillway::worker_threads(); });
  m.def("arrow_io_available", [] { return spillway::arrow_io_available(); });
}
