// bus/util/semaphore.cc: the counting semaphore the dispatcher and the
// committer wait on. No spinning here, so that every wait sleeps and the
// sleeper bookkeeping (the part that can lose or invent a wake-up) runs.
#include "bus/util/semaphore.h"

#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>
#include <vector>

namespace walbus::internal {
namespace {

using namespace std::chrono_literals;
using Steady = std::chrono::steady_clock;

TEST(SemaphoreTest, SignalsAreCountedAndTakenOnce) {
  Semaphore s(/*spins=*/0);
  EXPECT_FALSE(s.TryWait());
  s.Signal(2);
  EXPECT_EQ(s.available(), 2);
  EXPECT_TRUE(s.TryWait());
  EXPECT_TRUE(s.WaitUntil(Steady::now()));
  EXPECT_FALSE(s.TryWait());
  EXPECT_EQ(s.available(), 0);
}

TEST(SemaphoreTest, AWaitEndsAtItsDeadlineNotBefore) {
  Semaphore s(/*spins=*/0);
  const auto start = Steady::now();
  EXPECT_FALSE(s.WaitUntil(start + 30ms));
  EXPECT_GE(Steady::now() - start, 30ms);
  EXPECT_FALSE(s.WaitUntil(start - 1h)) << "a deadline passed already is an immediate timeout";
  s.Signal();
  EXPECT_TRUE(s.TryWait()) << "a timed-out wait took nothing with it";
}

TEST(SemaphoreTest, ASignalWakesASleeper) {
  Semaphore s(/*spins=*/0);
  std::atomic<bool> woken{false};
  std::thread sleeper([&] {
    s.Wait();
    woken = true;
  });
  std::this_thread::sleep_for(20ms);
  EXPECT_FALSE(woken.load());
  s.Signal();
  sleeper.join();
  EXPECT_TRUE(woken.load());
  EXPECT_FALSE(s.TryWait());
}

TEST(SemaphoreTest, AFarDeadlineWaitsForTheSignal) {
  Semaphore s(/*spins=*/0);
  std::thread signaller([&] {
    std::this_thread::sleep_for(10ms);
    s.Signal();
  });
  EXPECT_TRUE(s.WaitUntil(Steady::time_point::max()));
  signaller.join();
}

// Timeouts racing signals: a waiter that times out just as a signal counts
// it as a sleeper must take that signal's post, or the post would wake a
// later wait that nothing signalled (and the signal would be lost to the
// count); and it must not wait for that post if another sleeper took it,
// or it would sleep past its deadline until the next signal (after the
// last one: for ever). Every signal is taken exactly once, none is
// invented, and every waiter returns.
TEST(SemaphoreTest, TimeoutsRacingSignalsNeitherLoseNorInventOne) {
  Semaphore s(/*spins=*/0);
  constexpr int64_t kSignals = 100000;
  constexpr int kWaiters = 4;
  std::atomic<int64_t> taken{0};
  std::atomic<int> returned{0};
  std::vector<std::thread> waiters;
  for (int w = 0; w < kWaiters; ++w) {
    waiters.emplace_back([&, w] {
      std::mt19937 rng(w);
      while (taken.load() < kSignals) {
        if (s.WaitUntil(Steady::now() + std::chrono::microseconds(rng() % 20))) taken.fetch_add(1);
      }
      returned.fetch_add(1);
    });
  }
  std::mt19937 rng(7);
  for (int64_t sent = 0; sent < kSignals;) {
    const int64_t burst = std::min<int64_t>(1 + rng() % 4, kSignals - sent);
    s.Signal(burst);
    sent += burst;
    if (rng() % 8 == 0) std::this_thread::sleep_for(std::chrono::microseconds(rng() % 30));
  }
  // A waiter stuck past its deadline fails here instead of hanging the
  // test; the extra signals then release it.
  const auto deadline = Steady::now() + 20s;
  while (returned.load() < kWaiters && Steady::now() < deadline) std::this_thread::sleep_for(1ms);
  EXPECT_EQ(returned.load(), kWaiters) << "a wait slept past its deadline";
  if (returned.load() < kWaiters) s.Signal(kWaiters);
  for (auto& t : waiters) t.join();
  EXPECT_EQ(taken.load(), kSignals);
  EXPECT_EQ(s.available(), 0);
  EXPECT_FALSE(s.WaitUntil(Steady::now() + 20ms)) << "a stale post woke a wait nothing signalled";
}

}  // namespace
}  // namespace walbus::internal
