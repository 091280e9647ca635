// Dispatcher: moves committed events to handlers, per subscriber and per
// subject in commit order, and records their completion.
//
//   committer --(tail cache / outbox)--> dispatcher thread
//        per subscriber: Progress window, per-subject KeyQueues, timers
//   dispatcher --(work queue)--> worker pool --(HandlerRunner: handler,
//        commit)--> messages
//   messages --> dispatcher: complete, retry after a delay, rerun
//
// One dispatcher thread owns all per-subscriber state, so it needs no locks;
// workers and the committer talk to it through one message queue. Memory is
// bounded: a subscriber holds at most Options::max_in_flight_per_subscriber
// fetched events; what lies beyond stays in the outbox and is read back in
// order (catch-up). The work and message queues hold at most one entry per
// in-flight event, so they are bounded by the same windows.
//
// Threading: public methods are thread-safe unless noted.
#ifndef WALBUS_BUS_DISPATCH_DISPATCHER_H_
#define WALBUS_BUS_DISPATCH_DISPATCHER_H_

#include <atomic>
#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/quarantine.h"
#include "bus/core/schema_registry.h"
#include "bus/dispatch/backlog_window.h"
#include "bus/dispatch/event_source.h"
#include "bus/dispatch/handler_runner.h"
#include "bus/dispatch/oldest_dropper.h"
#include "bus/dispatch/progress_board.h"
#include "bus/dispatch/progress_writer.h"
#include "bus/dispatch/replay_driver.h"
#include "bus/dispatch/retention.h"
#include "bus/dispatch/scheduler.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/tail_cache.h"
#include "bus/dispatch/waiting_queue.h"
#include "bus/dispatch/work.h"
#include "bus/dispatch/worker_pool.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/clock.h"

namespace walbus::internal {

class ScopeHost;

struct DispatcherConfig {
  size_t worker_threads;
  size_t max_in_flight_per_subscriber;
  // Bounds the events read from the outbox that are kept for other
  // subscribers catching up (BacklogWindow; at most
  // max_in_flight_per_subscriber of them).
  size_t backlog_window_bytes;
  size_t max_payload_bytes;
  uint64_t trim_every_events;
  std::chrono::milliseconds trim_interval;
  RetentionPolicy retention;
  InboxWindow* inbox_window;  // null without Options::inbox_window
  DiskBudget* disk_budget;    // told of each trim and drop
  // Options::drop_oldest_types (OldestDropper).
  std::vector<std::string> drop_oldest_types;
  std::chrono::milliseconds checkpoint_interval;
  // The outbox holds nothing below this seq.
  uint64_t trimmed_below;
  // Handler completions that publish follow-up events fsync (kSync).
  bool sync_follow_ups;
  const Clock* clock;
  const SchemaRegistry* schemas;
  Quarantine* quarantine;
  Scheduler* scheduler;  // fires scheduled events on the dispatcher thread
  const BusLog* log;
};

class Dispatcher {
 public:
  // `scope_host` makes the handlers' contexts (their calls go to it).
  Dispatcher(ScopeHost* scope_host, storage::Db* db, Committer* committer, TailCache* tail, Registry* registry,
             const DispatcherConfig& config);
  // Stops if running.
  ~Dispatcher();
  Dispatcher(const Dispatcher&) = delete;
  Dispatcher& operator=(const Dispatcher&) = delete;

  // Starts the dispatcher thread and the workers. REQUIRES: not started.
  void Start();
  // Lets running handlers finish and commit, drops queued work (it is
  // redelivered on the next open), writes checkpoints, joins the threads.
  // REQUIRES: not called from a worker thread. Idempotent.
  void Stop();
  bool started() const { return started_.load(std::memory_order_acquire); }

  // Reads the durable counts of dropped events. Before Start().
  Status LoadDropCounts() { return dropper_.Load(); }
  // The disk budget refused a commit of `bytes`: deletes the oldest events
  // of Options::drop_oldest_types that no subscriber holds (OldestDropper)
  // and returns the bytes freed; 0 at once when none may go, the
  // dispatcher is not running, or the caller is its own thread. Blocks
  // until the dispatcher thread has done it. Thread-safe.
  uint64_t MakeRoom(uint64_t bytes);
  // Events dropped of each type, ever. Thread-safe.
  std::map<std::string, uint64_t> DroppedByType() const { return dropper_.DroppedByType(); }
  std::map<std::string, uint64_t> DroppedSinceOpen() const { return dropper_.DroppedSinceOpen(); }

  // Hands an active subscriber to the dispatcher. Before Start() it waits.
  void Add(std::shared_ptr<Subscriber> subscriber);
  // New events were committed (by the committer's leader, in seq order):
  // they go to the tail cache, when a subscriber may read them there, and
  // the loop is woken. Cheap; never blocks.
  void NotifyCommitted(std::vector<std::shared_ptr<const Event>>& events);
  // Makes the dispatcher look again: a scheduled event falls due before
  // the moment it sleeps towards, or a wait wants a fresh look. Cheap;
  // never blocks.
  void Wake() { WakeDispatcher(); }
  // A translator was registered: paused subscribers try again.
  void ResumePaused();
  // Puts dead letters back in line (seqs of `subscriber`, any subjects) and
  // releases the listed parked subjects. Recorded by the caller first.
  // With `rerun` false the subjects are released and nothing runs again
  // (an operator's skip).
  void Redrive(const std::string& subscriber, std::vector<uint64_t> seqs, std::vector<std::string> release, bool rerun);
  // Runs a recorded replay through the active subscriber it names
  // (OperatorActions::StartReplay); a replay of a subscriber not added here is dropped (it
  // resumes when that subscriber is). REQUIRES: record.state is kRunning.
  void StartReplay(uint64_t replay_id, storage::ReplayRecord record);
  // Stops a running replay: nothing more is selected; what runs finishes.
  void CancelReplay(uint64_t replay_id, const OperatorAction& action);
  // Where callers wait on this dispatcher's progress: its watermarks and,
  // under a clock that does not pass by itself, the moments it finds
  // nothing to run before the clock moves (no message, no worker busy,
  // nothing due now; a WaitSettled needs Start() and such a clock).
  ProgressBoard& progress() { return board_; }
  // Whether the calling thread is one of this dispatcher's workers. Any
  // thread, any time.
  bool OnWorkerThread() const;

