#include "bus/dispatch/handler_runner.h"

#include <cassert>
#include <random>

#include "bus/core/envelope.h"
#include "bus/core/fault_point.h"
#include "bus/core/scope.h"
#include "bus/dispatch/backoff.h"
#include "bus/util/log_limiter.h"
#include "bus/util/unix_time.h"
#include "storage/keys.h"
#include "storage/records.h"

namespace walbus::internal {
namespace {

std::string ExceptionText(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& ex) {
    return std::string("exception: ") + ex.what();
  } catch (...) {
    return "exception of a type not derived from std::exception";
  }
}

}  // namespace

HandlerRunner::HandlerRunner(ScopeHost* scope_host, storage::Db* db, Committer* committer, HandlerRunnerConfig config,
                             ReplySink send)
    : scope_host_(scope_host), db_(db), committer_(committer), config_(config), send_(std::move(send)) {
  assert(scope_host_ != nullptr && db_ != nullptr && committer_ != nullptr && send_);
  assert(config_.clock != nullptr && config_.schemas != nullptr && config_.log != nullptr);
}

uint64_t HandlerRunner::WallMillis() const { return ToUnixMillisUnsigned(config_.clock->WallNow()); }

std::chrono::milliseconds HandlerRunner::Backoff(const Subscriber& sub, uint32_t attempt) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  return BackoffDelay(sub.retry, std::max<uint32_t>(attempt, 1), rng());
}

std::pair<storage::CfHandle*, std::string> HandlerRunner::InboxSlot(const WorkItem& item) const {
  const std::string_view id = storage::IdBytes(item.event->id);
  if (item.replay_scope != 0) return {db_->cf(storage::Cf::kReplays), storage::ReplayScopeKey(item.replay_scope, id)};
  return {db_->cf(storage::Cf::kInbox), storage::InboxKey(db_->inbox_layout(), item.sub->id, id)};
}

void HandlerRunner::PutInboxRecord(WriteSet* scope, const WorkItem& item, uint64_t now_ms, uint32_t runs) {
  auto [cf, key] = InboxSlot(item);
  scope->Put(cf, std::move(key), storage::InboxValue(item.event->seq, now_ms, runs));
}

void HandlerRunner::AddDeadLetter(WriteSet* scope, const WorkItem& item, uint32_t attempts, std::string_view error) {
  const Subscriber& sub = *item.sub;
  const Event& event = *item.event;
  const uint64_t now = WallMillis();
  storage::DeadLetterRecord record;
  record.attempts = attempts;
  record.first_failure_ms = item.history.first_failure_ms != 0 ? item.history.first_failure_ms : now;
  record.last_failure_ms = now;
  record.error = std::string(error.substr(0, storage::kMaxErrorBytes));
  record.handler_version = sub.handler_version;
  record.envelope = EncodeEnvelope(event);
  const std::string key = storage::SubscriberSeqKey(sub.id, event.seq);
  scope->Put(db_->cf(storage::Cf::kDeadLetters), key, storage::EncodeDeadLetter(record));
  scope->Delete(db_->cf(storage::Cf::kRetries), key);
  // The inbox record makes a redelivery after a crash skip it too.
  PutInboxRecord(scope, item, now, attempts);
  scope->AddCounter(db_->cf(storage::Cf::kCheckpoints),
                    storage::CheckpointKey(sub.id, storage::CheckpointField::kDeadLettered), 1);
  if (sub.on_poison == PoisonPolicy::kParkKey && item.parked_behind == 0 && !item.replaying) {
    std::string seq;
    storage::PutBe64(&seq, event.seq);
    scope->Put(db_->cf(storage::Cf::kCheckpoints),
               storage::CheckpointKey(sub.id, storage::CheckpointField::kParked, event.subject), seq);
  }
}

