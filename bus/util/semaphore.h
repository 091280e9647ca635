// A counting semaphore whose timed waits run on the monotonic clock.
//
// moodycamel's semaphores time their waits on the wall clock
// (sem_timedwait): a wall clock stepped back while a thread waits — as
// NTP's first sync steps a device without a real-time clock, often by
// weeks — stretches that wait by the step. The bus's waits for a due
// moment (a retry, a timer, a checkpoint) and a synced commit's linger
// must end on elapsed time, whatever the wall clock does.
#ifndef WALBUS_BUS_UTIL_SEMAPHORE_H_
#define WALBUS_BUS_UTIL_SEMAPHORE_H_

#include <semaphore.h>

#include <atomic>
#include <chrono>
#include <cstdint>

namespace walbus::internal {

// Threading: thread-safe; any number of threads signal and wait. Signal
// never blocks and never allocates. Waits spin briefly (`spins` looks)
// before they sleep: a signal that comes within a few microseconds costs
// no system call on either side.
class Semaphore {
 public:
  // REQUIRES: spins >= 0.
  explicit Semaphore(int spins);
  ~Semaphore();
  Semaphore(const Semaphore&) = delete;
  Semaphore& operator=(const Semaphore&) = delete;

  // Adds `n` (REQUIRES: n >= 1), waking up to `n` sleeping waiters.
  void Signal(int64_t n = 1);
  // Takes one if there is one, without waiting.
  [[nodiscard]] bool TryWait();
  // Takes one, waiting as long as it takes.
  void Wait();
  // Takes one unless `deadline` (monotonic) passes first; false then.
  [[nodiscard]] bool WaitUntil(std::chrono::steady_clock::time_point deadline);
  // How many can be taken now; exact only while nothing signals or waits.
  int64_t available() const;

 private:
  bool Spin();
  // Sleeps until a Signal that counted this thread as a sleeper posts.
  void SleepForPost();
  bool SleepForPostUntil(std::chrono::steady_clock::time_point deadline);
  // After a timed-out sleep: false once withdrawn, true if it took a post.
  bool Withdraw();
  void AfterPost();

  // Takeable when positive; when negative, that many threads sleep on
  // sleepers_ (or are about to), each owed one post by the Signal that
  // brings the count back up past it.
  std::atomic<int64_t> count_{0};
  sem_t sleepers_;
  const int spins_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_UTIL_SEMAPHORE_H_
