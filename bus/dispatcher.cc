#include "bus/dispatcher.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cassert>
#include <deque>
#include <random>

#include "bus/envelope.h"
#include "bus/fault_point.h"
#include "bus/scope.h"
#include "storage/keys.h"

namespace walbus::internal {
namespace {

constexpr size_t kWorkerBulk = 64;       // events one worker runs per commit
constexpr size_t kFetchChunk = 1024;     // events read per outbox scan
constexpr auto kIdleWait = std::chrono::milliseconds(50);

uint64_t NowUnixMillis() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::system_clock::now().time_since_epoch())
                                   .count());
}

std::string_view IdBytes(const EventId& id) {
  return std::string_view(reinterpret_cast<const char*>(id.bytes.data()), id.bytes.size());
}

// Dead letter value: be64(unix ms) + be32(attempts) + be32(len) + reason +
// envelope. The failure-handling work gives it a richer record.
std::string DeadLetterValue(const Event& event, uint32_t attempts, std::string_view reason) {
  std::string v;
  storage::PutBe64(&v, NowUnixMillis());
  storage::PutBe32(&v, attempts);
  storage::PutBe32(&v, static_cast<uint32_t>(reason.size()));
  v.append(reason);
  v.append(EncodeEnvelope(event));
  return v;
}

}  // namespace

Dispatcher::Dispatcher(BusImpl* bus, storage::Db* db, Committer* committer, TailCache* tail,
                       Registry* registry, DispatcherConfig config)
    : bus_(bus),
      db_(db),
      committer_(committer),
      tail_(tail),
      registry_(registry),
      config_(config),
      trimmed_below_(config.trimmed_below) {
  assert(config_.worker_threads >= 1);
}

Dispatcher::~Dispatcher() { Stop(); }

void Dispatcher::Start() {
  assert(!started_);
  started_ = true;
  next_checkpoint_ = Clock::now() + config_.checkpoint_interval;
  next_trim_ = Clock::now() + config_.trim_interval;
  dispatcher_thread_ = std::thread([this] { Loop(); });
  for (size_t i = 0; i < config_.worker_threads; ++i) workers_.emplace_back([this] { WorkerLoop(); });
}

void Dispatcher::Stop() {
  assert(!OnWorkerThread());
  if (!started_ || stopped_) return;
  stopped_ = true;
  // Workers first: what they run commits and reaches the dispatcher as
  // messages, which it applies before writing its last checkpoint.
  stopping_workers_.store(true);
  for (auto& w : workers_) w.join();
  stopping_.store(true);
  Send(Message{});
  dispatcher_thread_.join();
}

bool Dispatcher::OnWorkerThread() const {
  const auto self = std::this_thread::get_id();
  return std::any_of(workers_.begin(), workers_.end(),
                     [self](const std::thread& t) { return t.get_id() == self; });
}

void Dispatcher::Add(std::shared_ptr<Subscriber> subscriber) {
  {
    std::lock_guard<std::mutex> lock(progress_mu_);
    added_.push_back(subscriber);
  }
  has_subscribers_.store(true, std::memory_order_release);
  Message m;
  m.kind = Message::Kind::kAdd;
  m.added = std::move(subscriber);
  Send(std::move(m));
}

void Dispatcher::NotifyCommitted() {
  // Without subscribers there is nothing to dispatch: spare the wake-up.
  if (!has_subscribers_.load(std::memory_order_acquire)) return;
  if (!wake_pending_.exchange(true, std::memory_order_acq_rel)) Send(Message{});
}

void Dispatcher::Send(Message m) {
  // Enqueue allocates only when the queue grows past its previous peak;
  // its length is bounded by the in-flight windows (see the header).
  bool queued = messages_.enqueue(std::move(m));
  assert(queued);
  (void)queued;
}

Status Dispatcher::WaitFor(uint64_t target, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  std::unique_lock<std::mutex> lock(progress_mu_);
  while (true) {
    bool reached = std::all_of(added_.begin(), added_.end(), [target](const auto& s) {
      return s->watermark.load(std::memory_order_acquire) >= target;
    });
    if (reached) return Status::OK();
    if (Clock::now() >= deadline) {
      return Status::TimedOut("subscribers did not reach seq " + std::to_string(target) + " in time");
    }
    progress_cv_.wait_until(lock, std::min(deadline, Clock::now() + std::chrono::milliseconds(10)));
  }
}

