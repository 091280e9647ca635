// Mutex, MutexLock and CondVar: std::mutex and std::condition_variable
// with clang's thread-safety annotations, so that `-Wthread-safety` (the
// clang builds: tsan, fuzz) checks that state marked GUARDED_BY(mu) is only
// touched with mu held, and that functions marked REQUIRES(mu) are only
// called so. GCC compiles the annotations away.
//
// Threading: a Mutex is thread-safe; a MutexLock belongs to the thread
// that made it.
#ifndef WALBUS_BUS_UTIL_MUTEX_H_
#define WALBUS_BUS_UTIL_MUTEX_H_

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <shared_mutex>

#if defined(__clang__)
#define WALBUS_THREAD_ANNOTATION(x) __attribute__((x))
#else
#define WALBUS_THREAD_ANNOTATION(x)
#endif

#define CAPABILITY(x) WALBUS_THREAD_ANNOTATION(capability(x))
#define SCOPED_CAPABILITY WALBUS_THREAD_ANNOTATION(scoped_lockable)
#define GUARDED_BY(x) WALBUS_THREAD_ANNOTATION(guarded_by(x))
#define PT_GUARDED_BY(x) WALBUS_THREAD_ANNOTATION(pt_guarded_by(x))
#define REQUIRES(...) WALBUS_THREAD_ANNOTATION(requires_capability(__VA_ARGS__))
#define EXCLUDES(...) WALBUS_THREAD_ANNOTATION(locks_excluded(__VA_ARGS__))
#define ACQUIRE(...) WALBUS_THREAD_ANNOTATION(acquire_capability(__VA_ARGS__))
#define ACQUIRE_SHARED(...) WALBUS_THREAD_ANNOTATION(acquire_shared_capability(__VA_ARGS__))
#define RELEASE(...) WALBUS_THREAD_ANNOTATION(release_capability(__VA_ARGS__))
#define RELEASE_SHARED(...) WALBUS_THREAD_ANNOTATION(release_shared_capability(__VA_ARGS__))
#define NO_THREAD_SAFETY_ANALYSIS WALBUS_THREAD_ANNOTATION(no_thread_safety_analysis)

namespace walbus::internal {

class CAPABILITY("mutex") Mutex {
 public:
  Mutex() = default;
  Mutex(const Mutex&) = delete;
  Mutex& operator=(const Mutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }

 private:
  friend class MutexLock;
  std::mutex mu_;
};

// Holds a Mutex for its scope.
class SCOPED_CAPABILITY MutexLock {
 public:
  explicit MutexLock(Mutex* mu) ACQUIRE(mu) : lock_(mu->mu_) {}
  ~MutexLock() RELEASE() {}
  // Lets the mutex go for a while (a leader's write, a callback), and takes
  // it again.
  void Unlock() RELEASE() { lock_.unlock(); }
  void Lock() ACQUIRE() { lock_.lock(); }
  // Whether the mutex is held through this lock now.
  bool holds() const { return lock_.owns_lock(); }
  MutexLock(const MutexLock&) = delete;
  MutexLock& operator=(const MutexLock&) = delete;

 private:
  friend class CondVar;
  std::unique_lock<std::mutex> lock_;
};

// A mutex many readers may hold at once (ReaderLock), or one writer
// (WriterLock).
class CAPABILITY("shared_mutex") SharedMutex {
 public:
  SharedMutex() = default;
  SharedMutex(const SharedMutex&) = delete;
  SharedMutex& operator=(const SharedMutex&) = delete;

  void Lock() ACQUIRE() { mu_.lock(); }
  void Unlock() RELEASE() { mu_.unlock(); }
  void LockShared() ACQUIRE_SHARED() { mu_.lock_shared(); }
  void UnlockShared() RELEASE_SHARED() { mu_.unlock_shared(); }

 private:
  std::shared_mutex mu_;
};

// Holds a SharedMutex shared for its scope.
class SCOPED_CAPABILITY ReaderLock {
 public:
  explicit ReaderLock(SharedMutex* mu) ACQUIRE_SHARED(mu) : mu_(mu) { mu_->LockShared(); }
  ~ReaderLock() RELEASE() { mu_->UnlockShared(); }
  ReaderLock(const ReaderLock&) = delete;
  ReaderLock& operator=(const ReaderLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// Holds a SharedMutex exclusively for its scope.
class SCOPED_CAPABILITY WriterLock {
 public:
  explicit WriterLock(SharedMutex* mu) ACQUIRE(mu) : mu_(mu) { mu_->Lock(); }
  ~WriterLock() RELEASE() { mu_->Unlock(); }
  WriterLock(const WriterLock&) = delete;
  WriterLock& operator=(const WriterLock&) = delete;

 private:
  SharedMutex* const mu_;
};

// A condition variable waited on with a MutexLock held; the mutex is held
// again whenever a wait returns. Waits may wake without a notification:
// callers loop on their condition, written out where the analysis sees
// the guarded state it reads.
class CondVar {
 public:
  void Wait(MutexLock* lock) { cv_.wait(lock->lock_); }
  // Waits for a notification or `deadline`, whichever comes first.
  template <typename Clock, typename Duration>
  void WaitUntil(MutexLock* lock, std::chrono::time_point<Clock, Duration> deadline) {
    cv_.wait_until(lock->lock_, deadline);
  }
  void NotifyOne() { cv_.notify_one(); }
  void NotifyAll() { cv_.notify_all(); }

 private:
  std::condition_variable cv_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_MUTEX_H_
