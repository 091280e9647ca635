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
#include <memory>
#include <string>
#include <vector>

#include "bus/dispatch/subscriber.h"
#include "storage/records.h"

namespace walbus::internal {

struct WorkItem {
  Subscriber* sub = nullptr;
  std::shared_ptr<const Event> event;
  uint32_t attempt = 1;  // this run's number, as far as memory knows
  uint32_t conflict_reruns = 0;
  uint64_t first_failure_ms = 0;
  bool check_stored = false;      // look for an inbox and a retry record first
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
  };

  // The answers of a run, made by name (`attempt` means what each says).
  // An outcome that carries nothing but the event (kDone, kDeadLettered,
  // kDuplicate, kStale, kPaused).
  static Message Of(Kind kind, Subscriber* sub, std::shared_ptr<const Event> event) {
    Message m;
    m.kind = kind;
    m.sub = sub;
    m.event = std::move(event);
    return m;
  }
  // Failed after `runs_made` runs; the next after `delay`. `check_stored`:
  // the outcome's commit may or may not have happened (look first).
  static Message Retry(Subscriber* sub, std::shared_ptr<const Event> event, std::chrono::milliseconds delay,
                       uint32_t runs_made, uint64_t first_failure_ms, bool check_stored) {
    Message m = Of(Kind::kRetry, sub, std::move(event));
    m.delay = delay;
    m.attempt = runs_made;
    m.first_failure_ms = first_failure_ms;
    m.check_stored = check_stored;
    return m;
  }
  // Not ready: run `attempt` again after `delay`.
  static Message Wait(Subscriber* sub, std::shared_ptr<const Event> event, std::chrono::milliseconds delay,
                      uint32_t attempt) {
    Message m = Of(Kind::kWait, sub, std::move(event));
    m.delay = delay;
    m.attempt = attempt;
    return m;
  }
  // The commit of run `run_attempt` conflicted, the `conflicts`th time.
  static Message Rerun(Subscriber* sub, std::shared_ptr<const Event> event, uint32_t conflicts, uint32_t run_attempt) {
    Message m = Of(Kind::kRerun, sub, std::move(event));
    m.attempt = conflicts;
    m.run_attempt = run_attempt;
    return m;
  }

  Kind kind = Kind::kWake;
  Subscriber* sub = nullptr;
  std::shared_ptr<const Event> event;
  std::chrono::milliseconds delay{0};
  uint32_t attempt = 0;           // kRetry: runs made; kWait: the attempt; kRerun: conflicts so far
  uint64_t first_failure_ms = 0;  // kRetry
  bool check_stored = false;      // kRetry: the commit failed, state unknown
  // What the rare kinds carry (kAdd, kRedrive, kReplay, kCancelReplay),
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
  };
  std::unique_ptr<Control> control;
  uint32_t run_attempt = 0;  // kRerun: the attempt number of the run that conflicted
  // The last answer of a turn that left events unrun: they wait in their
  // queue as if never handed out.
  bool ends_turn = false;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_WORK_H_