// ---------------------------------------------------------------------------
// Dispatcher thread.

void Dispatcher::Loop() {
  Message m;
  while (true) {
    auto wait = kIdleWait;
    if (!timers_.empty()) {
      auto until = std::chrono::duration_cast<std::chrono::milliseconds>(timers_.top().due - Clock::now());
      wait = std::clamp(until, std::chrono::milliseconds(0), wait);
    }
    if (messages_.wait_dequeue_timed(m, std::chrono::duration_cast<std::chrono::microseconds>(wait))) {
      Handle(m);
      while (messages_.try_dequeue(m)) Handle(m);
    }
    if (stopping_.load()) break;
    wake_pending_.store(false, std::memory_order_release);
    FireTimers(Clock::now());
    for (auto& sub : subs_) Fetch(sub.get());
    FlushReady();
    PublishProgress();
    Checkpoint(false);
    Trim(false);
  }
  PublishProgress();
  Checkpoint(true);
  Trim(true);
}

void Dispatcher::Handle(Message& m) {
  switch (m.kind) {
    case Message::Kind::kWake:
      break;
    case Message::Kind::kAdd:
      subs_.push_back(std::move(m.added));
      break;
    case Message::Kind::kDone:
      m.sub->handled.fetch_add(1, std::memory_order_relaxed);
      Complete(m.sub, *m.event);
      break;
    case Message::Kind::kRejected:
      m.sub->rejected.fetch_add(1, std::memory_order_relaxed);
      Complete(m.sub, *m.event);
      break;
    case Message::Kind::kDuplicate:
      m.sub->duplicates.fetch_add(1, std::memory_order_relaxed);
      ++m.sub->duplicates_to_persist;
      Complete(m.sub, *m.event);
      break;
    case Message::Kind::kRetry: {
      m.sub->retries.fetch_add(1, std::memory_order_relaxed);
      KeyQueue& key = m.sub->keys.at(m.event->subject);
      ++key.attempts;
      key.check_inbox = true;
      timers_.push(Timer{Clock::now() + m.delay, m.sub, m.event->subject});
      break;
    }
    case Message::Kind::kRerun: {
      KeyQueue& key = m.sub->keys.at(m.event->subject);
      ++key.attempts;
      Submit(m.sub, key);
      break;
    }
  }
  m = Message{};
}

void Dispatcher::Complete(Subscriber* sub, const Event& event) {
  auto it = sub->keys.find(event.subject);
  assert(it != sub->keys.end() && !it->second.events.empty());
  KeyQueue& key = it->second;
  assert(key.events.front()->seq == event.seq);
  key.events.pop_front();
  key.head_busy = false;
  key.attempts = 0;
  key.check_inbox = false;
  sub->progress.Complete(event.seq);
  if (key.events.empty()) {
    sub->keys.erase(it);
  } else {
    Submit(sub, key);
  }
}

void Dispatcher::Submit(Subscriber* sub, KeyQueue& key) {
  assert(!key.events.empty());
  key.head_busy = true;
  WorkItem item;
  item.sub = sub;
  item.event = key.events.front();
  item.attempt = key.attempts + 1;
  item.check_inbox = key.check_inbox || item.event->seq <= config_.recovered_last_seq;
  ready_.push_back(std::move(item));
}

void Dispatcher::FlushReady() {
  if (ready_.empty()) return;
  // One bulk enqueue wakes the workers once for everything this iteration
  // made ready, so they take it in large batches and commit it together.
  bool queued = work_.enqueue_bulk(std::make_move_iterator(ready_.begin()), ready_.size());
  assert(queued);
  (void)queued;
  ready_.clear();
}

void Dispatcher::FireTimers(Clock::time_point now) {
  while (!timers_.empty() && timers_.top().due <= now) {
    Timer t = timers_.top();
    timers_.pop();
    auto it = t.sub->keys.find(t.subject);
    if (it != t.sub->keys.end()) Submit(t.sub, it->second);
  }
}

