// HandlerRunner: runs handlers on work items and commits what each run
// leaves (its effects and completion, a retry record, a dead letter),
// answering every item with Messages for the dispatcher.
//
//   RunBatch(items) --> per item: inbox and retry record read when memory
//   may be behind storage, the event brought to a version the subscriber
//   takes, the handler run (with the followers of its turn), the outcome
//   classified --> one group commit --> replies
//
// It knows nothing of queues or threads: the dispatcher's workers call it
// and hand the replies on. What it needs is narrow: storage for reads, the
// committer, the scope host its handlers' contexts call, the schemas, a
// clock and a log.
//
// Threading: RunBatch is thread-safe (the workers call it side by side);
// an item's Subscriber is read, and only its thread-safe counters written.
#ifndef WALBUS_BUS_DISPATCH_HANDLER_RUNNER_H_
#define WALBUS_BUS_DISPATCH_HANDLER_RUNNER_H_

#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "bus/core/committer.h"
#include "bus/core/schema_registry.h"
#include "bus/dispatch/run_gate.h"
#include "bus/dispatch/work.h"
#include "bus/telemetry/log.h"
#include "storage/db.h"
#include "walbus/clock.h"

namespace walbus::internal {

class ScopeHost;

struct HandlerRunnerConfig {
  const Clock* clock;
  const SchemaRegistry* schemas;
  const BusLog* log;
  // Completions that publish follow-up events fsync (kSync).
  bool sync_follow_ups;
};

class HandlerRunner {
 public:
  // Takes the replies of a group of runs (one call per group).
  using ReplySink = std::function<void(std::vector<Message>& replies)>;

  // Bounds the time of a turn's handler runs: a hot subject shares the
  // workers with the others (the dispatcher bounds its events and bytes).
  static constexpr std::chrono::milliseconds kMaxTurnTime{2};

  // REQUIRES: every pointer outlives the runner.
  HandlerRunner(ScopeHost* scope_host, storage::Db* db, Committer* committer, HandlerRunnerConfig config,
                ReplySink send);
  HandlerRunner(const HandlerRunner&) = delete;
  HandlerRunner& operator=(const HandlerRunner&) = delete;

  // Runs the items and sends at least one reply per item. An item that may
  // have been running when the process last stopped runs alone (no other
  // handler of the runner runs meanwhile), its attempt recorded first.
  void RunBatch(std::span<WorkItem> items);

 private:
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

  // May the item have been running when the process last stopped? Then
  // its attempt is recorded before it runs, and it runs alone.
  static bool MayHaveBeenRunning(const WorkItem& item) {
    return item.history.check_stored && item.sub->MayHaveBeenRunning(item.event->seq);
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
  // Under SubscriberOptions::skip_stale: true when the event's subject
  // version was applied already (the run then completes as kStale,
  // without the handler) or could not be read (a failed attempt).
  bool SkippedAsStale(Run& run);
  // A handled run's writes beside its effects: the inbox record and the
  // handled count, its retry record and dead letter gone, its subject
  // version applied; and whether the commit must be synced.
  void AddDoneWrites(Run& run);
  // Turns a failed attempt into a retry record (and kRetry) or, once the
  // budget is spent, a dead letter.
  void FailAttempt(Run& run, std::string error, std::chrono::milliseconds delay, bool permanent);
  // The dead letter of `item` after `attempts` runs, dated from its first failure.
  void AddDeadLetter(WriteSet* scope, const WorkItem& item, uint32_t attempts, std::string_view error);
  // Where the item's completion is recorded: the subscriber's inbox, or a
  // kFreshScope replay's own scope.
  std::pair<storage::CfHandle*, std::string> InboxSlot(const WorkItem& item) const;
  void PutInboxRecord(WriteSet* scope, const WorkItem& item, uint64_t now_ms, uint32_t runs);
  // Commits the runs in order and answers each; a turn's answers end at
  // its first event not done and committed.
  void CommitRuns(std::deque<Run>& runs, std::vector<Message>* replies);
  // The answer to one run once its commit returned (or it was paused).
  Message Answer(const Run& run);
  // One log line for a committed outcome (failures rate-limited).
  void LogOutcome(const Run& run) const;
  std::chrono::milliseconds Backoff(const Subscriber& sub, uint32_t attempt) const;
  uint64_t WallMillis() const;

  ScopeHost* const scope_host_;
  storage::Db* const db_;
  Committer* const committer_;
  const HandlerRunnerConfig config_;
  const ReplySink send_;
  // Runs side by side, or one alone (RunBatch).
  RunGate run_gate_;
};

}  // namespace walbus::internal

#endif  // WALBUS_BUS_DISPATCH_HANDLER_RUNNER_H_
