#include "bus/dispatch/progress_board.h"

#include <algorithm>
#include <utility>

namespace walbus::internal {

void ProgressBoard::Add(std::shared_ptr<Subscriber> subscriber) {
  MutexLock lock(&mu_);
  added_.push_back(std::move(subscriber));
}

Status ProgressBoard::WaitFor(uint64_t target, std::chrono::milliseconds timeout,
                              const std::vector<std::string>& names) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  auto waited_on = [&names](const Subscriber& s) {
    return names.empty() || std::find(names.begin(), names.end(), s.name) != names.end();
  };
  while (true) {
    bool reached = std::all_of(added_.begin(), added_.end(), [&](const auto& s) {
      return !waited_on(*s) || s->watermark.load(std::memory_order_acquire) >= target;
    });
    if (reached) return Status::OK();
    if (cancelled_) return Status::Closed("the bus is closed");
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut("subscribers did not reach seq " + std::to_string(target) + " in time");
    }
    // PostProgress notifies under mu_ whenever a watermark moves, and
    // Close through Cancel: no wake-up is missed.
    changed_.WaitUntil(&lock, deadline);
  }
}

Status ProgressBoard::WaitSettled(std::chrono::milliseconds timeout, const std::function<void()>& look_again) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  MutexLock lock(&mu_);
  // A settled moment counts only if the dispatcher looked after this call.
  const uint64_t before = settled_epoch_;
  look_again();
  while (settled_epoch_ == before) {
    if (cancelled_) return Status::Closed("the bus is closed");
    if (std::chrono::steady_clock::now() >= deadline) {
      return Status::TimedOut("the bus did not settle: handlers kept running");
    }
    changed_.WaitUntil(&lock, deadline);
  }
  return Status::OK();
}

void ProgressBoard::PostProgress() {
  MutexLock lock(&mu_);
  changed_.NotifyAll();
}

void ProgressBoard::PostSettled(const std::function<bool()>& work_waiting) {
  MutexLock lock(&mu_);
  if (work_waiting()) return;
  ++settled_epoch_;
  changed_.NotifyAll();
}

void ProgressBoard::Cancel() {
  {
    MutexLock lock(&mu_);
    cancelled_ = true;
  }
  changed_.NotifyAll();
}

}  // namespace walbus::internal