 private:
  struct Timer {
    std::chrono::steady_clock::time_point due;
    Subscriber* sub;
    std::string subject;
    bool operator>(const Timer& o) const { return due > o.due; }
  };
  using SteadyTime = std::chrono::steady_clock::time_point;

  // Dispatcher thread.
  void Loop();
  void Handle(Message& m);
  void Complete(Subscriber* sub, const Event& event);
  void Fetch(Subscriber* sub);
  void Route(Subscriber* sub, std::shared_ptr<const Event> event);
  // Moves `sub` past a seq it has nothing to deliver for (trimmed, unreadable,
  // or of a type it does not take). REQUIRES: seq == sub->progress.next().
  static void PassOver(Subscriber* sub, uint64_t seq);
  // Frees the events of the event source that every subscriber has
  // fetched.
  void DropFetched();
  // A kMakeRoom message: OldestDropper::MakeRoom over what is committed
  // and, when the tail cache is in use, appended to it.
  uint64_t MakeRoomNow(uint64_t bytes);

  // Dead letters sent back (bus/dispatch/redrive.cc).
  void HandleRedrive(Message& m);
  // Moves the subject's waiting dead letters to the front of its queue.
  // REQUIRES: the subject's front event is not running.
  void ApplyRedrive(Subscriber* sub, const std::string& subject);

  // Runs the subscriber's replay on (ReplayDriver::Pump) and puts the
  // subjects it selected events of in line.
  void PumpReplay(Subscriber* sub);
  // Queues the key's front event for a worker (sent by FlushReady), with
  // the events behind it when they can run in one turn.
  void Submit(Subscriber* sub, KeyQueue& key);
  // Bounds a turn: a hot subject shares the workers with the others
  // (HandlerRunner bounds the time of its handler runs).
  static constexpr size_t kMaxTurnEvents = 32;
  static constexpr size_t kMaxTurnBytes = size_t{256} * 1024;  // payload bytes
  // Adds to `item` (the key's front event) the events that may run after
  // it in the same turn.
  void AddFollowers(const Subscriber& sub, const KeyQueue& key, WorkItem* item) const;
  void FlushReady();
  void FireTimers(SteadyTime now);
  // When the dispatcher must look again without being told (a retry or a
  // scheduled event due, a dirty checkpoint, a trim with something to
  // trim, a failed step to try again), on the steady clock; nullopt when
  // only a message (a commit, a completion, a call) can give it work.
  std::optional<SteadyTime> NextDueMoment() const;
  // Under a clock that does not pass by itself, with nothing due before
  // it moves: counts a settled moment when no worker runs and no message
  // waits (WaitSettled).
  void NoteIfSettled();
  // Whether every subscriber is within its window of the outbox's end:
  // overdue scheduled events then fire at full speed (Scheduler).
  bool DeliveryKeepsUp() const;
  void PublishProgress();

  void Send(Message m);
  // Wakes the dispatcher thread unless a wake-up is pending already.
  void WakeDispatcher();

  ScopeHost* const scope_host_;
  storage::Db* const db_;
  Committer* const committer_;
  TailCache* const tail_;
  Registry* const registry_;
  const DispatcherConfig config_;

  // The dispatcher sleeps on messages_ towards a due moment: its waits run
  // on the monotonic clock. Workers wait for work without a deadline.
  WaitingQueue<Message, QueueTraits> messages_{QueueTraits::MAX_SEMA_SPINS};
  // What the workers run their items with, and the workers.
  HandlerRunner runner_;
  WorkerPool pool_;
  std::atomic<bool> wake_pending_{false};
  std::atomic<bool> has_subscribers_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};  // read by any thread (started())
  bool stopped_ = false;
  std::thread dispatcher_thread_;

  // Dispatcher-thread state.
  std::vector<std::shared_ptr<Subscriber>> subs_;
  std::vector<WorkItem> ready_;  // made ready this iteration
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  // How long until the scheduler wants to run again (nullopt: no timer).
  std::optional<std::chrono::milliseconds> scheduled_wait_;
  // A step failed on storage (reading the outbox, writing the horizon): it
  // is tried again after kRetryAfterError.
  bool retry_soon_ = false;
  static constexpr std::chrono::milliseconds kRetryAfterError{50};
  // The tail cache, the backlog window and the outbox, cheapest first.
  EventSource source_;
  // Checkpoints, horizons, pause and clean-stop records, trims.
  ProgressWriter progress_writer_;
  // Options::drop_oldest_types.
  OldestDropper dropper_;
  // The replays running through the subscribers.
  ReplayDriver replays_;
  // A clock that does not pass by itself (ManualClock) wakes the
  // dispatcher when it moves (clock_watch_ is its registration): due
  // moments on it are not slept towards.
  const bool clock_passes_;
  uint64_t clock_watch_ = 0;

  // The subscribers' progress, for the bus's waits.
  ProgressBoard board_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_DISPATCHER_H_