bool HandlerRunner::PrepareItem(WorkItem& item, std::deque<Run>* runs, std::vector<Message>* replies,
                                WriteSet* pre_run) {
  Subscriber& sub = *item.sub;
  const Event& event = *item.event;
  auto retry_later = [&](const Status& s) {
    config_.log->logger().warn("walbus: {} seq={}: reading stored state failed: {}", sub.name, event.seq, s.ToString());
    replies->push_back(Message::Retry(&sub, item.event, Backoff(sub, item.attempt()), item.history.NotRun()));
    return false;
  };
  // Most items read and write nothing here: the key is made when needed.
  auto seq_key = [&] { return storage::SubscriberSeqKey(sub.id, event.seq); };
  if (item.history.check_stored) {
    std::string value;
    bool found = false;
    const auto [inbox_cf, inbox_key] = InboxSlot(item);
    Status s = db_->Get(inbox_cf, inbox_key, &value, &found);
    if (!s.ok()) return retry_later(s);
    // A same-inbox replay runs what failed: a dead letter has an inbox
    // record too, and is run again like a redriven one.
    if (found && item.replaying && item.replay_scope == 0) {
      s = db_->Get(db_->cf(storage::Cf::kDeadLetters), seq_key(), &value, &item.redrive);
      if (!s.ok()) return retry_later(s);
      found = !item.redrive;
    }
    if (found) {
      replies->push_back(Message::Of(Message::Kind::kDuplicate, &sub, item.event));
      return false;
    }
    s = db_->Get(db_->cf(storage::Cf::kRetries), seq_key(), &value, &found);
    if (!s.ok()) return retry_later(s);
    storage::RetryRecord stored;
    item.has_retry_record = found;
    if (found && storage::DecodeRetry(value, &stored)) {
      item.history.runs = std::max(item.history.runs, stored.attempts);
      if (item.history.first_failure_ms == 0) item.history.first_failure_ms = stored.first_failure_ms;
    } else if (sub.MayHaveBeenRunning(event.seq)) {
      // Handed to a handler before the process stopped, with no record:
      // its first run may have been what stopped it, so it counts. (An
      // event that was only queued is charged too: at most one attempt.)
      item.history.runs = std::max<uint32_t>(item.history.runs, 1);
    }
  }
  if (item.parked_behind != 0 || MayHaveBeenRunning(item)) {
    const bool parked = item.parked_behind != 0;
    const bool spent = item.attempt() > sub.retry.max_attempts;
    if (parked || spent) {
      Run& run = runs->emplace_back();
      run.item = &item;
      run.request.writes = nullptr;  // set by the caller once the scope exists
      run.on_success = Message::Kind::kDeadLettered;
      run.error = parked ? "held behind the dead letter at seq " + std::to_string(item.parked_behind) +
                               " (PoisonPolicy::kParkKey)"
                         : "gave up after " + std::to_string(item.attempt() - 1) +
                               " attempts; the process stopped while handling it";
      return false;
    }
    // This run counts before it starts: if it takes the process down, the
    // next one sees the attempt.
    storage::RetryRecord record;
    record.attempts = item.attempt();
    record.first_failure_ms = item.history.first_failure_ms != 0 ? item.history.first_failure_ms : WallMillis();
    record.last_failure_ms = WallMillis();
    record.last_error = "the process stopped while handling it";
    item.history.first_failure_ms = record.first_failure_ms;
    item.has_retry_record = true;
    pre_run->Put(db_->cf(storage::Cf::kRetries), seq_key(), storage::EncodeRetry(record));
  }
  return true;
}

