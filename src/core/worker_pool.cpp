#include <spillway/core/error.hpp>
#include <spillway/core/mutex.hpp>
#include <spillway/core/worker_pool.hpp>

#include <algorithm>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <exception>
#include <fstream>
#include <iterator>
#include <sched.h>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace spillway {
namespace detail {
namespace {

/// `text` without leading and trailing blanks.
std::string_view trimmed(std::string_view text) {
  auto const first = text.find_first_not_of(" \t\r\n");
  if (first == std::string_view::npos) {
    return {};
  }
  auto const last = text.find_last_not_of(" \t\r\n");
  return text.substr(first, last - first + 1);
}

/// `text` (trimmed) as a whole number, or nullopt.
std::optional<std::int64_t> whole_number(std::string_view text) {
  text                    = trimmed(text);
  std::int64_t value      = 0;
  auto const [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc{} || end != text.data() + text.size()) {
    return std::nullopt;
  }
  return value;
}

/// The cores `quota` microseconds of CPU time per `period` allow, rounded up (at least 1).
std::optional<std::size_t> quota_cores(std::int64_t quota, std::int64_t period) {
  if (quota <= 0 || period <= 0) {
    return std::nullopt;
  }
  return std::max<std::size_t>(1, static_cast<std::size_t>((quota + period - 1) / period));
}

/// The whole text of the file at `path`, or nullopt when it cannot be read.
std::optional<std::string> file_text(std::string const& path) {
  std::ifstream file{path};
  if (!file) {
    return std::nullopt;
  }
  std::ostringstream text;
  text << file.rdbuf();
  return text.str();
}

/// `path` and every cgroup directory above it, up to `root`.
std::vector<std::string> cgroup_directories(std::string const& root, std::string path) {
  std::vector<std::string> directories;
  while (!path.empty() && path != "/") {
    directories.push_back(root + path);
    path.erase(path.find_last_of('/') == std::string::npos ? 0 : path.find_last_of('/'));
  }
  directories.push_back(root);
  return directories;
}

/// The smallest CPU quota, in cores, of this process's cgroups (v2 and v1), or nullopt.
std::optional<std::size_t> cgroup_cores() {
  std::optional<std::size_t> cores;
  auto const cap = [&](std::optional<std::size_t> limit) {
    if (limit.has_value()) {
      cores = cores.has_value() ? std::min(*cores, *limit) : *limit;
    }
  };
  auto const membership = file_text("/proc/self/cgroup");
  if (!membership.has_value()) {
    return cores;
  }
  std::istringstream lines{*membership};
  for (std::string line; std::getline(lines, line);) {
    // "hierarchy:controllers:path"; v2 is "0::path".
    auto const first  = line.find(':');
    auto const second = first == std::string::npos ? first : line.find(':', first + 1);
    if (second == std::string::npos) {
      continue;
    }
    std::string const controllers = line.substr(first + 1, second - first - 1);
    std::string const path        = line.substr(second + 1);
    if (controllers.empty()) {
      // Inside a container the path may be the host's: the mount's root is tried as well.
      for (auto const& directory : cgroup_directories("/sys/fs/cgroup", path)) {
        if (auto const text = file_text(directory + "/cpu.max")) {
          cap(cgroup_v2_cores(*text));
        }
      }
      continue;
    }
    std::istringstream names{controllers};
    bool has_cpu = false;
    for (std::string name; std::getline(names, name, ',');) {
      has_cpu = has_cpu || name == "cpu";
    }
    if (!has_cpu) {
      continue;
    }
    for (std::string const mount :
         {"/sys/fs/cgroup/cpu", "/sys/fs/cgroup/cpu,cpuacct", "/sys/fs/cgroup/cpuacct,cpu"}) {
      for (auto const& directory : cgroup_directories(mount, path)) {
        auto const quota  = file_text(directory + "/cpu.cfs_quota_us");
        auto const period = file_text(directory + "/cpu.cfs_period_us");
        if (quota.has_value() && period.has_value()) {
          cap(cgroup_v1_cores(*quota, *period));
        }
      }
    }
  }
  return cores;
}

/**
 * One `parallel_for`: its parts, the next one not yet taken, those finished and the first
 * failure. Lives on the caller's stack; every field is guarded by the pool's mutex.
 */
struct job {
  void (*call)(void const*, std::size_t);
  void const* work;
  std::size_t parts;
  std::size_t next = 0;
  std::size_t done = 0;
  std::exception_ptr failure;
  std::size_t failed_part = 0;
};

/// Runs part `part` of `work`; returns its exception, if any.
std::exception_ptr run_part(job const& work, std::size_t part) noexcept {
  try {
    work.call(work.work, part);
  } catch (...) {
    return std::current_exception();
  }
  return nullptr;
}

/// Records a finished part (and its failure, kept when it is the lowest part failing).
void finish_part(job& work, std::size_t part, std::exception_ptr failure) {
  if (failure != nullptr && (work.failure == nullptr || part < work.failed_part)) {
    work.failure     = std::move(failure);
    work.failed_part = part;
  }
  ++work.done;
}

/**
 * The pool: `threads_ - 1` workers take parts of the jobs in the queue, oldest job first. Never
 * destroyed (workers may still wait for work while the process exits).
 */
class worker_pool {
 public:
  std::size_t threads() SPILLWAY_EXCLUDES(mutex_) {
    scoped_lock lock{mutex_};
    return threads_or_default();
  }