void Dispatcher::Fetch(Subscriber* sub) {
  const uint64_t last = committer_->last_seq();
  std::vector<std::shared_ptr<const Event>> batch;
  while (sub->progress.window() < config_.max_in_flight_per_subscriber && sub->progress.next() <= last) {
    const uint64_t from = sub->progress.next();
    const size_t room = config_.max_in_flight_per_subscriber - sub->progress.window();
    const size_t limit = static_cast<size_t>(std::min<uint64_t>({room, last - from + 1, kFetchChunk}));
    batch.clear();
    if (from < trimmed_below_) {
      // Only a checkpoint moved back by hand lands here: the range was
      // removed after every subscriber had passed it.
      const uint64_t end = std::min<uint64_t>(trimmed_below_, from + limit);
      spdlog::warn("walbus: {} resumes below the trimmed outbox; seq {}..{} are gone", sub->name, from, end - 1);
      for (uint64_t seq = from; seq < end; ++seq) {
        sub->progress.Fetched(seq);
        sub->progress.Complete(seq);
      }
      continue;
    }
    if (tail_->Read(from, limit, &batch) == 0) ReadFromOutbox(sub, from, limit, &batch);
    if (batch.empty()) break;
    for (auto& e : batch) Route(sub, std::move(e));
  }
}

void Dispatcher::ReadFromOutbox(Subscriber* sub, uint64_t from, size_t limit,
                                std::vector<std::shared_ptr<const Event>>* out) {
  uint64_t expected = from;
  Status s = db_->ScanOutbox(from, limit, [&](uint64_t seq, std::string_view bytes) {
    // A missing seq can only be one that was trimmed below every
    // checkpoint; account for it so the watermark can pass it.
    for (; expected < seq && sub->progress.next() == expected; ++expected) {
      sub->progress.Fetched(expected);
      sub->progress.Complete(expected);
    }
    auto event = std::make_shared<Event>();
    Status d = DecodeEnvelope(bytes, config_.max_payload_bytes, event.get());
    event->seq = seq;
    expected = seq + 1;
    if (!d.ok()) {
      spdlog::error("walbus: outbox entry seq={} is unreadable and is skipped for {}: {}", seq,
                    sub->name, d.ToString());
      sub->progress.Fetched(seq);
      sub->progress.Complete(seq);
      return true;
    }
    out->push_back(std::move(event));
    return true;
  });
  if (!s.ok()) spdlog::error("walbus: reading the outbox from seq {} failed: {}", from, s.ToString());
}

void Dispatcher::Route(Subscriber* sub, std::shared_ptr<const Event> event) {
  sub->progress.Fetched(event->seq);
  if (!sub->Matches(event->type)) {
    sub->progress.Complete(event->seq);
    return;
  }
  KeyQueue& key = sub->keys[event->subject];
  key.events.push_back(std::move(event));
  if (!key.head_busy) Submit(sub, key);
}

void Dispatcher::PublishProgress() {
  bool moved = false;
  for (auto& sub : subs_) {
    uint64_t w = sub->progress.watermark();
    moved |= sub->watermark.exchange(w, std::memory_order_acq_rel) != w;
    sub->in_flight.store(sub->progress.window(), std::memory_order_relaxed);
  }
  if (moved) {
    std::lock_guard<std::mutex> lock(progress_mu_);
    progress_cv_.notify_all();
  }
}

void Dispatcher::Checkpoint(bool force) {
  const auto now = Clock::now();
  if (!force && now < next_checkpoint_) return;
  next_checkpoint_ = now + config_.checkpoint_interval;
  ScopeRep scope(bus_);
  for (auto& sub : subs_) {
    if (sub->progress.watermark() > sub->durable_checkpoint) {
      std::string v;
      storage::PutBe64(&v, sub->progress.watermark());
      scope.AddOp(Op{Op::Kind::kPut, db_->cf(storage::Cf::kCheckpoints),
                     storage::CheckpointKey(sub->id, storage::CheckpointField::kWatermark), std::move(v)});
    }
    if (sub->duplicates_to_persist > 0) {
      scope.AddOp(Op{Op::Kind::kAddCounter, db_->cf(storage::Cf::kCheckpoints),
                     storage::CheckpointKey(sub->id, storage::CheckpointField::kDuplicates), {},
                     sub->duplicates_to_persist});
    }
  }
  if (scope.ops.empty()) return;
  WALBUS_FAULT_POINT("checkpoint.before_write");
  if (Status s = committer_->CommitOne(&scope, /*sync=*/false); !s.ok()) {
    spdlog::warn("walbus: checkpoint write failed (retried later): {}", s.ToString());
    return;
  }
  std::lock_guard<std::mutex> lock(registry_->mu);
  for (auto& sub : subs_) {
    sub->durable_checkpoint = sub->progress.watermark();
    sub->duplicates_to_persist = 0;
    registry_->by_name.at(sub->name).durable.checkpoint = sub->durable_checkpoint;
  }
}