void HandlerRunner::FailAttempt(Run& run, std::string error, std::chrono::milliseconds delay, bool permanent) {
  WorkItem& item = *run.item;
  const Subscriber& sub = *item.sub;
  const uint64_t now = WallMillis();
  if (item.history.first_failure_ms == 0) item.history.first_failure_ms = now;
  WriteSet* scope = run.request.writes;
  *scope = WriteSet{};  // the attempt's own writes are dropped
  // The wall clock may have jumped back since the first failure: an age
  // below zero is no age, not a huge one.
  const uint64_t age_ms = now > item.history.first_failure_ms ? now - item.history.first_failure_ms : 0;
  const bool too_old = sub.retry.max_age.count() > 0 && age_ms >= static_cast<uint64_t>(sub.retry.max_age.count());
  if (permanent || item.attempt() >= sub.retry.max_attempts || too_old) {
    if (too_old && !permanent) error += " (retry budget: max_age reached)";
    AddDeadLetter(scope, item, item.attempt(), error);
    run.on_success = Message::Kind::kDeadLettered;
    run.error = std::move(error);
    return;
  }
  run.delay = delay.count() > 0 ? delay : Backoff(sub, item.attempt());
  storage::RetryRecord record;
  record.attempts = item.attempt();
  record.first_failure_ms = item.history.first_failure_ms;
  record.last_failure_ms = now;
  record.last_error = error;
  record.next_attempt_ms = now + static_cast<uint64_t>(run.delay.count());
  scope->Put(db_->cf(storage::Cf::kRetries), storage::SubscriberSeqKey(sub.id, item.event->seq),
             storage::EncodeRetry(record));
  run.on_success = Message::Kind::kRetry;
  run.error = std::move(error);
}

bool HandlerRunner::ResolveVersion(Run& run) {
  WorkItem& item = *run.item;
  Subscriber& sub = *item.sub;
  Result<SchemaRegistry::Resolution> r = config_.schemas->Resolve(*item.event, sub.types, &run.upcast);
  if (!r.ok()) {
    FailAttempt(run, r.status().message(), {}, false);
    return false;
  }
  switch (*r) {
    case SchemaRegistry::Resolution::kAsIs:
    case SchemaRegistry::Resolution::kNotWanted: return true;
    case SchemaRegistry::Resolution::kUpcast: run.event = &run.upcast; return true;
    case SchemaRegistry::Resolution::kNoTranslator: break;
  }
  const std::string why = "no upcaster brings " + item.event->type + " to a type " + sub.name + " takes";
  if (sub.on_unknown_version == UnknownVersionPolicy::kDeadLetter) {
    FailAttempt(run, why, {}, /*permanent=*/true);
    return false;
  }
  // Paused: nothing is written; the event waits at the front of its subject.
  run.request.writes->ops.clear();
  run.on_success = Message::Kind::kPaused;
  return false;
}

bool HandlerRunner::SkippedAsStale(Run& run) {
  WorkItem& item = *run.item;
  Subscriber& sub = *item.sub;
  const Event& event = *run.event;
  if (!sub.skip_stale || event.subject_version == 0) return false;
  // Through the context's reader: the runs before it in its turn applied
  // versions too.
  Result<std::optional<std::string>> applied = ScopeAccess::Rep(*run.ctx)->reader.Get(
      db_, db_->cf(storage::Cf::kCheckpoints),
      storage::CheckpointKey(sub.id, storage::CheckpointField::kAppliedVersion, event.subject), nullptr);
  const Status& s = applied.status();
  if (!s.ok()) {
    FailAttempt(run, "reading the applied version failed: " + s.ToString(), {}, false);
    return true;
  }
  if (!applied->has_value() || (*applied)->size() != 8 || storage::GetBe64(**applied) < event.subject_version) {
    return false;
  }
  run.on_success = Message::Kind::kStale;
  PutInboxRecord(run.request.writes, item, WallMillis(), /*runs=*/0);
  run.request.writes->AddCounter(db_->cf(storage::Cf::kCheckpoints),
                                 storage::CheckpointKey(sub.id, storage::CheckpointField::kStaleSkipped), 1);
  return true;
}

