/**
 * @file mutex.hpp
 * @brief An annotated mutex and scoped lock, so that clang's -Wthread-safety checks which state a
 * lock guards. The annotations are empty on other compilers.
 */
#pragma once

#include <atomic>
#include <condition_variable>
#include <mutex>
#include <thread>

#if defined(__clang__)
#define SPILLWAY_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define SPILLWAY_THREAD_ANNOTATION(x)
#endif

#define SPILLWAY_CAPABILITY(x) SPILLWAY_THREAD_ANNOTATION(capability(x))
#define SPILLWAY_SCOPED_CAPABILITY SPILLWAY_THREAD_ANNOTATION(scoped_lockable)
#define SPILLWAY_GUARDED_BY(x) SPILLWAY_THREAD_ANNOTATION(guarded_by(x))
#define SPILLWAY_PT_GUARDED_BY(x) SPILLWAY_THREAD_ANNOTATION(pt_guarded_by(x))
#define SPILLWAY_REQUIRES(...) SPILLWAY_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define SPILLWAY_ACQUIRE(...) SPILLWAY_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define SPILLWAY_RELEASE(...) SPILLWAY_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define SPILLWAY_EXCLUDES(...) SPILLWAY_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))

namespace spillway {

/** @brief `std::mutex` with capability annotations. */
class SPILLWAY_CAPABILITY("mutex") mutex {
 public:
  void lock() SPILLWAY_ACQUIRE() { mutex_.lock(); }
  void unlock() SPILLWAY_RELEASE() { mutex_.unlock(); }
  /** @return the wrapped mutex, for condition variables */
  std::mutex& native() { return mutex_; }

 private:
  std::mutex mutex_;
};

/**
 * @brief A test-and-test-and-set spin lock for critical sections of a few instructions that are
 * almost never contended (per-thread-shard caches). Yields after a short spin.
 */
class SPILLWAY_CAPABILITY("mutex") spin_mutex {
 public:
  void lock() SPILLWAY_ACQUIRE() {
    for (int spins = 0; locked_.exchange(true, std::memory_order_acquire); ++spins) {
      while (locked_.load(std::memory_order_relaxed)) {
        if (++spins > 64) {
          std::this_thread::yield();
        }
      }
    }
  }
  void unlock() SPILLWAY_RELEASE() { locked_.store(false, std::memory_order_release); }

 private:
  std::atomic<bool> locked_{false};
};

/** @brief Holds a spin mutex for its lifetime. */
class SPILLWAY_SCOPED_CAPABILITY scoped_spin_lock {
 public:
  explicit scoped_spin_lock(spin_mutex& m) SPILLWAY_ACQUIRE(m) : mutex_(m) { mutex_.lock(); }
  ~scoped_spin_lock() SPILLWAY_RELEASE() { mutex_.unlock(); }
  scoped_spin_lock(scoped_spin_lock const&)            = delete;
  scoped_spin_lock& operator=(scoped_spin_lock const&) = delete;
  scoped_spin_lock(scoped_spin_lock&&)                 = delete;
  scoped_spin_lock& operator=(scoped_spin_lock&&)      = delete;

 private:
  spin_mutex& mutex_;
};

/** @brief Holds `mutex` for its lifetime; can wait on a condition variable. */
class SPILLWAY_SCOPED_CAPABILITY scoped_lock {
 public:
  explicit scoped_lock(mutex& m) SPILLWAY_ACQUIRE(m) : lock_(m.native()) {}
  ~scoped_lock() SPILLWAY_RELEASE()          = default;
  scoped_lock(scoped_lock const&)            = delete;
  scoped_lock& operator=(scoped_lock const&) = delete;
  scoped_lock(scoped_lock&&)                 = delete;
  scoped_lock& operator=(scoped_lock&&)      = delete;

  /** @brief Releases the mutex early (it must be held). */
  void unlock() SPILLWAY_RELEASE() { lock_.unlock(); }
  /** @brief Takes the mutex again after `unlock()`. */
  void lock() SPILLWAY_ACQUIRE() { lock_.lock(); }

  /** @return the underlying lock, for condition variables */
  std::unique_lock<std::mutex>& native() { return lock_; }

  /** @brief Waits on `condition` until `predicate()` holds, releasing the lock meanwhile. */
  template <typename Predicate>
  void wait(std::condition_variable& condition, Predicate predicate) {
    condition.wait(lock_, predicate);
  }

 private:
  std::unique_lock<std::mutex> lock_;
};

}  // namespace spillway
