#include "walbus/clock.h"

#include <cassert>

namespace walbus {
namespace {

class SystemClock final : public Clock {
 public:
  std::chrono::steady_clock::time_point Now() const override { return std::chrono::steady_clock::now(); }
  std::chrono::system_clock::time_point WallNow() const override { return std::chrono::system_clock::now(); }
};

}  // namespace

std::shared_ptr<const Clock> Clock::System() {
  static const std::shared_ptr<const Clock> clock = std::make_shared<SystemClock>();
  return clock;
}

// On a whole millisecond: a delay of N ms then falls due exactly N ms
// later (walbus rounds a moment with a fraction up, never to be early).
ManualClock::ManualClock()
    : steady_start_(std::chrono::steady_clock::now()),
      wall_start_(std::chrono::floor<std::chrono::milliseconds>(std::chrono::system_clock::now())) {}

std::chrono::steady_clock::time_point ManualClock::Now() const {
  return steady_start_ + std::chrono::milliseconds(advanced_ms_.load(std::memory_order_acquire));
}

std::chrono::system_clock::time_point ManualClock::WallNow() const {
  return wall_start_ + std::chrono::milliseconds(advanced_ms_.load(std::memory_order_acquire) +
                                                 wall_step_ms_.load(std::memory_order_acquire));
}

uint64_t ManualClock::Watch(std::function<void()> on_move) const {
  std::lock_guard<std::mutex> lock(watchers_mu_);
  const uint64_t id = next_watch_id_++;
  watchers_.emplace(id, std::move(on_move));
  return id;
}

void ManualClock::Unwatch(uint64_t id) const {
  {
    std::lock_guard<std::mutex> lock(watchers_mu_);
    watchers_.erase(id);
  }
  std::lock_guard<std::mutex> lock(awaited_mu_);
  awaited_.erase(id);
}

void ManualClock::Awaiting(uint64_t id, std::optional<std::chrono::steady_clock::time_point> moment) const {
  std::lock_guard<std::mutex> lock(awaited_mu_);
  if (moment) {
    awaited_[id] = *moment;
  } else {
    awaited_.erase(id);
  }
}

std::optional<std::chrono::steady_clock::time_point> ManualClock::NextAwaited() const {
  std::lock_guard<std::mutex> lock(awaited_mu_);
  std::optional<std::chrono::steady_clock::time_point> earliest;
  for (const auto& [id, moment] : awaited_) earliest = earliest ? std::min(*earliest, moment) : moment;
  return earliest;
}

void ManualClock::Advance(std::chrono::milliseconds d) {
  assert(d.count() >= 0);
  advanced_ms_.fetch_add(d.count(), std::memory_order_acq_rel);
  WakeWatchers();
}

void ManualClock::StepWall(std::chrono::milliseconds d) {
  wall_step_ms_.fetch_add(d.count(), std::memory_order_acq_rel);
  WakeWatchers();
}

void ManualClock::WakeWatchers() const {
  std::lock_guard<std::mutex> lock(watchers_mu_);
  for (const auto& [id, on_move] : watchers_) on_move();
}

}  // namespace walbus