void HandlerRunner::RunHandler(Run& run) {
  WorkItem& item = *run.item;
  Subscriber& sub = *item.sub;
  const Event& event = *run.event;
  ScopeRep& context = *ScopeAccess::Rep(*run.ctx);
  if (SkippedAsStale(run)) return;
  Outcome outcome = Outcome::Done();
  std::string error;
  bool permanent = false;
  const auto started = std::chrono::steady_clock::now();
  auto elapsed = [&] { return std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count(); };
  try {
    outcome = sub.handler(event, *run.ctx);
    run.handler_seconds = elapsed();
    sub.handler_seconds.Observe(run.handler_seconds);
  } catch (...) {
    run.handler_seconds = elapsed();
    sub.handler_seconds.Observe(run.handler_seconds);
    std::exception_ptr thrown = std::current_exception();
    error = ExceptionText(thrown);
    permanent = sub.classify_exception && sub.classify_exception(thrown) == FailureClass::kPermanent;
    FailAttempt(run, std::move(error), {}, permanent);
    return;
  }
  switch (outcome.kind()) {
    case Outcome::Kind::kRetry: FailAttempt(run, "handler asked to retry", outcome.delay(), false); return;
    case Outcome::Kind::kReject: FailAttempt(run, "rejected: " + outcome.reason(), {}, true); return;
    case Outcome::Kind::kWait:
      *run.request.writes = WriteSet{};  // nothing to commit: not even a retry record
      run.delay = outcome.delay().count() > 0 ? outcome.delay() : Backoff(sub, 1);
      run.on_success = Message::Kind::kWait;
      run.error = outcome.reason();
      return;
    case Outcome::Kind::kDone: break;
  }
  if (!context.error.ok()) {
    FailAttempt(run, "a call in the handler failed: " + context.error.ToString(), {}, false);
    return;
  }
  AddDoneWrites(run);
}

void HandlerRunner::AddDoneWrites(Run& run) {
  const WorkItem& item = *run.item;
  const Subscriber& sub = *item.sub;
  const Event& event = *run.event;
  WriteSet* scope = run.request.writes;
  PutInboxRecord(scope, item, WallMillis(), item.attempt());
  scope->AddCounter(db_->cf(storage::Cf::kCheckpoints),
                    storage::CheckpointKey(sub.id, storage::CheckpointField::kHandled), 1);
  // A failed attempt in this process wrote a record too (attempt > 1).
  if (item.attempt() > 1 || item.has_retry_record) {
    scope->Delete(db_->cf(storage::Cf::kRetries), storage::SubscriberSeqKey(sub.id, event.seq));
  }
  if (item.redrive) {
    scope->Delete(db_->cf(storage::Cf::kDeadLetters), storage::SubscriberSeqKey(sub.id, event.seq));
  }
  if (sub.skip_stale && event.subject_version != 0) {
    std::string v;
    storage::PutBe64(&v, event.subject_version);
    scope->Put(db_->cf(storage::Cf::kCheckpoints),
               storage::CheckpointKey(sub.id, storage::CheckpointField::kAppliedVersion, event.subject), v);
  }
  // Follow-up events are dispatched once committed, so they must be as
  // durable as a producer's; a completion alone may be lost on power loss
  // and is then redelivered (the effects went with it).
  run.request.sync = config_.sync_follow_ups && (!scope->events.empty() || !scope->timers.empty());
  run.on_success = Message::Kind::kDone;
}

void HandlerRunner::RunBatch(std::span<WorkItem> items) {
  // An event that may have been running when the process stopped runs
  // alone, its attempt recorded first: no other handler of this bus runs
  // until its outcome has committed, so if it takes the process down
  // again, only it is charged, not the events that ran beside it.
  std::vector<WorkItem*> together;
  together.reserve(items.size());
  for (WorkItem& item : items) {
    if (MayHaveBeenRunning(item)) {
      RunGate::Pass pass(&run_gate_, RunGate::Pass::Kind::kAlone);
      WorkItem* alone[] = {&item};
      RunGroup(alone);
    } else {
      together.push_back(&item);
    }
  }
  if (!together.empty()) {
    RunGate::Pass pass(&run_gate_, RunGate::Pass::Kind::kShared);
    RunGroup(together);
  }
}

