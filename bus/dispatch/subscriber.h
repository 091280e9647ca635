// Subscriber state: the durable registry of every subscriber the database
// knows, and the live state of the ones active in this process.
#ifndef WALBUS_BUS_DISPATCH_SUBSCRIBER_H_
#define WALBUS_BUS_DISPATCH_SUBSCRIBER_H_

#include <algorithm>
#include <atomic>
#include <cassert>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "bus/core/schema_registry.h"
#include "bus/dispatch/progress.h"
#include "bus/dispatch/run_history.h"
#include "bus/telemetry/metrics.h"
#include "bus/util/mutex.h"
#include "storage/records.h"
#include "walbus/bus.h"

namespace walbus::internal {

// What a subject's queue knows of the run of its front event.
struct KeyQueueHead {
  bool head_busy = false;  // running, or waiting for a retry timer
  RunHistory history;      // of the front event
  // The front event already ran (or had its attempt recorded) in this
  // process: crash-loop protection has counted this process once; reruns
  // and retries here count only by their own failures.
  bool charged = false;
};

// The events of one subject waiting for one subscriber, oldest first. The
// front one is the only one that may be running (per-key order), except
// in a turn: the first `in_turn` events, handed to one worker together,
// which runs them one after another.
struct KeyQueue : KeyQueueHead {
  std::deque<std::shared_ptr<const Event>> events;
  // Events from the front handed to a worker and not answered yet (0 when
  // none is). Kept by PopFront: a turn outlives its front event.
  size_t in_turn = 0;

  // The front event is done; the next one starts afresh. (The deque is
  // kept: a new one would cost two allocations per handled event.)
  void PopFront() {
    events.pop_front();
    static_cast<KeyQueueHead&>(*this) = KeyQueueHead{};
  }
};

// A replay running through one subscriber (OperatorActions::StartReplay): the events it
// selected wait like redriven dead letters for their subject to be idle,
// then run at its front, in seq order.
//
// Threading: belongs to the dispatcher thread.
struct ReplayJob {
  uint64_t id = 0;
  storage::ReplayRecord record;  // counts, state and next_seq kept current
  std::set<uint64_t> in_flight;  // selected, not completed
  uint64_t scan_from = 0;        // the next seq to look at
  bool cancelled = false;
  bool dirty = false;                   // the record changed since it was written
  std::unordered_set<std::string> ids;  // 16-byte ids selected (empty: any)

  // Every selected event below it has completed.
  uint64_t NextSeq() const { return in_flight.empty() ? scan_from : *in_flight.begin(); }
};

struct DurableCounters {
  uint64_t checkpoint = 0;
  uint64_t horizon = 0;          // no seq above it had been handed to a handler
  bool stopped_cleanly = false;  // it stopped with nothing running
  uint64_t handled = 0;
  uint64_t duplicates = 0;
  uint64_t dead_lettered = 0;
  uint64_t stale_skipped = 0;
  uint64_t dropped = 0;  // events of drop-oldest types deleted before it took them
};

// The events of a subscriber that run out of line: a dead letter an
// operator sent back, or an event a replay selected. Both sit below the
// watermark already, so their completion does not move it. An event is in
// at most one of the two states; the transitions are the methods.
//
// Threading: the dispatcher thread's alone.
class OutOfLineEvents {
 public:
  enum class Kind : uint8_t { kRedrive, kReplay };

  // A dead letter sent back; one the replay runs already stays the replay's.
  void StartRedrive(uint64_t seq) { runs_.try_emplace(seq, Kind::kRedrive); }
  // REQUIRES: the event is not out of line already.
  void StartReplay(uint64_t seq) {
    [[maybe_unused]] const bool added = runs_.emplace(seq, Kind::kReplay).second;
    assert(added);
  }
  bool Is(uint64_t seq, Kind kind) const {
    auto it = runs_.find(seq);
    return it != runs_.end() && it->second == kind;
  }
  bool Contains(uint64_t seq) const { return runs_.count(seq) != 0; }
  // The event's run out of line ended (or it was dropped): its kind, or
  // nullopt for an event that ran in line.
  std::optional<Kind> Finish(uint64_t seq) {
    auto it = runs_.find(seq);
    if (it == runs_.end()) return std::nullopt;
    const Kind kind = it->second;
    runs_.erase(it);
    return kind;
  }