void Dispatcher::Trim(bool force) {
  const auto now = Clock::now();
  std::lock_guard<std::mutex> lock(registry_->mu);
  const uint64_t keep_from = registry_->MinCheckpoint(committer_->last_seq()) + 1;
  if (keep_from <= trimmed_below_) return;
  const bool due = force || now >= next_trim_ || keep_from - trimmed_below_ >= config_.trim_every_events;
  if (!due) return;
  next_trim_ = now + config_.trim_interval;
  ScopeRep scope(bus_);
  scope.AddOp(Op{Op::Kind::kDeleteRange, db_->cf(storage::Cf::kOutbox), storage::OutboxKey(trimmed_below_),
                 storage::OutboxKey(keep_from)});
  std::string v;
  storage::PutBe64(&v, keep_from);
  scope.AddOp(Op{Op::Kind::kPut, db_->cf(storage::Cf::kMeta), std::string(storage::kMetaTrimmedBelow), v});
  if (Status s = committer_->CommitOne(&scope, /*sync=*/false); !s.ok()) {
    spdlog::warn("walbus: outbox trim failed (retried later): {}", s.ToString());
    return;
  }
  WALBUS_FAULT_POINT("trim.after_write");
  trimmed_below_ = keep_from;
}

// ---------------------------------------------------------------------------
// Worker threads.

void Dispatcher::WorkerLoop() {
  std::vector<WorkItem> items(kWorkerBulk);
  while (true) {
    size_t n = work_.wait_dequeue_bulk_timed(items.begin(), kWorkerBulk,
                                             std::chrono::duration_cast<std::chrono::microseconds>(kIdleWait));
    if (stopping_workers_.load()) break;  // queued work is redelivered on the next open
    if (n > 0) RunBatch(items, n);
  }
}

std::chrono::milliseconds Dispatcher::Backoff(const Subscriber& sub, uint32_t attempt) const {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  const int64_t base = std::max<int64_t>(1, sub.retry.base.count());
  const int64_t cap = std::max<int64_t>(base, sub.retry.cap.count());
  const uint32_t shift = std::min<uint32_t>(attempt > 0 ? attempt - 1 : 0, 30);
  const int64_t ceiling = std::min<int64_t>(cap, base << shift);
  // Full jitter, with a floor of 1 ms so that a failing key never spins.
  return std::chrono::milliseconds(std::uniform_int_distribution<int64_t>(1, ceiling)(rng));
}

