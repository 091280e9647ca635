// Dispatcher: moves committed events to handlers, per subscriber and per
// subject in commit order, and records their completion.
//
//   committer --(tail cache / outbox)--> dispatcher thread
//        per subscriber: Progress window, per-subject KeyQueues, timers
//   dispatcher --(work queue)--> worker pool --(handler, commit)--> messages
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

#include <concurrentqueue/blockingconcurrentqueue.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <queue>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/quarantine.h"
#include "bus/core/schema_registry.h"
#include "bus/dispatch/backlog_window.h"
#include "bus/dispatch/retention.h"
#include "bus/dispatch/run_gate.h"
#include "bus/dispatch/scheduler.h"
#include "bus/dispatch/subscriber.h"
#include "bus/dispatch/tail_cache.h"
#include "bus/dispatch/waiting_queue.h"
#include "bus/telemetry/log.h"
#include "bus/util/mutex.h"
#include "storage/db.h"
#include "walbus/clock.h"

namespace walbus::internal {

class ScopeHost;

// Short spins before sleeping: with more threads than cores (producers,
// dispatcher, workers on two cores), a long spin steals the core from the
// very thread that would fill the queue.
struct QueueTraits : moodycamel::ConcurrentQueueDefaultTraits {
  static const int MAX_SEMA_SPINS = 64;
};

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
             DispatcherConfig config);
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

  // Hands an active subscriber to the dispatcher. Before Start() it waits.
  void Add(std::shared_ptr<Subscriber> subscriber);
  // New events were committed. Cheap; never blocks.
  void NotifyCommitted();
  // Whether a subscriber was ever added: until then committed events need
  // no tail cache (a subscriber added later reads them from the outbox).
  // Any thread; never blocks.
  bool has_subscribers() const { return has_subscribers_.load(std::memory_order_acquire); }
  // A scheduled event falls due before the moment the dispatcher sleeps
  // towards. Cheap; never blocks.
  void NotifyTimers() { WakeDispatcher(); }
  // A translator was registered: paused subscribers try again.
  void ResumePaused();
  // Puts dead letters back in line (seqs of `subscriber`, any subjects) and
  // releases the listed parked subjects. Recorded by the caller first.
  // With `rerun` false the subjects are released and nothing runs again
  // (an operator's skip).
  void Redrive(const std::string& subscriber, std::vector<uint64_t> seqs, std::vector<std::string> release, bool rerun);
  // Runs a recorded replay through the active subscriber it names
  // (Bus::Replay); a replay of a subscriber not added here is dropped (it
  // resumes when that subscriber is). REQUIRES: record.state is kRunning.
  void StartReplay(uint64_t replay_id, storage::ReplayRecord record);
  // Stops a running replay: nothing more is selected; what runs finishes.
  void CancelReplay(uint64_t replay_id, const OperatorAction& action);
  // Blocks until the watermark of every added subscriber (or of those
  // named, when `names` is not empty) reaches `target`, or a paused one
  // stands in the way.
  // Closed once CancelWaits() was called.
  Status WaitFor(uint64_t target, std::chrono::milliseconds timeout, const std::vector<std::string>& names = {});
  // Under a clock that does not pass by itself: blocks until, after the
  // call, the dispatcher finds nothing it can run before the clock moves
  // (no message, no worker busy, nothing due now). TimedOut on the real
  // clock; Closed once CancelWaits() was called.
  // REQUIRES: !config.clock->PassesByItself(), and Start() was called.
  Status WaitSettled(std::chrono::milliseconds timeout);
  // Makes every WaitFor and WaitSettled, running or to come, return Closed
  // (Bus::Close).
  void CancelWaits();
  // Whether the calling thread is one of this dispatcher's workers. Any
  // thread, any time.
  bool OnWorkerThread() const;

 private:
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
    // (see Submit).
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
    Kind kind = Kind::kWake;
    Subscriber* sub = nullptr;
    std::shared_ptr<const Event> event;
    std::chrono::milliseconds delay{0};
    uint32_t attempt = 0;           // kRetry: runs made; kRerun: conflicts so far
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
  // One handler run whose writes await their commit.
  struct Run {
    WorkItem* item = nullptr;
    std::unique_ptr<HandlerContext> ctx;
    CommitRequest request;
    Message::Kind on_success = Message::Kind::kDone;
    std::string error;                   // why the attempt failed, if it did
    std::chrono::milliseconds delay{0};  // kRetry: before the next attempt
    double handler_seconds = 0;          // how long the handler ran
    Event upcast;                        // the event as the handler sees it, when upcast
    const Event* event = nullptr;        // what the handler runs on
    // Events of its turn after this one, run or not; the run before it in
    // the turn (its request is made on top of that one's), if any.
    size_t turn_left = 0;
    const Run* turn_previous = nullptr;
    bool turn_followed = false;  // the next event of its turn ran on top of it
    bool turn_went_on = false;   // ... and this one was done and committed
  };
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
  // Appends the slots of seqs from `from` on, read from the outbox, and
  // holds them in backlog_ for the other subscribers: a null slot is a seq
  // with nothing to deliver (trimmed, or unreadable and quarantined).
  void ReadFromOutbox(uint64_t from, size_t limit, std::vector<BacklogWindow::Slot>* out);
  void Route(Subscriber* sub, std::shared_ptr<const Event> event);
  // Moves `sub` past a seq it has nothing to deliver for (trimmed, unreadable,
  // or of a type it does not take). REQUIRES: seq == sub->progress.next().
  static void PassOver(Subscriber* sub, uint64_t seq);
  // Frees the events of the tail cache and backlog_ that every subscriber
  // has fetched.
  void DropFetched();

  // Dead letters sent back (bus/dispatch/redrive.cc).
  void HandleRedrive(Message& m);
  // Moves the subject's waiting dead letters to the front of its queue.
  // REQUIRES: the subject's front event is not running.
  void ApplyRedrive(Subscriber* sub, const std::string& subject);
  // Reads dead letters of `sub` back as events: the listed seqs, or (with
  // `subject`) every one of that subject.
  void LoadDeadLetters(Subscriber* sub, const std::vector<uint64_t>& seqs, const std::string* subject,
                       std::vector<std::shared_ptr<const Event>>* out);

  // Replays (bus/dispatch/replay.cc).
  void HandleReplay(Message& m);
  // Selects the replay's next events (a bounded window of them) and puts
  // them in line; ends the replay once all ran.
  void PumpReplay(Subscriber* sub);
  // Cancels the subscriber's replay: what is queued and not running is
  // dropped. REQUIRES: sub->replay.
  void DropQueuedReplay(Subscriber* sub);
  // Counts a completed replayed event; false when `event` is not one.
  bool CountReplayOutcome(Subscriber* sub, const Event& event, Message::Kind kind);
  // Adds the replay record's write to `scope` when it changed.
  void AddReplayRecord(WriteSet* scope, ReplayJob* job);
  // Where the item's completion is recorded: the subscriber's inbox, or a
  // kFreshScope replay's own scope.
  std::pair<storage::CfHandle*, std::string> InboxSlot(const WorkItem& item) const;
  void PutInboxRecord(WriteSet* scope, const WorkItem& item, uint64_t now_ms, uint32_t runs);
  // Queues the key's front event for a worker (sent by FlushReady), with
  // the events behind it when they can run in one turn.
  void Submit(Subscriber* sub, KeyQueue& key);
  // Bounds a turn: a hot subject shares the workers with the others.
  static constexpr size_t kMaxTurnEvents = 32;
  static constexpr size_t kMaxTurnBytes = 256 * 1024;          // payload bytes
  static constexpr std::chrono::milliseconds kMaxTurnTime{2};  // of handler runs
  // Adds to `item` (the key's front event) the events that may run after
  // it in the same turn.
  void AddFollowers(const Subscriber& sub, const KeyQueue& key, WorkItem* item) const;
  void FlushReady();
  // Keeps where `sub` is paused (`at`), or that it is not (nullopt), in
  // memory and in its PauseRecord.
  void RecordPause(Subscriber* sub, std::optional<std::reference_wrapper<const Event>> at);
  // The clean-stop record of each subscriber: written at Stop, deleted
  // when a subscriber is added, before anything of it runs.
  // @{
  void RecordCleanStop();
  void ForgetCleanStop(const Subscriber& sub);
  // @}
  // Persists a horizon above every seq about to be handed to workers;
  // false when that write failed (nothing is handed out then).
  bool AdvanceHorizons();
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
  // Whether a checkpoint would write anything.
  bool CheckpointDirty() const;
  // Whether every subscriber is within its window of the outbox's end:
  // overdue scheduled events then fire at full speed (Scheduler).
  bool DeliveryKeepsUp() const;
  void Checkpoint(bool force);
  void Trim(bool force);
  // Sets next_age_out_ (and trim_waits_for_age_ when known) from the time
  // of the oldest event retention by age keeps.
  void NoteWhenTheOldestKeptAgesOut(uint64_t oldest_kept, SteadyTime now);
  void PublishProgress();

  // Worker threads (bus/dispatch/worker.cc).
  void WorkerLoop();
  void MarkWorkerThread() const;  // first thing on a worker thread
  // Stop(): workers sleep until work comes, so each leaving worker wakes
  // the next (REQUIRES: stopping_workers_ is set).
  void WakeAWorkerToStop();
  void RunBatch(std::vector<WorkItem>& items, size_t n);
  // May the item have been running when the process last stopped? Then
  // its attempt is recorded before it runs, and it runs alone.
  static bool MayHaveBeenRunning(const WorkItem& item) {
    return item.check_stored && item.sub->MayHaveBeenRunning(item.event->seq);
  }
  // Prepares, runs and commits a group of items as one batch.
  void RunGroup(std::span<WorkItem* const> items);
  // Reads the inbox and retry record of items that may have them; answers
  // duplicates and exhausted budgets; returns false when the item must not
  // run now (it was answered or its reads failed).
  bool PrepareItem(WorkItem& item, std::deque<Run>* runs, std::vector<Message>* replies, WriteSet* pre_run);
  // Brings the event to a version the subscriber takes; false when the run
  // has its outcome instead (paused, or failed).
  bool ResolveVersion(Run& run);
  // A run of `item`, its context made, in `runs`.
  Run& NewRun(WorkItem& item, std::deque<Run>* runs);
  // Runs `head` and then, while each is done and within kMaxTurnTime, its
  // followers, each on top of the writes of those before it; the runs go
  // to `runs`, the followers' items to `followers`.
  void RunTurn(WorkItem& head, std::deque<Run>* runs, std::deque<WorkItem>* followers);
  // Runs the handler; fills the run's scope with its completion writes.
  void RunHandler(Run& run);
  // Turns a failed attempt into a retry record (and kRetry) or, once the
  // budget is spent, a dead letter.
  void FailAttempt(Run& run, std::string error, std::chrono::milliseconds delay, bool permanent);
  void AddDeadLetter(WriteSet* scope, const WorkItem& item, uint32_t attempts, uint64_t first_failure_ms,
                     std::string_view error);
  // Commits the runs in order and answers each; a turn's answers end at
  // its first event not done and committed.
  void CommitRuns(std::deque<Run>& runs, std::vector<Message>* replies);
  // The answer to one run once its commit returned (or it was paused).
  Message Answer(const Run& run);
  // One log line for a committed outcome (failures rate-limited).
  void LogOutcome(const Run& run) const;
  std::chrono::milliseconds Backoff(const Subscriber& sub, uint32_t attempt) const;
  uint64_t WallMillis() const;
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
  moodycamel::BlockingConcurrentQueue<WorkItem, QueueTraits> work_;
  // Workers' runs: side by side, or one alone (RunBatch).
  RunGate run_gate_;
  std::atomic<bool> wake_pending_{false};
  // New events came while work was queued and the wake was deferred (see
  // NotifyCommitted).
  std::atomic<bool> wake_owed_{false};
  std::atomic<bool> has_subscribers_{false};
  std::atomic<bool> stopping_workers_{false};
  std::atomic<bool> stopping_{false};
  std::atomic<bool> started_{false};  // read by any thread (started())
  bool stopped_ = false;
  std::thread dispatcher_thread_;
  std::vector<std::thread> workers_;

  // Dispatcher-thread state.
  std::vector<std::shared_ptr<Subscriber>> subs_;
  std::vector<WorkItem> ready_;  // made ready this iteration
  std::priority_queue<Timer, std::vector<Timer>, std::greater<Timer>> timers_;
  // How long until the scheduler wants to run again (nullopt: no timer).
  std::optional<std::chrono::milliseconds> scheduled_wait_;
  SteadyTime next_checkpoint_;
  SteadyTime next_trim_;
  // A timed trim at next_trim_ would trim something (see Trim).
  bool trim_pending_ = false;
  // Only the ageing of the oldest event kept by age can give the pending
  // trim something, and not before next_age_out_: it waits for that
  // instead of judging the age again every trim_interval. (A wall clock
  // stepped forward meanwhile makes that trim late, by at most the step.)
  bool trim_waits_for_age_ = false;
  SteadyTime next_age_out_;
  // Where subscribers stood at the last timed trim (retention by size
  // changes only when they move).
  uint64_t safe_at_timed_trim_ = 0;
  // A step failed on storage (reading the outbox, writing the horizon): it
  // is tried again after kRetryAfterError.
  bool retry_soon_ = false;
  static constexpr std::chrono::milliseconds kRetryAfterError{50};
  uint64_t trimmed_below_;
  // The tail cache holds nothing below this (DropFetched).
  uint64_t tail_dropped_below_ = 0;
  // What subscribers behind the tail read from the outbox, for the others
  // catching up over the same seqs.
  BacklogWindow backlog_;
  // Trimmed outbox entries between compaction requests, and where the last
  // request ended. Owned by the dispatcher thread.
  static constexpr uint64_t kCompactAfterTrimmedEvents = 1u << 20;
  uint64_t compaction_suggested_below_;
  // A clock that does not pass by itself (ManualClock) wakes the
  // dispatcher when it moves (clock_watch_ is its registration): due
  // moments on it are not slept towards.
  const bool clock_passes_;
  uint64_t clock_watch_ = 0;
  // Items enqueued for workers whose answers are not all sent yet: what
  // tells a settled bus (see NoteIfSettled) from one whose workers run.
  // Kept only under a clock that does not pass by itself: the hot path
  // pays nothing for it otherwise.
  std::atomic<size_t> unanswered_items_{0};

  // For WaitFor: the subscribers added so far, and a signal on progress.
  Mutex progress_mu_;
  CondVar progress_cv_;
  std::vector<std::shared_ptr<Subscriber>> added_ GUARDED_BY(progress_mu_);
  bool waits_cancelled_ GUARDED_BY(progress_mu_) = false;
  // Counts the moments the dispatcher found nothing to run before its
  // clock moves (only under a clock that does not pass by itself).
  uint64_t settled_epoch_ GUARDED_BY(progress_mu_) = 0;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_DISPATCHER_H_