 private:
  std::unordered_map<uint64_t, Kind> runs_;
};

// Subjects held out of their queue's normal flow: parked behind a dead
// letter (PoisonPolicy::kParkKey), events waiting to go back in line (an
// operator's redrive, a replay's selection) once the subject is idle, and
// front events waiting for the end of a pause.
//
// Threading: the dispatcher thread's alone.
class SubjectHolds {
 public:
  // The subject waits behind the dead letter at `seq`.
  void Park(const std::string& subject, uint64_t seq) { holds_[subject].parked_behind = seq; }
  void Unpark(const std::string& subject) {
    auto it = holds_.find(subject);
    if (it == holds_.end()) return;
    it->second.parked_behind = 0;
    EraseIfEmpty(it);
  }
  // The seq of the dead letter parking `subject`; 0 when it is not parked.
  uint64_t ParkedBehind(const std::string& subject) const {
    auto it = holds_.find(subject);
    return it == holds_.end() ? 0 : it->second.parked_behind;
  }

  // `event` goes back in line at the front of its subject once the subject
  // is idle.
  void QueueBack(std::shared_ptr<const Event> event) {
    Hold& h = holds_[event->subject];
    h.waiting = true;
    h.events.push_back(std::move(event));
  }
  // The redrive that is waiting for `subject` unparks it when it runs
  // (with nothing of its own selected, too).
  void ReleaseWhenIdle(const std::string& subject) {
    Hold& h = holds_[subject];
    h.waiting = true;
    h.release = true;
  }
  // Whether events (or a release) wait for `subject` to be idle.
  bool Waiting(const std::string& subject) const {
    auto it = holds_.find(subject);
    return it != holds_.end() && it->second.waiting;
  }
  std::vector<std::string> WaitingSubjects() const {
    std::vector<std::string> out;
    for (const auto& [subject, h] : holds_) {
      if (h.waiting) out.push_back(subject);
    }
    return out;
  }
  // Takes what waits for `subject`: its events, and whether to unpark it.
  std::vector<std::shared_ptr<const Event>> TakeWaiting(const std::string& subject, bool* release) {
    *release = false;
    auto it = holds_.find(subject);
    if (it == holds_.end()) return {};
    std::vector<std::shared_ptr<const Event>> events = std::move(it->second.events);
    *release = it->second.release;
    it->second.events.clear();
    it->second.waiting = false;
    it->second.release = false;
    EraseIfEmpty(it);
    return events;
  }
  // While the subscriber is paused: `subject`'s front event waits for the
  // resume, which hands the subjects on in the order they were held.
  void HoldForResume(const std::string& subject) { held_for_resume_.push_back(subject); }
  std::vector<std::string> TakeHeldForResume() { return std::exchange(held_for_resume_, {}); }

  // Drops the waiting events `drop` says to (a cancelled replay's); a
  // subject left with nothing waiting and no release waits no more.
  template <typename Pred>
  void DropWaiting(Pred drop) {
    for (auto it = holds_.begin(); it != holds_.end();) {
      std::erase_if(it->second.events, drop);
      if (it->second.events.empty() && !it->second.release) it->second.waiting = false;
      it = it->second.parked_behind == 0 && !it->second.waiting ? holds_.erase(it) : std::next(it);
    }
  }

 private:
  struct Hold {
    uint64_t parked_behind = 0;  // 0: not parked
    bool waiting = false;        // events or a release wait for the subject to be idle
    bool release = false;        // unpark when they go back in line
    std::vector<std::shared_ptr<const Event>> events;
  };
  using Map = std::unordered_map<std::string, Hold>;
  void EraseIfEmpty(Map::iterator it) {
    if (it->second.parked_behind == 0 && !it->second.waiting) holds_.erase(it);
  }

  Map holds_;
  std::vector<std::string> held_for_resume_;
};

// What the application asked for at Subscribe, and what recovery said of
// the last run.
//
// Threading: immutable.
struct SubscriberConfig {
  SubscriberConfig(SubscriberOptions opts, uint32_t subscriber_id, const DurableCounters& durable)
      : name(std::move(opts.name)),
        id(subscriber_id),
        types(std::move(opts.types)),
        handler(std::move(opts.handler)),
        retry(opts.retry),
        on_poison(opts.on_poison),
        classify_exception(std::move(opts.classify_exception)),
        skip_stale(opts.skip_stale),
        handler_version(std::move(opts.handler_version)),
        on_unknown_version(opts.on_unknown_version),
        side_effect_safe(opts.side_effect_safe),
        recovered_checkpoint(durable.checkpoint),
        recovered_horizon(std::max(durable.horizon, durable.checkpoint)),
        recovered_clean(durable.stopped_cleanly) {}

  // Exact types, and other versions of their bases (upcast or paused on).
  bool Matches(std::string_view type) const {
    if (types.empty()) return true;
    const std::string_view base = TypeBaseName(type);
    return std::any_of(types.begin(), types.end(),
                       [&](const std::string& t) { return t == type || TypeBaseName(t) == base; });
  }
  // May `seq` have been running when the process last stopped? Then this
  // run counts as an attempt before it starts (crash-loop protection).
  bool MayHaveBeenRunning(uint64_t seq) const {
    return !recovered_clean && seq > recovered_checkpoint && seq <= recovered_horizon;
  }