void Dispatcher::RunBatch(std::vector<WorkItem>& items, size_t n) {
  std::deque<Run> runs;  // CommitRequest is not movable
  std::vector<Message> replies;
  replies.reserve(n);
  const uint64_t now_ms = NowUnixMillis();
  for (size_t i = 0; i < n; ++i) {
    WorkItem& item = items[i];
    Subscriber& sub = *item.sub;
    const Event& event = *item.event;
    const std::string inbox_key = storage::InboxKey(sub.id, IdBytes(event.id));
    if (item.check_inbox) {
      std::string ignored;
      bool found = false;
      Status s = db_->Get(db_->cf(storage::Cf::kInbox), inbox_key, &ignored, &found);
      if (!s.ok()) {
        spdlog::warn("walbus: inbox read for {} seq={} failed: {}", sub.name, event.seq, s.ToString());
        replies.push_back(Message{Message::Kind::kRetry, &sub, item.event, Backoff(sub, item.attempt), nullptr});
        continue;
      }
      if (found) {
        replies.push_back(Message{Message::Kind::kDuplicate, &sub, item.event, {}, nullptr});
        continue;
      }
    }
    auto rep = std::make_unique<ScopeRep>(bus_);
    rep->parent = &event;
    rep->subscriber_name = sub.name;
    rep->idempotency_key = sub.name + "/" + event.id.ToString();
    rep->attempt = item.attempt;
    ScopeRep* scope = rep.get();
    std::unique_ptr<HandlerContext> ctx = ScopeAccess::NewContext(std::move(rep));
    Outcome outcome = Outcome::Done();
    try {
      outcome = sub.handler(event, *ctx);
    } catch (const std::exception& e) {
      spdlog::warn("walbus: handler {} threw on event {} (seq={}, attempt {}): {}", sub.name,
                   event.id.ToString(), event.seq, item.attempt, e.what());
      outcome = Outcome::RetryAfter(Backoff(sub, item.attempt));
    } catch (...) {
      spdlog::warn("walbus: handler {} threw a non-exception on event {} (seq={}, attempt {})", sub.name,
                   event.id.ToString(), event.seq, item.attempt);
      outcome = Outcome::RetryAfter(Backoff(sub, item.attempt));
    }
    if (outcome.kind() == Outcome::Kind::kRetry) {
      auto delay = outcome.delay().count() > 0 ? outcome.delay() : Backoff(sub, item.attempt);
      replies.push_back(Message{Message::Kind::kRetry, &sub, item.event, delay, nullptr});
      continue;
    }
    const bool rejected = outcome.kind() == Outcome::Kind::kReject;
    if (rejected) {
      // The handler's writes are dropped; only the verdict is recorded.
      *scope = ScopeRep(bus_);
      scope->AddOp(Op{Op::Kind::kPut, db_->cf(storage::Cf::kDeadLetters),
                      storage::DeadLetterKey(sub.id, event.seq),
                      DeadLetterValue(event, item.attempt, outcome.reason())});
    } else if (!scope->error.ok()) {
      spdlog::warn("walbus: handler {} returned Done after a failed call on event {}: {}; retrying",
                   sub.name, event.id.ToString(), scope->error.ToString());
      replies.push_back(Message{Message::Kind::kRetry, &sub, item.event, Backoff(sub, item.attempt), nullptr});
      continue;
    }
    scope->AddOp(Op{Op::Kind::kPut, db_->cf(storage::Cf::kInbox), inbox_key,
                    storage::InboxValue(event.seq, now_ms)});
    scope->AddOp(Op{Op::Kind::kAddCounter, db_->cf(storage::Cf::kCheckpoints),
                    storage::CheckpointKey(sub.id, rejected ? storage::CheckpointField::kRejected
                                                            : storage::CheckpointField::kHandled),
                    {}, 1});
    Run& run = runs.emplace_back();
    run.item = &item;
    run.ctx = std::move(ctx);
    run.rejected = rejected;
    run.request.scope = scope;
    // Follow-up events are dispatched once committed, so they must be as
    // durable as a producer's; a completion alone may be lost on power loss
    // and is then redelivered (the effects went with it).
    run.request.sync = config_.sync_follow_ups && !scope->events.empty();
  }
  if (!runs.empty()) CommitRuns(runs, &replies);
  bool queued = messages_.enqueue_bulk(std::make_move_iterator(replies.begin()), replies.size());
  assert(queued);
  (void)queued;
}

void Dispatcher::CommitRuns(std::deque<Run>& runs, std::vector<Message>* replies) {
  std::vector<CommitRequest*> requests;
  requests.reserve(runs.size());
  for (Run& r : runs) requests.push_back(&r.request);
  WALBUS_FAULT_POINT("handler.before_commit");
  committer_->Commit(requests);
  WALBUS_FAULT_POINT("handler.after_commit");
  for (Run& r : runs) {
    Subscriber& sub = *r.item->sub;
    const Status& s = r.request.status;
    if (s.ok()) {
      replies->push_back(Message{r.rejected ? Message::Kind::kRejected : Message::Kind::kDone, &sub, r.item->event, {}, nullptr});
    } else if (s.IsConflict()) {
      replies->push_back(Message{Message::Kind::kRerun, &sub, r.item->event, {}, nullptr});
    } else {
      spdlog::warn("walbus: committing {}'s effects for seq={} failed: {}", sub.name, r.item->event->seq,
                   s.ToString());
      replies->push_back(Message{Message::Kind::kRetry, &sub, r.item->event, Backoff(sub, r.item->attempt), nullptr});
    }
  }
}

}  // namespace walbus::internal
