// RunGate: the workers' handler runs go side by side, or one goes alone.
//
// After a crash, an event that may have been running when the process died
// runs alone (crash-loop protection,
// docs/decisions/0040-crash-loop-protection-without-a-write-per-event.md):
// while its attempt is recorded, its handler runs and its outcome commits,
// no other handler runs. If it takes the process down again, no other
// event was running, so none is charged the run. Ordinary runs share the
// gate. A run waiting to go alone keeps new shared runs out, so it waits
// only for those under way, never for a stream of new ones.
//
// A shared pass is one compare-and-swap in and one decrement out, and
// never sleeps unless a run goes alone: the workers take one per batch.
//
// Threading: thread-safe. A pass belongs to the thread that took it; a
// thread holds at most one pass at a time (a second would wait for itself).
#ifndef WALBUS_BUS_DISPATCH_RUN_GATE_H_
#define WALBUS_BUS_DISPATCH_RUN_GATE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

#include "bus/util/mutex.h"

namespace walbus::internal {

class RunGate {
 public:
  RunGate() = default;
  RunGate(const RunGate&) = delete;
  RunGate& operator=(const RunGate&) = delete;

  // Holds the gate for its scope: shared with other shared passes, or alone.
  class Pass {
   public:
    enum class Kind : bool { kShared, kAlone };
    Pass(RunGate* gate, Kind kind);
    ~Pass();
    Pass(const Pass&) = delete;
    Pass& operator=(const Pass&) = delete;

   private:
    RunGate* const gate_;
    const Kind kind_;
  };

  // For tests: whether an alone pass holds the gate or waits for it, and
  // how many shared passes sleep until it leaves.
  // @{
  bool alone_for_testing() const { return (state_.load(std::memory_order_acquire) & kAloneBit) != 0; }
  size_t shared_sleeping_for_testing() EXCLUDES(mu_) {
    MutexLock lock(&mu_);
    return shared_sleeping_;
  }
  // @}

 private:
  void EnterShared() EXCLUDES(mu_);
  void LeaveShared() EXCLUDES(mu_);
  void EnterAlone() EXCLUDES(mu_);
  void LeaveAlone() EXCLUDES(mu_);

  // Shared passes held, plus kAloneBit while an alone pass is held or
  // waits for the shared ones to leave.
  static constexpr uint64_t kAloneBit = uint64_t{1} << 63;
  std::atomic<uint64_t> state_{0};
  // Sleeping: shared passes while kAloneBit is set, an alone pass while
  // shared ones remain or another goes alone.
  Mutex mu_;
  CondVar changed_;
  bool alone_taken_ GUARDED_BY(mu_) = false;    // kAloneBit is this pass's
  size_t shared_sleeping_ GUARDED_BY(mu_) = 0;  // shared passes waiting in EnterShared
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_RUN_GATE_H_