  const std::string name;
  const uint32_t id;
  const std::vector<std::string> types;
  const Handler handler;
  const RetryPolicy retry;
  const PoisonPolicy on_poison;
  const std::function<FailureClass(const std::exception_ptr&)> classify_exception;
  const bool skip_stale;
  const std::string handler_version;
  const UnknownVersionPolicy on_unknown_version;
  const bool side_effect_safe;
  const uint64_t recovered_checkpoint;
  const uint64_t recovered_horizon;
  // It stopped cleanly last time: no event is charged a run it did not
  // have. (Its records still say what completed: check_stored stays.)
  const bool recovered_clean;
};

// Where delivery to the subscriber stands: its subjects' queues, the
// events in special states, what is durable.
//
// Threading: the dispatcher thread's alone.
struct DispatchState {
  DispatchState(uint64_t checkpoint, uint64_t horizon)
      : progress(checkpoint), durable_checkpoint(checkpoint), durable_horizon(horizon) {}

  Progress progress;
  std::unordered_map<std::string, KeyQueue> keys;
  SubjectHolds holds;           // parked subjects; events waiting to go back in line
  OutOfLineEvents out_of_line;  // redriven and replayed events running
  // The replay in progress, if any.
  std::unique_ptr<ReplayJob> replay;
  uint64_t durable_checkpoint;
  uint64_t durable_horizon;
  uint64_t duplicates_to_persist = 0;
  // Paused on an event no upcaster translates: nothing new is handed to
  // workers; the subjects whose front event waits are held for the resume
  // (holds).
  bool paused = false;
};

// What readers on any thread see of the subscriber (Stats, metrics,
// WaitHandled).
//
// Threading: thread-safe: atomics, and paused_on_type under paused_mu.
struct SubscriberCounters {
  explicit SubscriberCounters(const DurableCounters& durable)
      : watermark(durable.checkpoint),
        handled(durable.handled),
        duplicates(durable.duplicates),
        dead_lettered(durable.dead_lettered),
        stale_skipped(durable.stale_skipped),
        dropped(durable.dropped) {}

  std::atomic<uint64_t> watermark;
  std::atomic<uint64_t> handled;
  std::atomic<uint64_t> duplicates;
  std::atomic<uint64_t> dead_lettered;
  std::atomic<uint64_t> stale_skipped;
  std::atomic<uint64_t> dropped;  // written by the dispatcher thread (OldestDropper)
  std::atomic<uint64_t> retries{0};
  std::atomic<uint64_t> waits{0};
  std::atomic<uint64_t> conflicts{0};  // commits that met a concurrent update
  std::atomic<uint64_t> in_flight{0};
  std::atomic<bool> paused_now{false};
  // While paused: the type of the event it waits at (for Stats; written
  // by the dispatcher thread).
  mutable Mutex paused_mu;
  std::string paused_on_type GUARDED_BY(paused_mu);
  Histogram handler_seconds{Histogram::SecondsBounds()};
  std::atomic<uint64_t> pauses{0};
};

// One active subscriber: its configuration, the dispatcher's state of it,
// and its counters, each with its own threading contract above. Code that
// needs one part takes that part.
struct Subscriber : SubscriberConfig, DispatchState, SubscriberCounters {
  Subscriber(SubscriberOptions opts, uint32_t subscriber_id, const DurableCounters& durable)
      : SubscriberConfig(std::move(opts), subscriber_id, durable),
        DispatchState(durable.checkpoint, recovered_horizon),
        SubscriberCounters(durable) {}
};

// Every subscriber registered in the database (name -> id, checkpoint).
//
// Threading: every member is guarded by mu. Trimming the outbox and
// registering a subscriber both hold mu across their commit, so a new
// subscriber's starting point can never be trimmed away under it.
struct Registry {
  struct Entry {
    uint32_t id = 0;
    DurableCounters durable;
    std::shared_ptr<Subscriber> active;  // null when not subscribed here
  };
  Mutex mu;
  std::map<std::string, Entry, std::less<>> by_name GUARDED_BY(mu);
  uint32_t next_id GUARDED_BY(mu) = 1;

  // The lowest checkpoint of any registered subscriber, or `otherwise`
  // when there are none.
  uint64_t MinCheckpoint(uint64_t otherwise) const REQUIRES(mu) {
    uint64_t m = otherwise;
    for (const auto& [name, e] : by_name) m = std::min(m, e.durable.checkpoint);
    return m;
  }
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_SUBSCRIBER_H_
