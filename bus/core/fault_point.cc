#include "bus/core/fault_point.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cassert>
#include <string>

namespace walbus::internal::fault {

const std::vector<std::string_view>& AllPoints() {
  static const std::vector<std::string_view> points = {
      "commit.before_write",      // the group is built, nothing written
      "commit.after_write",       // written, callers not yet told
      "handler.before_commit",    // a handler ran; its effects not written
      "handler.after_commit",     // effects written; the dispatcher not told
      "checkpoint.before_write",  // watermarks moved in memory only
      "trim.after_write",         // outbox range removed
      "recovery.after_open",      // state read back, nothing dispatched
  };
  return points;
}

#ifdef WALBUS_FAULT_POINTS
namespace {
std::string armed_point;             // written by Arm before any Hit
std::atomic<int64_t> remaining{-1};  // < 0: disarmed
}  // namespace

void Arm(std::string_view point, uint64_t countdown) {
  assert(std::find(AllPoints().begin(), AllPoints().end(), point) != AllPoints().end());
  armed_point = std::string(point);
  remaining.store(static_cast<int64_t>(countdown), std::memory_order_release);
}

void Hit(std::string_view point) {
  if (remaining.load(std::memory_order_acquire) < 0 || point != armed_point) return;
  if (remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) {
    static constexpr char kMsg[] = "walbus: fault point reached, killing the process\n";
    ssize_t ignored = write(STDERR_FILENO, kMsg, sizeof(kMsg) - 1);
    (void)ignored;
    kill(getpid(), SIGKILL);
  }
}
#endif

}  // namespace walbus::internal::fault
