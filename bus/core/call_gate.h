// CallGate: admission of calls into a bus's storage, and Close's wait for
// them. A public call holds a Call for as long as it may use storage (the
// database, the committer's writes), and so does each call of a
// Transaction on an application thread. Close() shuts the gate (new calls
// are refused: admitted() is false, they return Closed) and waits for the
// admitted ones to leave before it stops the threads and closes storage.
// Counting in before looking at `closed` means Close() either sees the
// call and waits, or the call sees Close() and stays out. A refused call
// leaves at once, so a stream of them cannot hold Close() up.
//
// Threading: thread-safe. Never allocates. A call touches the gate last
// when it counts out, so the bus may be destroyed as soon as Close()
// returns.
#ifndef WALBUS_BUS_CORE_CALL_GATE_H_
#define WALBUS_BUS_CORE_CALL_GATE_H_

#include <atomic>

#include "walbus/status.h"

namespace walbus::internal {

// What a call the gate refused returns.
inline Status ClosedStatus() { return Status::Closed("the bus is closed"); }

class CallGate {
 public:
  class Call {
   public:
    explicit Call(CallGate* gate);
    ~Call();
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;
    bool admitted() const { return admitted_; }

   private:
    CallGate* const gate_;
    bool admitted_ = false;
    const CallGate* outer_ = nullptr;  // this thread's enclosing call, restored on leaving
  };

  bool closed() const { return closed_.load(); }
  // True while this thread is inside an admitted call through this gate (a
  // verifier or an upcaster runs there): Close() would wait for itself.
  bool InsideCall() const;
  // Refuses every call from now on. Idempotent.
  void Shut() { closed_.store(true); }
  // Blocks until no admitted call is left. REQUIRES: Shut() was called,
  // and not from inside a call (InsideCall() is false).
  void WaitForCallsToLeave();

 private:
  std::atomic<bool> closed_{false};
  std::atomic<int> active_{0};
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_CORE_CALL_GATE_H_