void HandlerRunner::RunGroup(std::span<WorkItem* const> items) {
  std::deque<Run> runs;  // CommitRequest is not movable
  std::vector<Message> replies;
  replies.reserve(items.size());
  WriteSet pre_run;
  std::vector<WorkItem*> to_run;
  for (WorkItem* item : items) {
    if (PrepareItem(*item, &runs, &replies, &pre_run)) to_run.push_back(item);
  }
  if (!pre_run.ops.empty()) {
    Status s = committer_->CommitUnsynced(&pre_run);
    if (!s.ok()) {
      config_.log->logger().warn("walbus: recording attempts before running failed: {}", s.ToString());
      for (WorkItem* item : to_run) {
        Message retry =
            Message::Retry(item->sub, item->event, Backoff(*item->sub, item->attempt()), item->history.NotRun());
        retry.ends_turn = !item->followers.empty();
        replies.push_back(std::move(retry));
      }
      to_run.clear();
    }
  }
  // Dead letters decided before running (parked subject, spent budget).
  for (Run& run : runs) {
    auto rep = std::make_unique<ScopeRep>(scope_host_);
    run.request.writes = &rep->writes;
    run.ctx = ScopeAccess::NewContext(std::move(rep));
    AddDeadLetter(run.request.writes, *run.item, run.item->history.runs, run.error);
  }
  std::deque<WorkItem> followers;  // the turns' later events, as items of their own
  for (WorkItem* item : to_run) RunTurn(*item, &runs, &followers);
  if (!runs.empty()) CommitRuns(runs, &replies);
  send_(replies);
}

HandlerRunner::Run& HandlerRunner::NewRun(WorkItem& item, std::deque<Run>* runs) {
  auto rep = std::make_unique<ScopeRep>(scope_host_);
  rep->writes.ops.reserve(4);  // a handler's write or two, the inbox record, a counter
  rep->parent = item.event.get();
  rep->subscriber_name = item.sub->name;
  rep->subscriber_id = item.sub->id;
  rep->attempt = item.attempt();
  if (item.replaying) {
    rep->replay = HandlerContext::ReplayRun{item.replay_id,
                                            item.replay_scope != 0 ? ReplayMode::kFreshScope : ReplayMode::kSameInbox};
  }
  Run& run = runs->emplace_back();
  run.item = &item;
  run.event = item.event.get();
  run.request.writes = &rep->writes;
  run.ctx = ScopeAccess::NewContext(std::move(rep));
  return run;
}

void HandlerRunner::RunTurn(WorkItem& head, std::deque<Run>* runs, std::deque<WorkItem>* followers) {
  const auto started = std::chrono::steady_clock::now();
  Run* previous = &NewRun(head, runs);
  previous->turn_left = head.followers.size();
  if (ResolveVersion(*previous)) RunHandler(*previous);
  std::vector<const WriteSet*> earlier;
  for (const std::shared_ptr<const Event>& event : head.followers) {
    // The turn ends at the first event that is not simply done, and once
    // it has run long enough: what is left waits for the next turn.
    if (previous->on_success != Message::Kind::kDone || std::chrono::steady_clock::now() - started >= kMaxTurnTime) {
      return;
    }
    earlier.push_back(previous->request.writes);
    WorkItem& item = followers->emplace_back();
    item.sub = head.sub;
    item.event = event;
    Run& run = NewRun(item, runs);
    run.turn_left = previous->turn_left - 1;
    run.turn_previous = previous;
    run.request.after = &previous->request;
    ScopeAccess::Rep(*run.ctx)->reader.LayOver(earlier);
    previous->turn_followed = true;
    if (ResolveVersion(run)) RunHandler(run);
    previous = &run;
  }
}

void HandlerRunner::LogOutcome(const Run& run) const {
  const Event& event = run.event != nullptr ? *run.event : *run.item->event;
  const std::string& name = run.item->sub->name;
  switch (run.on_success) {
    case Message::Kind::kDone:
      config_.log->EventOutcome(spdlog::level::debug, "handled", event, name, run.item->attempt(), run.handler_seconds,
                                {});
      return;
    case Message::Kind::kStale:
      config_.log->EventOutcome(spdlog::level::debug, "stale-skipped", event, name, run.item->attempt(), 0, {});
      return;
    case Message::Kind::kWait:
      config_.log->EventOutcome(spdlog::level::debug, "waiting", event, name, run.item->attempt(), run.handler_seconds,
                                run.error);
      return;
    case Message::Kind::kRetry:
    case Message::Kind::kDeadLettered: {
      // Failures are what an operator reads the log for, and what a broken
      // handler produces in floods: at most 10 lines a second.
      static LogLimiter limiter(10);
      uint64_t held = 0;
      if (!limiter.Allow(&held)) return;
      config_.log->EventOutcome(spdlog::level::warn,
                                run.on_success == Message::Kind::kRetry ? "retry" : "dead-lettered", event, name,
                                run.item->attempt(), run.handler_seconds, run.error, held);
      return;
    }
    default: return;
  }
}

