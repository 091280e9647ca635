#include "bus/dispatch/dispatcher.h"

#include <pthread.h>

#include <algorithm>
#include <cassert>
#include <limits>
#include <span>

#include "bus/core/envelope.h"
#include "bus/dispatch/replay.h"

namespace walbus::internal {
namespace {

constexpr size_t kFetchChunk = 1024;  // events read per outbox scan

}  // namespace

Dispatcher::Dispatcher(ScopeHost* scope_host, storage::Db* db, Committer* committer, TailCache* tail,
                       Registry* registry, const DispatcherConfig& config)
    : scope_host_(scope_host),
      db_(db),
      committer_(committer),
      tail_(tail),
      registry_(registry),
      config_(config),
      runner_(scope_host, db, committer,
              HandlerRunnerConfig{config.clock, config.schemas, config.log, config.sync_follow_ups},
              [this](std::vector<Message>& replies) {
                bool queued = messages_.EnqueueBulk(std::make_move_iterator(replies.begin()), replies.size());
                assert(queued);
                (void)queued;
              }),
      // Counted only under a clock that does not pass by itself (WaitSettled):
      // the hot path pays nothing for it otherwise.
      pool_(
          &runner_, [this] { WakeDispatcher(); }, !config.clock->PassesByItself()),
      source_(EventSource::Parts{db, committer, tail, config.quarantine, config.log},
              config.max_in_flight_per_subscriber, config.backlog_window_bytes, config.max_payload_bytes),
      progress_writer_(db, committer, registry,
                       ProgressWriterConfig{config.checkpoint_interval, config.trim_interval, config.trim_every_events,
                                            config.retention, config.inbox_window, config.disk_budget,
                                            config.max_in_flight_per_subscriber, config.max_payload_bytes,
                                            config.trimmed_below, config.clock, config.log}),
      dropper_(OldestDropper::Parts{db, committer, config.disk_budget, &source_, config.log, config.max_payload_bytes},
               config.drop_oldest_types),
      replays_(db, committer, config.clock, config.log, config.max_payload_bytes),
      clock_passes_(config.clock->PassesByItself()) {
  assert(config_.worker_threads >= 1);
  if (!clock_passes_) clock_watch_ = config_.clock->Watch([this] { WakeDispatcher(); });
}

Dispatcher::~Dispatcher() {
  Stop();
  // After it, no call of the watcher runs or comes.
  if (!clock_passes_) config_.clock->Unwatch(clock_watch_);
}

void Dispatcher::Start() {
  assert(!started_);
  started_ = true;
  progress_writer_.Start();
  // Named, so that top -H, perf and debuggers tell the bus's threads apart.
  dispatcher_thread_ = std::thread([this] {
    pthread_setname_np(pthread_self(), "walbus-dispatch");
    Loop();
  });
  pool_.Start(config_.worker_threads);
}

void Dispatcher::Stop() {
  assert(!OnWorkerThread());
  if (!started_ || stopped_) return;
  stopped_ = true;
  // Workers first: what they run commits and reaches the dispatcher as
  // messages, which it applies before writing its last checkpoint.
  pool_.Stop();
  stopping_.store(true);
  Send(Message{});
  dispatcher_thread_.join();
}

bool Dispatcher::OnWorkerThread() const { return pool_.OnWorkerThread(); }

void Dispatcher::Add(std::shared_ptr<Subscriber> subscriber) {
  board_.Add(subscriber);
  has_subscribers_.store(true, std::memory_order_release);
  Message m;
  m.kind = Message::Kind::kAdd;
  m.control = std::make_unique<Message::Control>();
  m.control->added = std::move(subscriber);
  Send(std::move(m));
}

uint64_t Dispatcher::MakeRoom(uint64_t bytes) {
  // Close() waits for the calls it admitted before stopping the
  // dispatcher, so a started one answers.
  if (!dropper_.enabled() || !started() || stopping_.load() ||
      std::this_thread::get_id() == dispatcher_thread_.get_id()) {
    return 0;
  }
  Message m;
  m.kind = Message::Kind::kMakeRoom;
  m.control = std::make_unique<Message::Control>();
  m.control->room_bytes = bytes;
  std::future<uint64_t> freed = m.control->room_freed.get_future();
  Send(std::move(m));
  return freed.get();
}

uint64_t Dispatcher::MakeRoomNow(uint64_t bytes) {
  // A commit's events reach the tail cache after its seq is published: a
  // seq the tail was not given yet could be cached after its drop.
  uint64_t up_to = committer_->last_seq();
  if (has_subscribers_.load(std::memory_order_acquire)) {
    up_to = std::min(up_to, tail_->newest());
  } else {
    tail_->DropBelow(up_to + 1);  // a subscriber added now reads these from the outbox
  }
  return dropper_.MakeRoom(bytes, progress_writer_.trimmed_below(), up_to, subs_);
}

void Dispatcher::ResumePaused() {
  Message m;
  m.kind = Message::Kind::kResume;
  Send(std::move(m));
}

void Dispatcher::StartReplay(uint64_t replay_id, storage::ReplayRecord record) {
  assert(IsRunning(record));
  Message m;
  m.kind = Message::Kind::kReplay;
  m.control = std::make_unique<Message::Control>();
  m.control->replay_id = replay_id;
  m.control->replay = std::move(record);
  Send(std::move(m));
}

void Dispatcher::CancelReplay(uint64_t replay_id, const OperatorAction& action) {
  Message m;
  m.kind = Message::Kind::kCancelReplay;
  m.control = std::make_unique<Message::Control>();
  m.control->replay_id = replay_id;
  m.control->replay.cancelled_by = action.operator_name;
  m.control->replay.cancel_reason = action.reason;
  Send(std::move(m));
}

void Dispatcher::PumpReplay(Subscriber* sub) {
  ReplayDriver::Pumped pumped = replays_.Pump(sub);
  retry_soon_ |= pumped.storage_failed;
  for (const std::string& subject : pumped.subjects) {
    auto key = sub->keys.find(subject);
    if (key == sub->keys.end() || !key->second.head_busy) ApplyRedrive(sub, subject);
  }
}

void Dispatcher::NotifyCommitted(std::vector<std::shared_ptr<const Event>>& events) {
  // Without a subscriber (the bridge's relay is one) nobody reads the
  // tail: its events would only be held until evicted, growing the heap
  // of a bus that just publishes; and there is nothing to dispatch, so
  // the wake-up is spared too. A subscriber added meanwhile finds these
  // seqs missing from the tail and reads them from the outbox.
  if (!has_subscribers_.load(std::memory_order_acquire)) return;
  tail_->Append(events);
  // Work is queued that no worker has taken yet (so no worker is waiting:
  // a waiting one would have it): the new events could only queue behind
  // it, and every queued item's completion wakes the dispatcher anyway.
  // The wake is owed instead: the worker that empties the queue pays it
  // (WorkerPool::OweWakeWhileBusy says how that never leaves it unpaid),
  // so the new events are queued by the time a worker is free, instead of
  // one wake-up after its completion. Under load this halves the
  // dispatcher's wake-ups.
  if (!pool_.OweWakeWhileBusy()) WakeDispatcher();
}

void Dispatcher::WakeDispatcher() {
  if (!wake_pending_.exchange(true, std::memory_order_acq_rel)) Send(Message{});
}

void Dispatcher::Send(Message m) {
  // Enqueue allocates only when the queue grows past its previous peak;
  // its length is bounded by the in-flight windows (see the header).
  bool queued = messages_.Enqueue(std::move(m));
  assert(queued);
  (void)queued;
}

void Dispatcher::NoteIfSettled() {
  if (clock_passes_ || pool_.unanswered() != 0) return;
  // A message sent before a WaitSettled began (a commit's wake, its own)
  // is seen here: the moment is not counted.
  board_.PostSettled([this] { return messages_.HasItems(); });
}

// ---------------------------------------------------------------------------
// Dispatcher thread.

void Dispatcher::Loop() {
  Message m;
  // The first pass looks before it sleeps: what the open found (timers
  // scheduled before Start, overdue ones) is due without any message.
  bool first_pass = true;
  while (true) {
    // Idle, it sleeps: no look at a fixed rate, only at the next due moment.
    const std::optional<SteadyTime> due = first_pass ? std::chrono::steady_clock::now() : NextDueMoment();
    first_pass = false;
    if (!due) NoteIfSettled();
    bool woken = true;
    if (due) {
      woken = messages_.WaitDequeueUntil(m, *due);
    } else {
      messages_.WaitDequeue(m);
    }
    if (woken) {
      Handle(m);
      while (messages_.TryDequeue(m)) Handle(m);
    }
    if (stopping_.load()) break;
    retry_soon_ = false;  // each step that fails below asks again
    // Awake: Fetch below sees every commit so far. The fence orders these
    // stores before Fetch's read of the committed seq, against the one in
    // NotifyCommitted: a commit either is seen or finds the flags clear
    // and wakes the dispatcher again.
    wake_pending_.store(false, std::memory_order_relaxed);
    pool_.ForgetOwedWake();
    std::atomic_thread_fence(std::memory_order_seq_cst);
    FireTimers(config_.clock->Now());
    scheduled_wait_ = config_.scheduler->FireDue([this] { return DeliveryKeepsUp(); });
    for (auto& sub : subs_) {
      Fetch(sub.get());
      PumpReplay(sub.get());
    }
    DropFetched();
    FlushReady();
    PublishProgress();
    progress_writer_.Checkpoint(subs_, false);
    progress_writer_.Trim(subs_, false);
  }
  PublishProgress();
  progress_writer_.Checkpoint(subs_, true);
  progress_writer_.RecordCleanStop(subs_);
  progress_writer_.Trim(subs_, true);
}

std::optional<Dispatcher::SteadyTime> Dispatcher::NextDueMoment() const {
  const SteadyTime real_now = std::chrono::steady_clock::now();
  // A step that failed on storage is tried again in real time, whatever
  // the bus's clock.
  std::optional<SteadyTime> again;
  if (retry_soon_ || !ready_.empty()) again = real_now + kRetryAfterError;
  const SteadyTime now = config_.clock->Now();
  std::optional<SteadyTime> due;  // on config_.clock
  auto consider = [&due](SteadyTime t) { due = due ? std::min(*due, t) : t; };
  if (!timers_.empty()) consider(timers_.top().due);
  if (scheduled_wait_) consider(now + *scheduled_wait_);
  if (!clock_passes_) config_.clock->Awaiting(clock_watch_, due);  // the work to come, not the housekeeping
  if (const std::optional<SteadyTime> housekeeping = progress_writer_.NextDueMoment(subs_)) consider(*housekeeping);
  if (!due) return again;
  const auto wait = std::max<SteadyTime::duration>(*due - now, SteadyTime::duration::zero());
  // A clock that does not pass by itself wakes the dispatcher when it
  // moves: only what is due already is looked at now.
  if (!clock_passes_ && wait > SteadyTime::duration::zero()) return again;
  return again ? std::min(*again, real_now + wait) : real_now + wait;
}

bool Dispatcher::DeliveryKeepsUp() const {
  const uint64_t last = committer_->last_seq();
  for (const auto& sub : subs_) {
    const uint64_t done = sub->watermark.load(std::memory_order_relaxed);
    if (last > done && last - done > config_.max_in_flight_per_subscriber) return false;
  }
  return true;
}

namespace {

// Counts a run's end (kDone, kDeadLettered, kDuplicate, kStale) for its
// subscriber, or for the replay it ran in; a dead letter of a live run
// parks its subject under PoisonPolicy::kParkKey.
void CountCompletion(const Message& m) {
  Subscriber* sub = m.sub;
  const bool replayed = ReplayDriver::CountOutcome(sub, *m.event, m.kind);
  switch (m.kind) {
    case Message::Kind::kDone: sub->handled.fetch_add(1, std::memory_order_relaxed); break;
    case Message::Kind::kDeadLettered:
      sub->dead_lettered.fetch_add(1, std::memory_order_relaxed);
      // A replayed event that fails again does not hold its live subject.
      if (!replayed && sub->on_poison == PoisonPolicy::kParkKey) sub->holds.Park(m.event->subject, m.event->seq);
      break;
    case Message::Kind::kDuplicate:
      if (!replayed) {
        sub->duplicates.fetch_add(1, std::memory_order_relaxed);
        ++sub->duplicates_to_persist;
      }
      break;
    case Message::Kind::kStale: sub->stale_skipped.fetch_add(1, std::memory_order_relaxed); break;
    default: assert(false && "not a completion");
  }
}

// What the key's queue keeps of a run that is to run again (kRetry,
// kWait, kRerun), and the subscriber's count of it.
void NoteRunAgain(const Message& m, KeyQueue* key) {
  switch (m.kind) {
    case Message::Kind::kRetry: m.sub->retries.fetch_add(1, std::memory_order_relaxed); break;
    case Message::Kind::kWait: m.sub->waits.fetch_add(1, std::memory_order_relaxed); break;
    case Message::Kind::kRerun: break;
    default: assert(false && "not a run to run again");
  }
  key->history = m.next;
  key->charged = true;
}

}  // namespace

void Dispatcher::Handle(Message& m) {
  // What the turn left unrun waits behind this event as if never handed out.
  if (m.ends_turn) m.sub->keys.at(m.event->subject).in_turn = 1;
  switch (m.kind) {
    case Message::Kind::kWake: break;
    case Message::Kind::kAdd:
      progress_writer_.ForgetCleanStop(*m.control->added);
      subs_.push_back(std::move(m.control->added));
      break;
    case Message::Kind::kDone:
    case Message::Kind::kDeadLettered:
    case Message::Kind::kDuplicate:
    case Message::Kind::kStale:
      CountCompletion(m);
      Complete(m.sub, *m.event);
      break;
    case Message::Kind::kRetry:
    case Message::Kind::kWait:
      NoteRunAgain(m, &m.sub->keys.at(m.event->subject));
      timers_.push(Timer{config_.clock->Now() + m.delay, m.sub, m.event->subject});
      break;
    case Message::Kind::kRerun: {
      KeyQueue& key = m.sub->keys.at(m.event->subject);
      NoteRunAgain(m, &key);
      Submit(m.sub, key);
      break;
    }
    case Message::Kind::kPaused:
      if (!m.sub->paused) {
        config_.log->logger().warn("walbus: subscriber {} paused at seq {}: no upcaster brings {} to a type it takes",
                                   m.sub->name, m.event->seq, m.event->type);
        m.sub->pauses.fetch_add(1, std::memory_order_relaxed);
        progress_writer_.RecordPause(m.sub, *m.event);
      }
      m.sub->paused = true;
      m.sub->paused_now.store(true, std::memory_order_release);
      m.sub->holds.HoldForResume(m.event->subject);
      break;
    case Message::Kind::kRedrive: HandleRedrive(m); break;
    case Message::Kind::kMakeRoom: m.control->room_freed.set_value(MakeRoomNow(m.control->room_bytes)); break;
    case Message::Kind::kReplay: replays_.Begin(subs_, m.control->replay_id, std::move(m.control->replay)); break;
    case Message::Kind::kCancelReplay:
      replays_.Cancel(subs_, m.control->replay_id, std::move(m.control->replay.cancelled_by),
                      std::move(m.control->replay.cancel_reason));
      break;
    case Message::Kind::kResume:
      for (auto& sub : subs_) {
        if (!sub->paused) continue;
        sub->paused = false;
        sub->paused_now.store(false, std::memory_order_release);
        progress_writer_.RecordPause(sub.get(), std::nullopt);
        for (const std::string& subject : sub->holds.TakeHeldForResume()) {
          auto it = sub->keys.find(subject);
          if (it != sub->keys.end() && !it->second.events.empty()) Submit(sub.get(), it->second);
        }
      }
      break;
  }
  m = Message{};
}

void Dispatcher::Complete(Subscriber* sub, const Event& event) {
  auto it = sub->keys.find(event.subject);
  assert(it != sub->keys.end() && !it->second.events.empty());
  KeyQueue& key = it->second;
  assert(key.events.front()->seq == event.seq);
  key.PopFront();
  // A redriven dead letter or a replayed event sits below the watermark
  // already.
  const std::optional<OutOfLineEvents::Kind> out_of_line = sub->out_of_line.Finish(event.seq);
  if (out_of_line == OutOfLineEvents::Kind::kReplay) {
    if (sub->replay != nullptr) sub->replay->in_flight.erase(event.seq);
  } else if (!out_of_line) {
    sub->progress.Complete(event.seq);
  }
  assert(key.in_turn > 0);
  if (--key.in_turn > 0) {  // the next event runs in the same turn
    key.head_busy = true;
    return;
  }
  if (sub->holds.Waiting(event.subject)) {
    ApplyRedrive(sub, event.subject);  // now that the subject is idle
  } else if (key.events.empty()) {
    sub->keys.erase(it);
  } else {
    Submit(sub, key);
  }
}

void Dispatcher::Submit(Subscriber* sub, KeyQueue& key) {
  assert(!key.events.empty());
  key.head_busy = true;
  if (sub->paused) {
    sub->holds.HoldForResume(key.events.front()->subject);
    return;
  }
  WorkItem item;
  item.sub = sub;
  item.event = key.events.front();
  item.history = key.history;
  item.redrive = sub->out_of_line.Is(item.event->seq, OutOfLineEvents::Kind::kRedrive);
  item.replaying = sub->out_of_line.Is(item.event->seq, OutOfLineEvents::Kind::kReplay);
  if (item.replaying && sub->replay != nullptr) {
    item.replay_id = sub->replay->id;
    if (sub->replay->record.mode == static_cast<uint8_t>(ReplayMode::kFreshScope)) item.replay_scope = item.replay_id;
  }
  // A redriven dead letter has an inbox record (written when it was given
  // up on): it must run, not be taken for a duplicate.
  // Only an event handed to a handler before this process started (at or
  // below the recovered horizon) can have an inbox or retry record already.
  // A replayed event looks at its inbox (or its replay's scope) first:
  // that is what makes a replay skip handled events and resume exactly once.
  item.history.check_stored =
      item.replaying ||
      (!item.redrive && (key.history.check_stored || (!key.charged && item.event->seq <= sub->recovered_horizon)));
  if (!item.redrive && !item.replaying) item.parked_behind = sub->holds.ParkedBehind(item.event->subject);
  AddFollowers(*sub, key, &item);
  key.in_turn = 1 + item.followers.size();
  ready_.push_back(std::move(item));
}

void Dispatcher::AddFollowers(const Subscriber& sub, const KeyQueue& key, WorkItem* item) const {
  // Only an event on its first run, in line, with nothing stored to look
  // for, leads a turn, and only such events follow it: the turn has no
  // inbox to read, no retry record, no attempt to charge first.
  auto plain = [&](const Event& event) {
    return event.seq > sub.recovered_horizon && !sub.out_of_line.Contains(event.seq);
  };
  if (key.events.size() < 2 || !item->history.Fresh() || item->redrive || item->replaying || item->parked_behind != 0 ||
      !plain(*item->event)) {
    return;
  }
  size_t bytes = item->event->data.size();
  for (size_t i = 1; i < key.events.size() && item->followers.size() + 1 < kMaxTurnEvents; ++i) {
    const std::shared_ptr<const Event>& next = key.events[i];
    bytes += next->data.size();
    if (bytes > kMaxTurnBytes || !plain(*next)) break;
    item->followers.push_back(next);
  }
}

void Dispatcher::FlushReady() {
  if (ready_.empty() || !progress_writer_.AdvanceHorizons(ready_)) return;
  // One bulk enqueue wakes the workers once for everything this iteration
  // made ready, so they take it in large batches and commit it together.
  pool_.Submit(&ready_);
}

void Dispatcher::FireTimers(SteadyTime now) {
  while (!timers_.empty() && timers_.top().due <= now) {
    Timer t = timers_.top();
    timers_.pop();
    auto it = t.sub->keys.find(t.subject);
    if (it != t.sub->keys.end()) Submit(t.sub, it->second);
  }
}

void Dispatcher::Fetch(Subscriber* sub) {
  if (sub->paused) return;  // no progress until resumed
  const uint64_t last = committer_->last_seq();
  std::vector<BacklogWindow::Slot> batch;
  while (sub->progress.window() < config_.max_in_flight_per_subscriber && sub->progress.next() <= last) {
    const uint64_t from = sub->progress.next();
    const size_t room = config_.max_in_flight_per_subscriber - sub->progress.window();
    const size_t limit = static_cast<size_t>(std::min<uint64_t>({room, last - from + 1, kFetchChunk}));
    batch.clear();
    if (from < progress_writer_.trimmed_below()) {
      // Only a checkpoint moved back by hand lands here: the range was
      // removed after every subscriber had passed it.
      const uint64_t end = std::min<uint64_t>(progress_writer_.trimmed_below(), from + limit);
      config_.log->logger().warn("walbus: {} resumes below the trimmed outbox; seq {}..{} are gone", sub->name, from,
                                 end - 1);
      for (uint64_t seq = from; seq < end; ++seq) PassOver(sub, seq);
      continue;
    }
    if (!source_.Read(from, limit, &batch)) retry_soon_ = true;
    if (batch.empty()) break;
    uint64_t seq = from;
    for (auto& slot : batch) {
      assert(sub->progress.next() == seq && (!slot || slot->seq == seq));
      if (slot) {
        Route(sub, std::move(slot));
      } else {
        PassOver(sub, seq);
      }
      ++seq;
    }
  }
}

void Dispatcher::DropFetched() {
  if (subs_.empty()) return;
  uint64_t lowest = std::numeric_limits<uint64_t>::max();
  for (const auto& sub : subs_) lowest = std::min(lowest, sub->progress.next());
  source_.DropBelow(lowest);
}

void Dispatcher::PassOver(Subscriber* sub, uint64_t seq) {
  sub->progress.Fetched(seq);  // asserts the precondition
  sub->progress.Complete(seq);
}

void Dispatcher::Route(Subscriber* sub, std::shared_ptr<const Event> event) {
  if (!sub->Matches(event->type)) {
    PassOver(sub, event->seq);
    return;
  }
  sub->progress.Fetched(event->seq);
  KeyQueue& key = sub->keys[event->subject];
  key.events.push_back(std::move(event));
  if (!key.head_busy) Submit(sub, key);
  // (A parked subject's events still run: the worker stores them behind
  // the dead letter that holds the subject, in order.)
}

void Dispatcher::PublishProgress() {
  bool moved = false;
  for (auto& sub : subs_) {
    uint64_t w = sub->progress.watermark();
    moved |= sub->watermark.exchange(w, std::memory_order_acq_rel) != w;
    sub->in_flight.store(sub->progress.window(), std::memory_order_relaxed);
  }
  if (moved) board_.PostProgress();
}

}  // namespace walbus::internal
