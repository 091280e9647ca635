// Timeline: the time scheduled events fall due in. It is the wall clock
// (due times mean wall-clock moments) that never runs backwards: when the
// wall clock steps back, the step is added to a rewind and the timeline
// goes on at the pace of the monotonic clock, so a timer set "in 15
// minutes" fires 15 minutes of elapsed time later however far the clock
// moved back meanwhile. A forward step moves the timeline with it: what
// falls due fires, nothing else. The last moment and the rewind are
// stored (storage/keys.h, kMetaTimeline), so a process started with a
// wall clock earlier than the one that scheduled a timer takes the step
// as one too (the downtime itself cannot be measured without a clock that
// kept running, and counts as none).
//
//   timeline ms = wall clock (unix ms) + rewind
//
// Threading: thread-safe; every method takes one short lock.
#ifndef WALBUS_BUS_CORE_TIMELINE_H_
#define WALBUS_BUS_CORE_TIMELINE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "bus/util/mutex.h"
#include "walbus/clock.h"

namespace walbus::internal {

class Timeline {
 public:
  // What is stored of a timeline.
  struct State {
    uint64_t last_ms = 0;    // the latest timeline moment read
    uint64_t rewind_ms = 0;  // the wall clock's backward steps, summed
  };
  // Backward steps shorter than this are taken as jitter between the two
  // clocks (and the timeline only waits for the wall clock to pass its last
  // moment again); longer ones are added to the rewind.
  static constexpr std::chrono::milliseconds kStepTolerance{250};

  // REQUIRES: clock outlives the timeline. `stored`: State() as last
  // stored, or {} for a database that never had timers.
  Timeline(const Clock* clock, State stored);

  // The timeline's moment now, in whole milliseconds passed (rounded
  // down): never below a moment returned before.
  uint64_t NowMs();
  // The same, and whether the moment is that millisecond exactly (a wall
  // clock on a whole millisecond, as a ManualClock keeps it): a delay
  // counted from it is then not lengthened to be safe from rounding.
  struct Reading {
    uint64_t ms = 0;
    bool exact = false;
  };
  Reading Read();
  // The timeline moment of a wall-clock time (EventSpec::deliver_at),
  // rounded up to the millisecond.
  uint64_t AtWall(std::chrono::system_clock::time_point wall);
  // The wall-clock time of a timeline moment, by the current rewind.
  std::chrono::system_clock::time_point ToWall(uint64_t timeline_ms);
  State state();

  // The stored form, 16 bytes; Decode is false for anything else.
  static std::string Encode(State s);
  static bool Decode(std::string_view in, State* s);

 private:
  // Moves the timeline to now; *exact (when given) says whether now is
  // its millisecond exactly.
  uint64_t AdvanceLocked(bool* exact = nullptr) REQUIRES(mu_);

  const Clock* const clock_;
  Mutex mu_;
  State state_ GUARDED_BY(mu_);
  std::chrono::steady_clock::time_point last_steady_ GUARDED_BY(mu_);
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_TIMELINE_H_
