#include "bus/core/call_gate.h"

#include <cassert>
#include <chrono>
#include <thread>

namespace walbus::internal {
namespace {

thread_local const CallGate* innermost_call = nullptr;

}  // namespace

CallGate::Call::Call(CallGate* gate) : gate_(gate) {
  gate_->active_.fetch_add(1);
  admitted_ = !gate_->closed_.load();
  if (!admitted_) {
    gate_->active_.fetch_sub(1);  // the last touch of the gate: see ~Call
    return;
  }
  outer_ = innermost_call;
  innermost_call = gate_;
}

CallGate::Call::~Call() {
  if (!admitted_) return;
  innermost_call = outer_;
  // The last touch of the gate: once the count is down, Close() may
  // return and the bus be destroyed, so nothing here may follow it (not
  // even a notify; the waiter looks again instead).
  gate_->active_.fetch_sub(1);
}

bool CallGate::InsideCall() const { return innermost_call == this; }

void CallGate::WaitForCallsToLeave() {
  assert(closed_.load() && !InsideCall());
  // Only Close() waits here, for calls already inside storage to finish.
  while (active_.load() != 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
}

}  // namespace walbus::internal
