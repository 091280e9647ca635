#include "bus/dispatch/run_gate.h"

#include <cassert>

namespace walbus::internal {

RunGate::Pass::Pass(RunGate* gate, Kind kind) : gate_(gate), kind_(kind) {
  if (kind_ == Kind::kAlone) {
    gate_->EnterAlone();
  } else {
    gate_->EnterShared();
  }
}

RunGate::Pass::~Pass() {
  if (kind_ == Kind::kAlone) {
    gate_->LeaveAlone();
  } else {
    gate_->LeaveShared();
  }
}

void RunGate::EnterShared() {
  uint64_t state = state_.load(std::memory_order_relaxed);
  while (true) {
    if ((state & kAloneBit) == 0) {
      if (state_.compare_exchange_weak(state, state + 1, std::memory_order_acquire, std::memory_order_relaxed)) return;
      continue;
    }
    MutexLock lock(&mu_);
    // LeaveAlone clears the bit and notifies under the mutex: seen set
    // here, under it, the notification is still to come.
    ++shared_sleeping_;
    while ((state_.load(std::memory_order_relaxed) & kAloneBit) != 0) changed_.Wait(&lock);
    --shared_sleeping_;
    state = state_.load(std::memory_order_relaxed);
  }
}

void RunGate::LeaveShared() {
  const uint64_t before = state_.fetch_sub(1, std::memory_order_release);
  assert((before & ~kAloneBit) > 0);
  // The last shared pass out, with an alone pass waiting for it.
  if (before == (kAloneBit | 1)) {
    MutexLock lock(&mu_);
    changed_.NotifyAll();
  }
}

void RunGate::EnterAlone() {
  MutexLock lock(&mu_);
  while (alone_taken_) changed_.Wait(&lock);
  alone_taken_ = true;
  state_.fetch_or(kAloneBit, std::memory_order_relaxed);
  // The shared passes under way leave; new ones wait for the bit.
  while (state_.load(std::memory_order_acquire) != kAloneBit) changed_.Wait(&lock);
}

void RunGate::LeaveAlone() {
  MutexLock lock(&mu_);
  assert(alone_taken_);
  alone_taken_ = false;
  state_.fetch_and(~kAloneBit, std::memory_order_release);
  changed_.NotifyAll();
}

}  // namespace walbus::internal
