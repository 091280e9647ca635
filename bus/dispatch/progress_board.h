// ProgressBoard: where callers wait on the dispatcher's progress (the
// bus's waits): until the subscribers' watermarks reach a seq, or until
// the dispatcher, under a clock that does not pass by itself, finds
// nothing it can run before the clock moves. The dispatcher posts to it;
// Close cancels every wait.
//
// Threading: thread-safe. Waits block the caller; posts never block for
// long (one lock, one notify).
#ifndef WALBUS_BUS_DISPATCH_PROGRESS_BOARD_H_
#define WALBUS_BUS_DISPATCH_PROGRESS_BOARD_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bus/dispatch/subscriber.h"
#include "bus/util/mutex.h"
#include "walbus/status.h"

namespace walbus::internal {

class ProgressBoard {
 public:
  ProgressBoard() = default;
  ProgressBoard(const ProgressBoard&) = delete;
  ProgressBoard& operator=(const ProgressBoard&) = delete;

  // A subscriber whose watermark waits read from now on.
  void Add(std::shared_ptr<Subscriber> subscriber);

  // Blocks until the watermark of every added subscriber (or of those
  // named, when `names` is not empty) reaches `target`. TimedOut; Closed
  // once Cancel() was called.
  Status WaitFor(uint64_t target, std::chrono::milliseconds timeout, const std::vector<std::string>& names = {});
  // Blocks until a settled moment is posted after the call (PostSettled).
  // `look_again` runs once, under the board's lock, after the moment to
  // wait past is read: it makes the dispatcher look again. TimedOut;
  // Closed once Cancel() was called.
  Status WaitSettled(std::chrono::milliseconds timeout, const std::function<void()>& look_again);

  // Some watermark moved: the waits look again.
  void PostProgress();
  // The dispatcher found nothing it can run before its clock moves, unless
  // `work_waiting` says otherwise: it runs under the board's lock, so a
  // message sent before a WaitSettled began is seen, and the moment is not
  // counted.
  void PostSettled(const std::function<bool()>& work_waiting);
  // Makes every wait, running or to come, return Closed (Bus::Close).
  void Cancel();

 private:
  Mutex mu_;
  CondVar changed_;
  std::vector<std::shared_ptr<Subscriber>> added_ GUARDED_BY(mu_);
  bool cancelled_ GUARDED_BY(mu_) = false;
  // Counts the settled moments posted.
  uint64_t settled_epoch_ GUARDED_BY(mu_) = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_PROGRESS_BOARD_H_
