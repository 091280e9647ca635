// walbus/subscriber.h: a subscriber (Bus::Subscribe): its handler, the
// verdict the handler returns, and what happens when it fails.
#ifndef WALBUS_SUBSCRIBER_H_
#define WALBUS_SUBSCRIBER_H_

#include <chrono>
#include <cstdint>
#include <exception>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "walbus/event.h"
#include "walbus/scope.h"
#include "walbus/status.h"

namespace walbus {

// A handler's verdict on one event.
class Outcome {
 public:
  // Which verdict: made by Done(), RetryAfter(), Reject() or Wait().
  enum class Kind : uint8_t { kDone, kRetry, kReject, kWait };

  // Handled: the context's writes commit with the inbox record.
  static Outcome Done() { return Outcome(Kind::kDone, {}, {}); }
  // Transient failure: writes are dropped and the event is handled again
  // after `delay`. Only this subject waits; other subjects keep flowing.
  // A zero delay leaves the delay to the subscriber's RetryPolicy.
  static Outcome RetryAfter(std::chrono::milliseconds delay) { return Outcome(Kind::kRetry, delay, {}); }
  // Permanent failure: writes are dropped, the event goes to the dead-letter
  // store with `reason`, and the subject moves on.
  static Outcome Reject(std::string reason) { return Outcome(Kind::kReject, {}, std::move(reason)); }
  // Not ready, through no fault of the event or the handler (a link is
  // down, a device is busy): writes are dropped and the event is handled
  // again after `delay` (zero: the RetryPolicy's first backoff), as the
  // same attempt. Not a failure: no retry record, nothing counted against
  // the RetryPolicy, logged at debug level with `reason`, counted apart
  // (SubscriberStats::waits, walbus_subscriber_waits_total).
  static Outcome Wait(std::chrono::milliseconds delay, std::string reason) {
    return Outcome(Kind::kWait, delay, std::move(reason));
  }

  // The verdict, its delay (kRetry, kWait) and its reason (kReject, kWait).
  // @{
  Kind kind() const { return kind_; }
  std::chrono::milliseconds delay() const { return delay_; }
  const std::string& reason() const { return reason_; }
  // @}

 private:
  Outcome(Kind k, std::chrono::milliseconds d, std::string r) : kind_(k), delay_(d), reason_(std::move(r)) {}
  Kind kind_;
  std::chrono::milliseconds delay_;
  std::string reason_;
};

// Runs on a worker thread, never concurrently for one subscriber and one
// subject. A handler that throws has failed transiently (retried per its
// RetryPolicy) unless its SubscriberOptions::classify_exception says the
// failure is permanent.
using Handler = std::function<Outcome(const Event&, HandlerContext&)>;

// What a subscriber does with an event of a type version it does not take
// and no upcaster can bring to one it does.
enum class UnknownVersionPolicy : uint8_t {
  // Stop handling (counted, logged; other subscribers go on) until an
  // upcaster is registered for it (default).
  kPause,
  // Dead-letter the event and go on.
  kDeadLetter,
};

// How an exception the handler threw is treated
// (SubscriberOptions::classify_exception).
enum class FailureClass : uint8_t {
  kTransient,  // retried with backoff until the budget runs out
  kPermanent,  // dead-lettered at once
};

// Retries of one event by one subscriber. The attempt count is stored in
// the database: it survives restarts, and an event that was being handled
// when the process died counts that run as an attempt, so a handler that
// crashes the process on an event is not run on it forever.
struct RetryPolicy {
  // Handler runs of one event before it is dead-lettered. REQUIRES: >= 1.
  uint32_t max_attempts = 8;
  // Delay before attempt n+1: uniform in [1 ms, min(cap, base * 2^(n-1))]
  // ("full jitter"). RetryAfter(d) from the handler overrides it.
  // @{
  std::chrono::milliseconds base{10};
  std::chrono::milliseconds cap{30000};
  // @}
  // Dead-letter once this long has passed since the first failure, even
  // with attempts left. Zero: no age limit.
  std::chrono::milliseconds max_age{0};
  // A handler whose effects hit an ExpectVersion conflict is rerun at once;
  // after this many reruns in a row the conflict counts as a failed attempt.
  uint32_t max_conflict_reruns = 64;
};

// What happens to a subject's later events once one of its events is
// dead-lettered.
enum class PoisonPolicy : uint8_t {
  // The next event of the subject proceeds (default).
  kDeadLetterAndContinue,
  // Later events of the subject are held back (stored with the dead
  // letters, in order) until the dead letter is redriven or skipped: for
  // handlers whose state must not skip a step.
  kParkKey,
};

// Where a new subscriber starts (SubscriberOptions::start). A known
// subscriber resumes after its checkpoint whatever this says.
struct StartPosition {
  // Which start: made by Now(), OldestRetained() or AtSeq().
  enum class Kind : uint8_t {
    // With the events committed after its registration (default).
    kNow,
    // With the oldest event the outbox still holds (see
    // Options::retain_events and friends): the retained history first.
    kOldestRetained,
    // With the event at `seq`, which the outbox must still hold (or the
    // next one to be committed).
    kAtSeq,
  };
  // The starts, by name.
  // @{
  static StartPosition Now() { return {Kind::kNow, 0}; }
  static StartPosition OldestRetained() { return {Kind::kOldestRetained, 0}; }
  static StartPosition AtSeq(uint64_t seq) { return {Kind::kAtSeq, seq}; }
  // @}

  Kind kind = Kind::kNow;  // which start
  uint64_t seq = 0;        // kAtSeq only: the first event delivered
};

// A subscriber: its durable name, the event types it takes, its handler,
// and what happens when the handler fails.
struct SubscriberOptions {
  // Durable identity: 1..128 bytes of [A-Za-z0-9._-]. The checkpoint and
  // inbox live under it across restarts.
  std::string name;
  // Event types delivered to the handler; empty means every type.
  std::vector<std::string> types;
  // Runs once per delivery of an event. Required.
  Handler handler;
  // Attempts and backoff before an event is dead-lettered.
  RetryPolicy retry;
  // What a dead letter does to the later events of its subject.
  PoisonPolicy on_poison = PoisonPolicy::kDeadLetterAndContinue;
  // Classifies what the handler threw; absent: every exception is
  // transient. Called on the worker thread; must not throw.
  std::function<FailureClass(const std::exception_ptr&)> classify_exception;
  // Skip (and count) an event whose subject_version is not above the newest
  // version this subscriber already applied for its subject. The newest
  // applied version commits with the handler's effects.
  bool skip_stale = false;
  // Recorded with dead letters, so an operator knows which code gave up.
  std::string handler_version = "1";
  // Events of a type whose base name matches one in `types` but whose
  // version does not are upcast when a chain of upcasters reaches a listed
  // version; otherwise this applies.
  UnknownVersionPolicy on_unknown_version = UnknownVersionPolicy::kPause;
  // Where the subscriber starts the first time its name is registered.
  StartPosition start;
  // The handler may run again on events it already handled without harm
  // (it rebuilds a projection, say, and sends nothing out). Only such a
  // subscriber accepts a ReplayMode::kFreshScope replay.
  bool side_effect_safe = false;
};

}  // namespace walbus

#endif  // WALBUS_SUBSCRIBER_H_
