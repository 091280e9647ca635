#include "bus/core/call_gate.h"

#include <cassert>

namespace walbus::internal {
namespace {

thread_local const CallGate* innermost_call = nullptr;

}  // namespace

CallGate::Call::Call(CallGate* gate) : gate_(gate) {
  gate_->active_.fetch_add(1);
  admitted_ = !gate_->closed_.load();
  if (!admitted_) {
    gate_->active_.fetch_sub(1);
    if (gate_->closed_.load()) gate_->active_.notify_all();
    return;
  }
  outer_ = innermost_call;
  innermost_call = gate_;
}

CallGate::Call::~Call() {
  if (!admitted_) return;
  innermost_call = outer_;
  // Sequentially consistent: when Shut() came before this decrement, the
  // load below sees it, and the waiter is woken.
  gate_->active_.fetch_sub(1);
  if (gate_->closed_.load()) gate_->active_.notify_all();
}

bool CallGate::InsideCall() const { return innermost_call == this; }

void CallGate::WaitForCallsToLeave() {
  assert(closed_.load() && !InsideCall());
  for (int active = active_.load(); active != 0; active = active_.load()) active_.wait(active);
}

}  // namespace walbus::internal