void HandlerRunner::CommitRuns(std::deque<Run>& runs, std::vector<Message>* replies) {
  std::vector<CommitRequest*> requests;
  requests.reserve(runs.size());
  for (Run& r : runs) {
    if (r.on_success == Message::Kind::kPaused || r.on_success == Message::Kind::kWait) continue;
    // A completion without follow-ups needs no fsync: it does not wait for
    // producers' (the worker would sit on its next events meanwhile).
    r.request.unsynced_group = !r.request.sync;
    requests.push_back(&r.request);
  }
  WALBUS_FAULT_POINT("handler.before_commit");
  committer_->Commit(requests);
  WALBUS_FAULT_POINT("handler.after_commit");
  for (Run& r : runs) {
    // A run made on top of one that ended its turn was refused by the
    // committer: its event waits in its queue as if never handed out.
    if (r.turn_previous != nullptr && !r.turn_previous->turn_went_on) continue;
    Message reply = Answer(r);
    r.turn_went_on = r.turn_followed && r.request.status.ok() && r.on_success == Message::Kind::kDone;
    reply.ends_turn = r.turn_left > 0 && !r.turn_went_on;
    replies->push_back(std::move(reply));
  }
}

Message HandlerRunner::Answer(const Run& r) {
  WorkItem& item = *r.item;
  Subscriber& sub = *item.sub;
  if (r.on_success == Message::Kind::kPaused) return Message::Of(Message::Kind::kPaused, &sub, item.event);
  if (r.on_success == Message::Kind::kWait) {
    LogOutcome(r);
    return Message::Wait(&sub, item.event, r.delay, item.history);  // the same attempt again
  }
  const Status& s = r.request.status;
  if (s.ok()) {
    LogOutcome(r);
    if (r.on_success != Message::Kind::kRetry) return Message::Of(r.on_success, &sub, item.event);
    return Message::Retry(&sub, item.event, r.delay, item.history.Failed(/*outcome_unknown=*/false));
  }
  if (s.IsConflict()) {
    // Optimistic concurrency at work, rerun by design: counted
    // (walbus_subscriber_conflicts_total), not a warning.
    sub.conflicts.fetch_add(1, std::memory_order_relaxed);
    config_.log->logger().debug("walbus: {}'s outcome for seq={} met a concurrent update, run again: {}", sub.name,
                                item.event->seq, s.ToString());
    if (item.history.conflict_reruns + 1 <= sub.retry.max_conflict_reruns) {
      return Message::Rerun(&sub, item.event, item.history.Conflicted());
    }
    // Past its budget it counts as a failed attempt (the retry record
    // comes with the next failure or the dead letter).
    return Message::Retry(&sub, item.event, Backoff(sub, item.attempt()),
                          item.history.Failed(/*outcome_unknown=*/true));
  }
  // Any other commit error leaves the outcome unknown, so the next run
  // looks at the inbox first.
  static LogLimiter limiter(10);
  if (uint64_t held = 0; limiter.Allow(&held)) {
    config_.log->logger().warn("walbus: committing {}'s outcome for seq={} failed: {} ({} similar lines held back)",
                               sub.name, item.event->seq, s.ToString(), held);
  }
  return Message::Retry(&sub, item.event, Backoff(sub, item.attempt()), item.history.Failed(/*outcome_unknown=*/true));
}

}  // namespace walbus::internal
