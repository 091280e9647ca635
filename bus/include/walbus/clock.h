// Clock: where walbus reads the time, so tests can move it.
//
// Threading: implementations must be thread-safe; walbus calls them from
// its dispatcher and worker threads.
#ifndef WALBUS_CLOCK_H_
#define WALBUS_CLOCK_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "walbus/export.h"

namespace walbus {

// A source of monotonic and wall time (Options::clock).
class WALBUS_EXPORT Clock {
 public:
  virtual ~Clock() = default;
  // Monotonic time: retry delays, timeouts, intervals.
  virtual std::chrono::steady_clock::time_point Now() const = 0;
  // Wall time: event times, failure times in records.
  virtual std::chrono::system_clock::time_point WallNow() const = 0;

  // Whether time passes by itself, as on the system clock: a bus then
  // sleeps towards its next due moment on the real clock. A clock that
  // moves only when told (ManualClock) says false, and calls what Watch
  // was given each time it moves: a bus using it sleeps until then.
  virtual bool PassesByItself() const { return true; }
  // Called by a bus with what to call when the clock moves (it wakes the
  // bus); the returned id undoes it (Unwatch, which returns once no call
  // of it is running). A clock that passes by itself may ignore both.
  // `on_move` must not call Watch or Unwatch.
  // @{
  virtual uint64_t Watch(std::function<void()> on_move) const {  // NOLINT: a sink (ManualClock keeps it)
    (void)on_move;
    return 0;
  }
  virtual void Unwatch(uint64_t id) const { (void)id; }
  // Called by a bus that watches the clock (`id`: Watch's) each time it
  // goes to sleep, with the next moment on Now's timeline it has work
  // for (a retry's backoff, a scheduled event), or none. Housekeeping
  // (checkpoints, trims) is not reported.
  virtual void Awaiting(uint64_t id, std::optional<std::chrono::steady_clock::time_point> moment) const {
    (void)id;
    (void)moment;
  }
  // @}

  // The real clocks. Never null; shared by every bus.
  static std::shared_ptr<const Clock> System();
};

// A clock that moves only when told, for tests of time: a 15-minute
// timeout, a retry's backoff or a retention age runs in the time a test
// takes to call Advance. It starts at the real time of its construction,
// rounded down to the millisecond, so that a delay of d falls due after
// an Advance of exactly d.
// Every bus using it wakes when it moves, so what falls due runs; with it,
// Bus::WaitCaughtUp returns once nothing more can run before it moves
// again. One clock may serve several buses (a test restarting one).
//
// Threading: thread-safe.
class WALBUS_EXPORT ManualClock final : public Clock {
 public:
  ManualClock();

  std::chrono::steady_clock::time_point Now() const override;
  std::chrono::system_clock::time_point WallNow() const override;
  bool PassesByItself() const override { return false; }
  uint64_t Watch(std::function<void()> on_move) const override;
  void Unwatch(uint64_t id) const override;
  void Awaiting(uint64_t id, std::optional<std::chrono::steady_clock::time_point> moment) const override;

  // The earliest moment a bus using the clock has work for, as the buses
  // last said going to sleep (Awaiting), or none: where a test that moves
  // time step by step stops next (the test kit's AdvanceTime).
  std::optional<std::chrono::steady_clock::time_point> NextAwaited() const;

  // Moves both clocks forward by `d` and wakes every bus using it.
  // REQUIRES: d >= 0.
  void Advance(std::chrono::milliseconds d);
  // Moves the wall clock alone, by `d` either way, as an NTP step or a
  // user setting the time would, and wakes every bus using it.
  void StepWall(std::chrono::milliseconds d);

 private:
  void WakeWatchers() const;

  const std::chrono::steady_clock::time_point steady_start_;
  const std::chrono::system_clock::time_point wall_start_;
  std::atomic<int64_t> advanced_ms_{0};
  std::atomic<int64_t> wall_step_ms_{0};
  mutable std::mutex watchers_mu_;  // held while the watchers are called
  mutable uint64_t next_watch_id_ = 1;
  mutable std::map<uint64_t, std::function<void()>> watchers_;
  mutable std::mutex awaited_mu_;  // not held while watchers are called
  mutable std::map<uint64_t, std::chrono::steady_clock::time_point> awaited_;
};

}  // namespace walbus

#endif  // WALBUS_CLOCK_H_
