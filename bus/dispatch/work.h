// What the dispatcher thread and the workers pass each other: a WorkItem
// (an event for a handler, with what memory knows of its earlier runs) one
// way, a Message (an outcome, or a request from another thread) the other.
//
// Threading: plain values, moved between threads through the dispatcher's
// queues; the Subscriber they point to belongs to the dispatcher thread.
#ifndef WALBUS_BUS_DISPATCH_WORK_H_
#define WALBUS_BUS_DISPATCH_WORK_H_

#include <chrono>
#include <cstdint>
#include <future>
#include <memory>
#include <string>
#include <vector>

#include "bus/dispatch/run_history.h"
#include "bus/dispatch/subscriber.h"
#include "storage/records.h"

namespace walbus::internal {

struct WorkItem {
  Subscriber* sub = nullptr;
  std::shared_ptr<const Event> event;
  RunHistory history;             // what memory knows of the event's earlier runs
  uint64_t parked_behind = 0;     // kParkKey: seq of the dead letter holding the subject
  bool redrive = false;           // a dead letter an operator sent back
  bool has_retry_record = false;  // found (or written) in walbus.retries
  bool replaying = false;         // run again by a replay
  uint64_t replay_id = 0;         // replaying: which replay
  uint64_t replay_scope = 0;      // kFreshScope: the replay's id, its inbox scope
  // A turn: the events of the subject after `event`, run after it in
  // order by the same worker, each on top of the writes of those before
  // (Dispatcher::Submit).
  std::vector<std::shared_ptr<const Event>> followers;

  uint32_t attempt() const { return history.attempt(); }  // this run's number
};

struct Message {
  enum class Kind : uint8_t {
    kWake,
    kAdd,
    kDone,          // handled: effects committed
    kDeadLettered,  // given up: the dead letter committed
    kDuplicate,     // the inbox already had it
    kStale,         // skipped by skip_stale
    kRetry,         // failed; run again after `delay`
    kWait,          // not ready (Outcome::Wait); run again after `delay`, as the same attempt
    kRerun,         // effects conflicted; run again now
    kPaused,        // no upcaster reaches a version the subscriber takes
    kResume,        // an upcaster was registered
    kRedrive,       // an operator sent dead letters back
    kReplay,        // an operator started (or a reopen resumed) a replay
    kCancelReplay,
    kMakeRoom,  // the disk budget refused a commit (Dispatcher::MakeRoom)
  };

  // The answers of a run, made by name. An outcome that carries nothing but the event (kDone, kDeadLettered,
  // kDuplicate, kStale, kPaused).
  static Message Of(Kind kind, Subscriber* sub, std::shared_ptr<const Event> event) {
    Message m;
    m.kind = kind;
    m.sub = sub;
    m.event = std::move(event);
    return m;
  }
  // Run again after `delay` (a failed run: kRetry; one not ready: kWait)
  // or now (effects that conflicted: kRerun), starting from `next`.
  static Message Retry(Subscriber* sub, std::shared_ptr<const Event> event, std::chrono::milliseconds delay,
                       const RunHistory& next) {
    return RunAgain(Kind::kRetry, sub, std::move(event), delay, next);
  }
  static Message Wait(Subscriber* sub, std::shared_ptr<const Event> event, std::chrono::milliseconds delay,
                      const RunHistory& next) {
    return RunAgain(Kind::kWait, sub, std::move(event), delay, next);
  }
  static Message Rerun(Subscriber* sub, std::shared_ptr<const Event> event, const RunHistory& next) {
    return RunAgain(Kind::kRerun, sub, std::move(event), std::chrono::milliseconds{0}, next);
  }

  Kind kind = Kind::kWake;
  Subscriber* sub = nullptr;
  std::shared_ptr<const Event> event;
  std::chrono::milliseconds delay{0};  // kRetry, kWait
  RunHistory next;                     // kRetry, kWait, kRerun: what the next run starts from
  // What the rare kinds carry (kAdd, kRedrive, kReplay, kCancelReplay,
  // kMakeRoom),
  // kept out of line: a completion per handled event passes through the
  // queue, and stays small.
  struct Control {
    std::shared_ptr<Subscriber> added;  // kAdd
    // kRedrive
    std::string subscriber;
    std::vector<uint64_t> seqs;
    std::vector<std::string> release;
    bool rerun = true;
    // kReplay, kCancelReplay
    uint64_t replay_id = 0;
    storage::ReplayRecord replay;  // kCancelReplay: only who cancelled, and why
    // kMakeRoom: the bytes wanted, and where the bytes freed go.
    uint64_t room_bytes = 0;
    std::promise<uint64_t> room_freed;
  };
  std::unique_ptr<Control> control;
  // The last answer of a turn that left events unrun: they wait in their
  // queue as if never handed out.
  bool ends_turn = false;

 private:
  static Message RunAgain(Kind kind, Subscriber* sub, std::shared_ptr<const Event> event,
                          std::chrono::milliseconds delay, const RunHistory& next) {
    Message m = Of(kind, sub, std::move(event));
    m.delay = delay;
    m.next = next;
    return m;
  }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_WORK_H_
