#include "bus/util/semaphore.h"

#include <time.h>

#include <algorithm>
#include <cassert>
#include <cerrno>
#include <limits>
#include <thread>

namespace walbus::internal {
namespace {

// std::chrono::steady_clock is CLOCK_MONOTONIC on Linux: its time points
// are the clock's own readings.
timespec MonotonicTimespec(std::chrono::steady_clock::time_point t) {
  const auto since = t.time_since_epoch();
  const auto secs = std::chrono::duration_cast<std::chrono::seconds>(since);
  timespec ts{};
  if (secs.count() < 0) return ts;
  // A far deadline (time_point::max) saturates: a 32-bit time_t ends in 2038.
  if (secs.count() >= static_cast<int64_t>(std::numeric_limits<time_t>::max())) {
    ts.tv_sec = std::numeric_limits<time_t>::max();
    return ts;
  }
  ts.tv_sec = static_cast<time_t>(secs.count());
  ts.tv_nsec = static_cast<long>(std::chrono::nanoseconds(since - secs).count());
  return ts;
}

}  // namespace

Semaphore::Semaphore(int spins) : spins_(spins) {
  assert(spins >= 0);
  [[maybe_unused]] const int rc = sem_init(&sleepers_, /*pshared=*/0, 0);
  assert(rc == 0);
}

Semaphore::~Semaphore() { sem_destroy(&sleepers_); }

void Semaphore::Signal(int64_t n) {
  assert(n >= 1);
  const int64_t before = count_.fetch_add(n, std::memory_order_release);
  // Each sleeper the addition covers is owed one post.
  for (int64_t owed = std::min<int64_t>(before < 0 ? -before : 0, n); owed > 0; --owed) {
    while (sem_post(&sleepers_) != 0) {
    }
  }
}

bool Semaphore::TryWait() {
  int64_t c = count_.load(std::memory_order_relaxed);
  while (c > 0) {
    if (count_.compare_exchange_weak(c, c - 1, std::memory_order_acquire, std::memory_order_relaxed)) return true;
  }
  return false;
}

bool Semaphore::Spin() {
  for (int i = 0; i < spins_; ++i) {
    if (TryWait()) return true;
  }
  return false;
}

void Semaphore::Wait() {
  if (Spin()) return;
  if (count_.fetch_sub(1, std::memory_order_acquire) > 0) return;
  SleepForPost();
}

bool Semaphore::WaitUntil(std::chrono::steady_clock::time_point deadline) {
  if (Spin()) return true;
  if (count_.fetch_sub(1, std::memory_order_acquire) > 0) return true;
  if (SleepForPostUntil(deadline)) return true;
  return Withdraw();
}

bool Semaphore::Withdraw() {
  // Timed out: withdraw as a sleeper (a negative count has room for it).
  // A count that is not negative means a Signal counted this thread as a
  // sleeper: its post is on the way or there, and is taken here, lest it
  // wake a later wait that nothing signalled. Never a blocking wait for
  // it: another sleeper may take that post first, which makes the count
  // negative again, and this thread then withdraws after all. (Waiting
  // for the post would sleep past the deadline until the next Signal.)
  while (true) {
    int64_t c = count_.load(std::memory_order_relaxed);
    if (c < 0) {
      if (count_.compare_exchange_weak(c, c + 1, std::memory_order_relaxed, std::memory_order_relaxed)) return false;
      continue;
    }
    if (sem_trywait(&sleepers_) == 0) {
      AfterPost();
      return true;
    }
    std::this_thread::yield();  // the Signal that counted it is posting
  }
}

int64_t Semaphore::available() const { return std::max<int64_t>(count_.load(std::memory_order_relaxed), 0); }

void Semaphore::SleepForPost() {
  while (sem_wait(&sleepers_) != 0) {
    assert(errno == EINTR);
  }
  AfterPost();
}

void Semaphore::AfterPost() {
  // Pairs with Signal's release: what the signaller wrote before it is
  // seen here, by the memory model's rules rather than the semaphore's
  // (which thread sanitizers do not all follow through sem_clockwait).
  (void)count_.load(std::memory_order_acquire);
}

bool Semaphore::SleepForPostUntil(std::chrono::steady_clock::time_point deadline) {
  const timespec ts = MonotonicTimespec(deadline);
  while (true) {
    if (sem_clockwait(&sleepers_, CLOCK_MONOTONIC, &ts) == 0) {
      AfterPost();
      return true;
    }
    if (errno == ETIMEDOUT) return false;
    assert(errno == EINTR);
  }
}

}  // namespace walbus::internal