  void resize(std::size_t threads) SPILLWAY_EXCLUDES(mutex_) {
    std::vector<std::thread> stopping;
    {
      scoped_lock lock{mutex_};
      SPILLWAY_EXPECTS(queue_.empty(), "the worker pool is resized while parallel work runs");
      stop_ = true;
      stopping.swap(workers_);
    }
    work_ready_.notify_all();
    for (auto& worker : stopping) {
      worker.join();
    }
    scoped_lock lock{mutex_};
    stop_    = false;
    threads_ = threads;
  }

  void run(std::size_t parts, void (*call)(void const*, std::size_t), void const* context)
    SPILLWAY_EXCLUDES(mutex_) {
    job work{call, context, parts, 0, 0, nullptr, 0};
    scoped_lock lock{mutex_};
    std::size_t const threads = threads_or_default();
    if (threads == 1 || parts == 1) {
      lock.unlock();
      for (std::size_t part = 0; part < parts; ++part) {
        finish_part(work, part, run_part(work, part));
      }
      if (work.failure != nullptr) {
        std::rethrow_exception(work.failure);
      }
      return;
    }
    start_workers(threads);
    queue_.push_back(&work);
    std::size_t const wake = std::min(parts - 1, workers_.size());
    // The caller takes part 0 before any worker can, then whatever is left.
    while (work.next < work.parts) {
      std::size_t const part = work.next++;
      if (work.next == work.parts) {
        queue_.erase(std::find(queue_.begin(), queue_.end(), &work));
      }
      lock.unlock();
      if (part == 0) {
        for (std::size_t woken = 0; woken < wake; ++woken) {
          work_ready_.notify_one();
        }
      }
      std::exception_ptr failure = run_part(work, part);
      lock.lock();
      finish_part(work, part, std::move(failure));
    }
    while (work.done < work.parts) {
      job_done_.wait(lock.native());
    }
    lock.unlock();
    if (work.failure != nullptr) {
      std::rethrow_exception(work.failure);
    }
  }

 private:
  std::size_t threads_or_default() SPILLWAY_REQUIRES(mutex_) {
    if (threads_ == 0) {
      threads_ = usable_cores();
    }
    return threads_;
  }

