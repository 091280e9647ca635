#include "bus/core/timeline.h"

#include <cassert>

#include "storage/keys.h"

namespace walbus::internal {
namespace {

int64_t UnixMs(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(t.time_since_epoch()).count();
}

// Wall-clock milliseconds, read as unsigned: a clock set before 1970 reads
// as 1970.
uint64_t WallMs(std::chrono::system_clock::time_point t) {
  const int64_t ms = UnixMs(t);
  return ms < 0 ? 0 : static_cast<uint64_t>(ms);
}

}  // namespace

Timeline::Timeline(const Clock* clock, State stored) : clock_(clock) {
  assert(clock_ != nullptr);
  MutexLock lock(&mu_);
  state_ = stored;
  last_steady_ = clock_->Now();
  // A start whose wall clock is behind the stored moment by more than
  // jitter: the clock stepped back while the process was down (a device
  // without a real-time clock, before its time is synced).
  const uint64_t wall = WallMs(clock_->WallNow()) + state_.rewind_ms;
  const auto tolerance = static_cast<uint64_t>(kStepTolerance.count());
  if (wall + tolerance < state_.last_ms) state_.rewind_ms += state_.last_ms - wall;
  AdvanceLocked();
}

uint64_t Timeline::AdvanceLocked(bool* exact) {
  const auto steady = clock_->Now();
  const auto elapsed = std::chrono::duration_cast<std::chrono::milliseconds>(steady - last_steady_).count();
  const uint64_t by_steady = state_.last_ms + static_cast<uint64_t>(elapsed > 0 ? elapsed : 0);
  const auto wall = clock_->WallNow();
  const uint64_t by_wall = WallMs(wall) + state_.rewind_ms;
  const auto tolerance = static_cast<uint64_t>(kStepTolerance.count());
  uint64_t now = by_wall;
  bool whole = wall.time_since_epoch() % std::chrono::milliseconds(1) == std::chrono::system_clock::duration(0);
  if (by_wall + tolerance < by_steady) {
    // The wall clock stepped back: the step joins the rewind and the
    // timeline keeps the monotonic clock's pace.
    state_.rewind_ms += by_steady - by_wall;
    now = by_steady;
    whole = false;
  }
  // Within jitter the timeline stands still rather than run backwards
  // (the real moment is before it: it is not early).
  if (now < state_.last_ms) {
    now = state_.last_ms;
    whole = true;
  }
  if (exact != nullptr) *exact = whole;
  // Only move the steady anchor with the timeline: a reading that stood
  // still keeps measuring from the moment it stood at.
  if (now > state_.last_ms || by_wall + tolerance < by_steady) last_steady_ = steady;
  state_.last_ms = now;
  return now;
}

uint64_t Timeline::NowMs() {
  MutexLock lock(&mu_);
  return AdvanceLocked();
}

Timeline::Reading Timeline::Read() {
  MutexLock lock(&mu_);
  Reading r;
  r.ms = AdvanceLocked(&r.exact);
  return r;
}

uint64_t Timeline::AtWall(std::chrono::system_clock::time_point wall) {
  MutexLock lock(&mu_);
  AdvanceLocked();
  // Rounded up to the millisecond: a moment is never reached early.
  const bool partial = wall.time_since_epoch() % std::chrono::milliseconds(1) != std::chrono::system_clock::duration(0);
  return WallMs(wall) + (partial && UnixMs(wall) >= 0 ? 1 : 0) + state_.rewind_ms;
}

std::chrono::system_clock::time_point Timeline::ToWall(uint64_t timeline_ms) {
  MutexLock lock(&mu_);
  AdvanceLocked();
  const int64_t wall = static_cast<int64_t>(timeline_ms) - static_cast<int64_t>(state_.rewind_ms);
  return std::chrono::system_clock::time_point(std::chrono::milliseconds(wall));
}

Timeline::State Timeline::state() {
  MutexLock lock(&mu_);
  AdvanceLocked();
  return state_;
}

std::string Timeline::Encode(State s) {
  std::string out;
  storage::PutBe64(&out, s.last_ms);
  storage::PutBe64(&out, s.rewind_ms);
  return out;
}

bool Timeline::Decode(std::string_view in, State* s) {
  if (in.size() != 16) return false;
  s->last_ms = storage::GetBe64(in);
  s->rewind_ms = storage::GetBe64(in.substr(8));
  return true;
}

}  // namespace walbus::internal
