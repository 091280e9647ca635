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
  MutexLock lock(&mu_);
  while (alone_ || alone_waiting_ > 0) changed_.Wait(&lock);
  ++shared_;
}

void RunGate::LeaveShared() {
  MutexLock lock(&mu_);
  assert(shared_ > 0);
  // Only a run waiting to go alone waits for the shared ones to leave.
  if (--shared_ == 0 && alone_waiting_ > 0) changed_.NotifyAll();
}

void RunGate::EnterAlone() {
  MutexLock lock(&mu_);
  ++alone_waiting_;
  while (alone_ || shared_ > 0) changed_.Wait(&lock);
  --alone_waiting_;
  alone_ = true;
}

void RunGate::LeaveAlone() {
  MutexLock lock(&mu_);
  assert(alone_);
  alone_ = false;
  changed_.NotifyAll();
}

size_t RunGate::alone_waiting_for_testing() const {
  MutexLock lock(&mu_);
  return alone_waiting_;
}

}  // namespace walbus::internal