  /// Starts the workers of a pool of `threads` threads, if not yet started.
  void start_workers(std::size_t threads) SPILLWAY_REQUIRES(mutex_) {
    while (workers_.size() + 1 < threads) {
      workers_.emplace_back([this] { serve(); });
    }
  }

  /// A worker: takes parts of the oldest job until the pool stops.
  void serve() SPILLWAY_EXCLUDES(mutex_) {
    scoped_lock lock{mutex_};
    while (true) {
      while (!stop_ && queue_.empty()) {
        work_ready_.wait(lock.native());
      }
      if (queue_.empty()) {
        return;  // stopping
      }
      job& work              = *queue_.front();
      std::size_t const part = work.next++;
      if (work.next == work.parts) {
        queue_.pop_front();
      }
      lock.unlock();
      std::exception_ptr failure = run_part(work, part);
      lock.lock();
      finish_part(work, part, std::move(failure));
      if (work.done == work.parts) {
        job_done_.notify_all();
      }
    }
  }

  mutex mutex_;
  std::condition_variable work_ready_;
  std::condition_variable job_done_;
  std::deque<job*> queue_ SPILLWAY_GUARDED_BY(mutex_);
  std::vector<std::thread> workers_ SPILLWAY_GUARDED_BY(mutex_);
  std::size_t threads_ SPILLWAY_GUARDED_BY(mutex_) = 0;  ///< 0: not yet set
  bool stop_ SPILLWAY_GUARDED_BY(mutex_)           = false;
};

worker_pool& the_pool() {
  static auto* const pool = new worker_pool{};  // never destroyed: see worker_pool
  return *pool;
}

}  // namespace

std::optional<std::size_t> cgroup_v2_cores(std::string_view cpu_max) {
  cpu_max          = trimmed(cpu_max);
  auto const space = cpu_max.find(' ');
  if (space == std::string_view::npos) {
    return std::nullopt;
  }
  std::string_view const quota = cpu_max.substr(0, space);
  if (quota == "max") {
    return std::nullopt;
  }
  auto const quota_value  = whole_number(quota);
  auto const period_value = whole_number(cpu_max.substr(space + 1));
  if (!quota_value.has_value() || !period_value.has_value()) {
    return std::nullopt;
  }
  return quota_cores(*quota_value, *period_value);
}

std::optional<std::size_t> cgroup_v1_cores(std::string_view quota, std::string_view period) {
  auto const quota_value  = whole_number(quota);
  auto const period_value = whole_number(period);
  if (!quota_value.has_value() || !period_value.has_value()) {
    return std::nullopt;
  }
  return quota_cores(*quota_value, *period_value);
}

void run_parts(std::size_t parts, void (*call)(void const*, std::size_t), void const* work) {
  if (parts == 0) {
    return;
  }
  the_pool().run(parts, call, work);
}

}  // namespace detail

std::size_t usable_cores() {
  std::size_t cores = std::max(1U, std::thread::hardware_concurrency());
  cpu_set_t set;
  CPU_ZERO(&set);
  if (sched_getaffinity(0, sizeof(set), &set) == 0) {
    cores = static_cast<std::size_t>(std::max(1, CPU_COUNT(&set)));
  }
  if (auto const quota = detail::cgroup_cores(); quota.has_value()) {
    cores = std::min(cores, *quota);
  }
  return std::max<std::size_t>(1, cores);
}

void set_worker_threads(std::size_t threads) {
  SPILLWAY_EXPECTS(threads <= MAX_WORKER_THREADS,
                   "worker threads must be at most " + std::to_string(MAX_WORKER_THREADS) +
                     ", got " + std::to_string(threads));
  detail::the_pool().resize(threads);
}

std::size_t worker_threads() { return detail::the_pool().threads(); }

std::size_t parallel_parts(std::size_t items, std::size_t min_items_per_part) {
  std::size_t const most = min_items_per_part == 0 ? items : items / min_items_per_part;
  return std::clamp<std::size_t>(most, 1, worker_threads());
}

}  // namespace spillway
